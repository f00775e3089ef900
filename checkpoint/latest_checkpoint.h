// Reading the latest checkpoint of a folder that a live job may be pruning
// while it is read (tether-export on a running job's checkpoint.dir). A job
// with checkpoint.keep_last prunes an older checkpoint as soon as a newer one
// is complete, so the checkpoint a reader chose as the latest can vanish
// between its choice and its last file. The reader then chooses again: the
// newer checkpoint that made the pruning possible is complete by then. It
// tries a bounded number of times, and when every choice was pruned under it
// it says so, naming the live job that holds the folder (checkpoint/
// dir_lock.h) and what to do. A checkpoint named on its own (not its
// folder) is read once: there is no other to choose.
//
// Ownership: plain values. Thread-safety: re-entrant.
#pragma once

#include <functional>
#include <string>

#include "checkpoint/trained_model.h"
#include "core/status.h"
#include "proto/checkpoint.pb.h"

namespace tether {

/// A checkpoint as read whole: its directory, its MANIFEST and its weights.
struct LoadedCheckpoint {
  std::string dir;              // the checkpoint directory read (ckpt-...)
  CheckpointManifest manifest;  // its MANIFEST (the training data stamps among it)
  TrainedModel model;           // its weights (LoadTrainedModel)
};

/// How many times LoadLatestCheckpoint chooses the latest checkpoint of a
/// folder before it gives up on one pruned under it each time.
inline constexpr int kLatestCheckpointTries = 5;

/// Called with the checkpoint directory just chosen, before any of its
/// files is read (tests prune there; nullptr: nothing).
using CheckpointChosenFn = std::function<void(const std::string& dir)>;

/// Reads the checkpoint `path` names (as ResolveCheckpoint: a checkpoint,
/// or a folder whose latest complete one is read). For a folder, when the
/// read fails and the chosen checkpoint is no longer the folder's latest
/// complete one (it was pruned, or a newer one appeared), chooses again, at
/// most `tries` times in all. Errors: ResolveCheckpoint's, ReadManifest's
/// and LoadTrainedModel's for a read that fails with no newer checkpoint to
/// choose; Unavailable "checkpoint folder PATH: the latest checkpoint was
/// pruned while it was read, N times in a row (last: ERROR); ..." naming the
/// live job that holds the folder ("in use by a live job (pid P on host
/// H)") when there is one, and what to do.
StatusOr<LoadedCheckpoint> LoadLatestCheckpoint(const std::string& path, const CheckpointChosenFn& chosen = nullptr,
                                                int tries = kLatestCheckpointTries);

}  // namespace tether
