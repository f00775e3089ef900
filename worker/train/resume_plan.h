// Where a worker starts: the decisions of a resumed job (--resume_from: which
// state, from which clock, epoch and row) and of a process restarted in a
// running job without a checkpoint (its share continues at the clock its
// predecessor reached). What to read is decided here; reading is the
// caller's (a WorkerStateReader), so each rule is a function of its inputs.
//
// Ownership: values in, values out. Thread-safety: re-entrant (the reader
// is called on the caller's thread).
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <string>

#include "core/status.h"
#include "proto/checkpoint.pb.h"
#include "proto/config.pb.h"

namespace tether {

/// Reads rank `rank`'s WorkerState from the checkpoint being resumed
/// (ReadWorkerState in the product; a map in tests).
using WorkerStateReader = std::function<StatusOr<WorkerState>(int rank)>;

/// Minibatches per clock of the job: train.minibatches_per_clock, or under
/// consistency model AVERAGE a round's (AveragePeriodMinibatches).
int MinibatchesPerClock(const JobConfig& config);

/// Where worker `rank` starts in a job resumed from checkpoint `m` (in
/// `dir`), with the static split. With the checkpoint's number of workers:
/// its own state, exactly. With another: the rows no worker had trained yet
/// in its epoch in progress (by global row id, sorted) are dealt
/// round-robin to the new workers, who train them first (as `dealt_rows`,
/// shuffled per worker by EpochOrder) and then their own partitions from
/// the next epoch on; rank 0 carries the samples so far. `*finished`: the
/// worker has nothing left to train (its entry is FINISHED, or every
/// worker's is, or the dealt epoch is past train.epochs).
/// `partition_rows`: the rows of this worker's partition now, which must
/// equal the state's. Errors: DataLoss (no entry for the rank),
/// FailedPrecondition (the training data changed), the reader's.
StatusOr<WorkerState> ResumeState(const CheckpointManifest& m, const std::string& dir, const JobConfig& config,
                                  int rank, int64_t partition_rows, const WorkerStateReader& read, bool* finished);

/// Where training starts and what it carries over: a fresh run (all zero),
/// or a resumed one as its state says. The first epoch trained continues
/// at `row` with the loss sums; later ones start at row 0.
struct StartPoint {
  int epoch = 0;
  int64_t row = 0;
  int64_t minibatches = 0;
  uint64_t samples = 0;        // trained before this run
  double loss_sum = 0;         // of the first epoch's part before this run
  int64_t loss_batches = 0;
  double first_loss = 0;       // the first minibatch's loss (divergence's reference)
  bool diverged = false;
  int diverged_at_epoch = 0;
  bool has_final_loss = false;  // the state recorded the model's loss
  double final_loss = std::numeric_limits<double>::quiet_NaN();
  double train_seconds = 0;    // training time before this run
  // A resume with nothing left to train, of a run with a validation split:
  // that run's validation outcome (reported as it was).
  bool has_validation = false;
  ValidationOutcome validation;
};

/// The StartPoint of a resumed worker from its ResumeState (or
/// OnDemandResumeState); `finished`: nothing left to train (starts at
/// `epochs`).
StartPoint ResumedStart(const WorkerState& state, bool finished, int epochs);

/// A process restarted in the running job (by hand or by a launcher,
/// without --resume_from) whose predecessor reached clock `prev_clock` > 0.
enum class RejoinCase {
  kNotRejoining,  // a first start (or a resume): nothing to do
  kDealtOnDemand, // data on demand: shard 0 deals what is left
  kStartsAgain,   // a streamed share or adaptive batches: no position a clock names
  kEmptyShare,    // nothing to continue
  kContinues,     // the share continues at RejoinPosition
};
RejoinCase ClassifyRejoin(int64_t prev_clock, bool resumed, bool on_demand, bool streamed, bool adaptive,
                          int64_t share_rows);

/// With a fixed minibatch size the clock fixes the position: minibatches
/// M = prev_clock × per_clock, run across epochs of ceil(rows ÷ batch)
/// each, in the same per-(seed, rank, epoch) order. `epoch` is `epochs`
/// (and `row` 0) when M covers every epoch. rows ≥ 1, batch ≥ 1.
struct RejoinPoint {
  int epoch = 0;
  int64_t row = 0;
  int64_t minibatches = 0;
};
RejoinPoint RejoinPosition(int64_t prev_clock, int per_clock, int64_t rows, int64_t batch, int epochs);

}  // namespace tether
