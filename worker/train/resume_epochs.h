// How far a checkpoint trained, against the epochs its resume asks for
// (train.epochs, --epochs). A resume trains on to train.epochs and never
// undoes an epoch, so a checkpoint that has begun more epochs than the job
// asks for, or a finished worker asked to go past the epochs it finished
// at, would report train.epochs beside figures of another number of
// epochs. Both are refused before any process connects (tether-launch and
// tether-worker, exit 2, through CheckResumeConfig) and by the resume
// itself.
//
// Ownership: values in, values out. Thread-safety: re-entrant (the reader
// is called on the caller's thread).
#pragma once

#include <optional>
#include <string>

#include "core/status.h"
#include "proto/checkpoint.pb.h"
#include "proto/config.pb.h"
#include "worker/train/resume_plan.h"

namespace tether {

/// The epochs checkpoint `m` has begun: the highest 1-based epoch any
/// worker trained a row of, and which worker (`rank`; -1 with data on
/// demand, where shard 0's dealing state `chunks` says it).
struct EpochsBegun {
  int epochs = 0;
  int rank = -1;
};

/// A worker's epochs begun, from its state at the cut: its epoch in
/// progress counts once it trained a row of it (`next_row` > 0), or when
/// the state deals the rows another number of workers left of it.
int StateEpochsBegun(const WorkerState& s);

/// The epochs a FINISHED entry's worker trained: its recorded validation
/// outcome's epochs_trained (early stopping may end before train.epochs),
/// else the checkpoint's train.epochs; 0 when the manifest records no
/// config (nothing to compare).
int FinishedEpochs(const CheckpointManifest& m, const CheckpointWorker& entry);

/// Why `config` may not resume checkpoint `m` for its epochs: "" when it
/// may, else e.g. "the checkpoint has begun epoch 15 (worker 0), but
/// train.epochs (--epochs) is 3: ...". With data on demand (`chunks` set)
/// the dealing state's completed rows per epoch decide, and train.epochs
/// may grow (shard 0 deals the new epochs). With the static split, a
/// worker whose entry is FINISHED has no place to go on from: a job that
/// resumes its own state (the checkpoint's number of workers), or whose
/// every worker finished, may not ask for more epochs than it finished at.
/// Errors: the reader's (a worker state that cannot be read).
StatusOr<std::string> ResumeEpochsDiff(const CheckpointManifest& m, const std::optional<ChunkCoordinatorState>& chunks,
                                       const JobConfig& config, const WorkerStateReader& read);

}  // namespace tether
