// Whether the job did its job: the verdicts a worker draws at the end (the
// final checkpoint's cut, the servers' counters at the barrier) and after a
// failure (leave quietly, or tell the servers with ABORT). A run that did
// not do its job never exits 0: these say when that is.
//
// Pure functions of the replies and flags they are given; the training run
// (worker/train/training_run.h) logs and acts. Ownership: values in, values
// out. Thread-safety: re-entrant.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "proto/checkpoint.pb.h"
#include "proto/stats.pb.h"

namespace tether {

/// The ranks of a final checkpoint's cut that left before the end (LEFT or
/// GONE), as "1, 3"; "" when none did.
std::string RanksLeftBeforeEnd(const std::vector<CheckpointWorker>& workers);

/// Whether the end-of-job checkpoint is a final one: nobody left before the
/// end, or data on demand (its workers reached the barrier because shard 0
/// said DONE: every chunk of every epoch was completed, whoever left).
bool FinalCheckpointIsFinal(const std::string& left_before_end, bool on_demand);

/// Whether a job resumed from the final checkpoint `resumed` and reaching
/// its end at `clock` keeps that checkpoint as its final one (it trained
/// nothing since): the resumed checkpoint is final, of that clock, and in
/// the job's checkpoint.dir (`same_dir`).
bool ResumedFinalStays(const CheckpointManifest& resumed, int64_t clock, bool same_dir);

/// The evaluator's verdict from shard 0's counters after the barrier
/// (`s0`: its ShardStats, one WorkerStats per rank; a rank without one
/// never reached the barrier).
struct BarrierVerdict {
  std::string missing;     // ranks that never reached the barrier, "1, 3"
  /// Why the job did not finish ("" when it did).
  std::string incomplete;
  /// Ranks left, yet every epoch's rows were trained (data on demand dealt
  /// theirs again): said as a warning, the job finished.
  bool rows_redealt = false;
};
/// `dealt_on_demand`: the job deals rows on demand (then a rank that left
/// is not a failure: its chunks were dealt again, and this verdict is not
/// drawn: empty); `fed`: this worker trained from a chunk feed, and
/// `epochs` × `train_rows` are the rows shard 0 must have counted;
/// `checkpointing`: checkpoint.dir is set (the message says a resume trains
/// what was left).
BarrierVerdict JudgeBarrier(const ShardStats& s0, bool dealt_on_demand, bool fed, int epochs, int64_t train_rows,
                            bool checkpointing);

/// Whether any worker of the job diverged, as the evaluator reports it in
/// the metrics JSON: from every rank's WorkerStats.diverged_at_epoch at the
/// barrier (`s0`: shard 0's stats, or null when the evaluator has none) and
/// its own `own_diverged_at_epoch` (0: it did not). `ranks`: the workers
/// that diverged, ascending (empty without `s0`); `at_epoch`: the earliest
/// epoch any diverged at, 0 when none did.
struct JobDivergence {
  bool diverged = false;
  int at_epoch = 0;
  std::vector<int> ranks;
};
JobDivergence JudgeJobDivergence(const ShardStats* s0, int own_diverged_at_epoch);

/// How a run that trained to its end is judged at exit. A run that did not
/// do its job never exits 0 unless the user accepted that way of falling
/// short by a config field (then the metrics JSON lists it in "accepted"):
///   - its training loss diverged (train.divergence_factor): exit 3 unless
///     train.fail_on_divergence is false ("diverged");
///   - it evaluated (this worker merged the test metrics) but fewer workers
///     than cluster.num_workers sent their part of the test set, so the
///     metrics cover only part of it: exit 4 unless
///     train.accept_partial_eval ("partial_evaluation").
/// (Runs that stop early, fail or cannot finish exit non-zero before this:
/// a signal 128 + N, an error 1, a bad start 2.)
struct FinishedRun {
  bool diverged = false;
  int diverged_at_epoch = 0;
  bool evaluated = false;  // this worker merged and reports the test metrics
  int eval_workers = 0;    // workers whose part of the test set was scored
  int num_workers = 0;     // cluster.num_workers: the parts there are
  int64_t test_rows = 0;   // test rows scored
  bool fail_on_divergence = true;
  bool accept_partial_eval = false;
};
struct RunVerdict {
  int exit_code = 0;                  // 0, kExitDiverged or kExitPartialEval
  std::string why;                    // the ERROR line's text when exit_code != 0
  std::vector<std::string> accepted;  // "diverged", "partial_evaluation"
};
/// The exit code of a worker (and of tether-launch) whose loss diverged with
/// train.fail_on_divergence set (the default).
constexpr int kExitDiverged = 3;
/// The exit code of a worker (and of tether-launch) whose final evaluation
/// covered only part of the test set, without train.accept_partial_eval.
constexpr int kExitPartialEval = 4;
/// The exit code of a worker (and of tether-launch) that refused its data:
/// a line it cannot parse, a corrupt gzip stream (the error names the file
/// and the line). Bad input no restart cures: tether-launch --max_restarts
/// does not restart it.
constexpr int kExitBadInput = 6;
/// Whether an error reading the job's data files is the input's own fault:
/// InvalidArgument (a line, a label, a width the job refuses) or DataLoss
/// (a corrupt or truncated gzip stream); never an error a retry may cure
/// (IOError, NotFound, a peer's).
bool IsBadInput(const Status& read);
RunVerdict JudgeFinishedRun(const FinishedRun& run);

/// What a worker whose run failed does before it returns the error.
enum class FailureAction {
  kLeaveStopped,       // its stop request cut a wait short: BYE, a report with left_early
  kLeaveShardStopped,  // a server told to stop went: BYE, left_early, stopped_by_shard
  kReturn,             // the goodbye was sent or the servers removed it: they know
  kAbort,              // tell every shard the job failed (ABORT), then return the error
};
FailureAction OnRunFailure(bool stop_requested, int stopping_shard, bool bye_sent, bool removed);

/// Whether a failed wait's message says that the stop request cut it short
/// (it ends with "stop requested", or a rendezvous lookup's "stopped while
/// waiting"), rather than a failure the stop came after.
bool CutShortByStop(const std::string& why);

}  // namespace tether
