// Resuming a job with data on demand (train.data_on_demand with
// checkpoint.dir): where a worker starts. Its place in the data is not its
// own: shard 0 keeps which chunks were completed (checkpoint/chunk_state.h) and
// deals the rest, so a worker's state file only carries its counters (rows
// trained, loss, training time, the model's own state), and a resume may
// use any number of workers. Thread-safety: re-entrant.
#pragma once

#include <string>

#include "core/status.h"
#include "proto/checkpoint.pb.h"
#include "proto/config.pb.h"

namespace tether {

/// Whether checkpoint `m` (in `dir`) and the job `config` agree on how rows
/// are dealt: a static-split checkpoint cannot continue on demand (it holds
/// no dealing state) nor the other way round. With data on demand, also
/// checks that dir's chunks.state fits the job (`train_rows`: rows of the
/// whole training set; train.chunk_rows; train.seed). Errors:
/// FailedPrecondition naming the field with both values; the errors of
/// ReadChunkState (DataLoss, NotFound).
Status CheckDataOnDemandResume(const CheckpointManifest& m, const std::string& dir, const JobConfig& config,
                               int64_t train_rows);

/// Worker `rank`'s counters in a resumed on-demand job: its own state file
/// when the checkpoint has one (TRAINING or LEFT; its epoch, loss and
/// counters), else a fresh state (with a FINISHED rank's samples). Rank 0
/// also carries the samples of checkpoint ranks the resumed job does not
/// have (rank ≥ cluster.num_workers). remaining_rows and dealt_rows are
/// empty; `minibatches_per_clock` sets a fresh state's minibatch count
/// (clock × it). Errors: ReadWorkerState's; FailedPrecondition when the
/// state's training set had another number of rows than `train_rows`.
StatusOr<WorkerState> OnDemandResumeState(const CheckpointManifest& m, const std::string& dir, const JobConfig& config,
                                          int rank, int64_t train_rows, int minibatches_per_clock);

}  // namespace tether
