// The training loop of one worker (`tether-worker`), the same for every
// model (worker/models/model.h): read this worker's partition of the training rows;
// per epoch, shuffle them; per minibatch, let the model pull what it needs,
// compute gradients on the compute backend and push them; advance the clock
// every train.minibatches_per_clock minibatches. At the end every worker
// meets at a barrier; rank 0 then evaluates on the test split with the
// metrics of the model's label kind and writes the metrics JSON.
// RunWorker drives a TrainingRun (worker/train/training_run.h), whose
// phases and rooms are described there.
//
// Thread-safety: RunWorker may run on several threads of one process at once
// (local/local_job.h), one call per rank; each call owns its backend, model
// and client. CPU backends share OpenBLAS's process-wide thread count.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/output_target.h"
#include "core/status.h"
#include "proto/config.pb.h"
#include "worker/train/job_outcome.h"
#include "proto/stats.pb.h"
#include "input/reader.h"
#include "worker/client/client.h"
#include "worker/train/training_data.h"  // LoadSplit

namespace zmq {
class context_t;
}  // namespace zmq

namespace tether {

/// A worker's progress, as TrainerOptions::on_progress receives it (the
/// /metrics page of tether-worker, tools/worker_metrics.h).
struct WorkerProgress {
  ClientStats client;               // the client's counters so far (WorkerClient::stats())
  int64_t clock = 0;                // clocks this worker completed
  int epoch = 0;                    // the epoch in progress, 1-based (train.epochs once done)
  uint64_t samples = 0;             // rows trained on, all epochs (with those before a resume)
  uint64_t run_samples = 0;         // of them, trained by this run (since the resume)
  uint64_t minibatches = 0;         // minibatches trained (with those before a resume)
  double train_seconds = 0;         // this run's training time so far, evaluations left out
  double pull_wait_seconds = 0;     // of it, time in the model's Pull (waiting for parameters)
  // Mean minibatch loss over the last clock's minibatches / over the last
  // finished epoch; NaN before the first.
  double clock_loss = std::numeric_limits<double>::quiet_NaN();
  double epoch_loss = std::numeric_limits<double>::quiet_NaN();
};

struct TrainerOptions {
  int rank = 0;
  std::vector<std::string> servers;  // one endpoint per shard, in shard order
  /// Where `servers` came from ("rendezvous SPEC"), named when a shard never
  /// answers (a stale entry); empty: the command line or the config.
  std::string servers_source;
  /// With servers from a rendezvous: re-reads the entries of shards the
  /// worker waits for (ClientOptions::server_lookup); null: off.
  std::shared_ptr<ServerLookup> server_lookup;
  /// With a rendezvous and replicated shards: finds the process that
  /// claimed a shard whose chain ran out (ClientOptions::claim_lookup);
  /// null: off.
  std::shared_ptr<ClaimLookup> claim_lookup;
  /// JSON metrics written here (atomically) when non-empty, by the worker
  /// that evaluates at the end: rank 0, or the lowest rank still there if
  /// rank 0 left. Give it to every worker that may become the evaluator.
  std::string metrics_out;
  /// Polled once per minibatch and every 100 ms while waiting on a server;
  /// when it returns true the worker leaves the job gracefully (BYE to every
  /// shard it can reach, at most about a second, so the servers stop waiting
  /// for it) and returns a report with left_early set.
  std::function<bool()> stop_requested;
  /// ZeroMQ context shared with in-process server shards (`inproc://`
  /// endpoints), or null: the client makes its own. Not owned.
  zmq::context_t* zmq_context = nullptr;
  /// Set by another thread to make this worker's waits give up at once
  /// (ClientOptions::abort). May be null.
  const std::atomic<bool>* abort = nullptr;
  /// Set to true when the run failed on its data (IsBadInput: a line it
  /// cannot parse, a corrupt gzip stream): tether-worker then exits
  /// kExitBadInput, which tether-launch never restarts. May be null. Not owned.
  bool* input_refused = nullptr;
  /// Resume from this checkpoint (a ckpt-* directory, or a directory of
  /// them: the latest complete one). Empty: a fresh start. See
  /// docs/OPERATIONS.md for what may differ from the checkpoint's job.
  std::string resume_from;
  /// The run's input files (core/job_inputs.h JobInputs), which the
  /// train.metrics_dir file may not be (telemetry/metrics_log.h). Empty:
  /// none compared.
  std::vector<NamedInput> inputs;
  /// Called on the training thread after every clock, after every epoch,
  /// and once when training is done (after the barrier and, on rank 0, the
  /// evaluation), with the progress so far. Must be cheap (it runs in the
  /// training loop: copy and publish, nothing more). May be empty.
  std::function<void(const WorkerProgress&)> on_progress;
};

/// What a worker measured. Test metrics are filled on rank 0 only.
struct TrainReport {
  std::string model;                 // "xmc_mlp", "sparse_lr", "dense_mlp"
  int64_t train_rows = 0;            // rows in this worker's partition
  uint64_t samples = 0;              // rows this worker trained on (all epochs)
  uint64_t total_samples = 0;        // over all workers (from the barrier)
  double train_seconds = 0;          // first pull to barrier release
  // total_samples / train_seconds; on rank 0, once the shards' stats are
  // in, over the job's span instead (JobSamplesPerSecond, metrics_json.h)
  double samples_per_second = 0;
  /// The mean minibatch loss over the last epoch this worker trained a
  /// minibatch in; NaN when not known (final_loss_from "none").
  double final_loss = std::numeric_limits<double>::quiet_NaN();
  /// Where final_loss comes from: "training" (an epoch this run trained,
  /// its part before a resume included), "checkpoint" (this run trained no
  /// minibatch, as after a resume with nothing left to train: the loss the
  /// checkpoint recorded for the model it resumed), "none" (not known).
  std::string final_loss_from = "none";
  /// Why the job did not do its job ("" when it did): workers left before
  /// the end, or the servers answered this worker's goodbye with the job's
  /// failure. The metrics file is still written, with it as "failure", and
  /// the run exits non-zero.
  std::string failure;
  int64_t test_rows = 0;
  double pull_wait_fraction = 0;     // share of train time blocked waiting for pulls
  bool left_early = false;           // stop_requested ended training
  /// With left_early: the shard whose stop ended training (a server told to
  /// stop, RequestChannel::stopping_shard), or −1 (this worker's own stop).
  int stopped_by_shard = -1;
  /// The last checkpoint this worker took part in (its directory), or "".
  std::string last_checkpoint;
  int checkpoints = 0;               // checkpoints taken (the final one included)
  double checkpoint_seconds = 0;     // training time spent in them (pauses)
  /// Case C24: this worker's loss diverged (train.divergence_factor), first
  /// at epoch diverged_at_epoch (1-based; 0 when it did not).
  bool diverged = false;
  int diverged_at_epoch = 0;
  /// Rank 0: every shard's counters (STATS), in shard order, each with the
  /// WorkerStats every worker sent at the barrier. Empty on other ranks.
  std::vector<ShardStats> servers;
  /// Test-set metrics in the order they are logged, by the model's label kind:
  ///   multi-label (XMC): precision_at_1, precision_at_3, precision_at_5,
  ///                      ndcg_at_1, ndcg_at_3, ndcg_at_5 (eval/metrics.h),
  ///                      psp_at_{1,3,5}, psndcg_at_{1,3,5} (propensity-
  ///                      scored, train.psp_a / psp_b; the label counts of
  ///                      the whole training split, summed over every
  ///                      worker's partition at the start: partitioned_eval.h);
  ///   binary:            accuracy, auc, log_loss (BinaryMetrics);
  ///   multiclass:        accuracy (arg max of the scores; a tie of G classes
  ///                      at the top counts 1/G when the true class is among
  ///                      them, its expected value under a random order, as
  ///                      for P@k), log_loss (mean softmax cross-entropy).
  /// Rows with tied top scores are counted and logged with a warning (C21).
  /// Computed by worker/eval/evaluator.h, which tether-predict shares.
  std::vector<std::pair<std::string, double>> test_metrics;
  /// The exact integer counts behind test_metrics (Evaluator::Counts):
  /// precision_hits_at_{1,3,5} (multi-label) or correct (binary,
  /// multiclass); identical whatever the number of workers evaluating.
  std::vector<std::pair<std::string, int64_t>> eval_counts;
  /// Partitioned evaluation (rank 0): the workers whose parts were merged,
  /// the final evaluation's time on rank 0 (its own part, then waiting for
  /// the others' and merging), and the slowest worker's own part.
  int eval_workers = 0;
  /// Of those, the parts the evaluator scored itself for workers that left
  /// the job before the final evaluation (TestEvaluation::FillMissingParts).
  int eval_parts_for_others = 0;
  double eval_seconds = 0;
  double eval_seconds_slowest = 0;

  /// The validation split (train.validation_fraction or
  /// data.validation_split; worker/eval/
  /// validation_evaluation.h), evaluated after every epoch: its rows over
  /// all workers (0: no validation split), the metric early stopping
  /// watches, the best epoch on it (1-based) and that epoch's figures, and
  /// the epochs trained (fewer than train.epochs when early stopping ended
  /// training). The test split is scored once, after training, with the
  /// model of epoch `scored_epoch`: the best epoch's, put back on the
  /// servers (train.keep_best_model), or the last epoch trained's.
  int64_t validation_rows = 0;
  std::string validation_metric;
  int best_epoch = 0;
  std::vector<std::pair<std::string, double>> validation_metrics;
  int epochs_trained = 0;
  int scored_epoch = 0;
  bool stopped_early = false;

  /// The value of test metric `name`, or NaN when absent.
  double Metric(const std::string& name) const;
};

/// Consistency model AVERAGE: the minibatches of a round,
/// ceil(consistency.period_rows / train.minibatch_size) (at least 1).
int AveragePeriodMinibatches(const JobConfig& config);

/// Whether the job deals its training rows on demand to whichever worker
/// asks (train.data_on_demand), so that a worker joining with a rank beyond
/// cluster.num_workers gets rows, and the rows of one that leaves are dealt
/// again (the job still finishes). False under the static split.
bool RowsDealtOnDemand(const JobConfig& config);

/// Case C24: whether an epoch's mean loss `loss` shows divergence: NaN,
/// infinite, or above factor × reference (see TrainConfig.divergence_factor).
bool LossDiverged(double loss, double reference, double factor);

// kExitDiverged (3) and kExitPartialEval (4), the exit codes of a run that
// trained to its end but did not do its job: worker/train/job_outcome.h.

/// Runs one worker of the job end to end. With config.checkpoint.dir set,
/// it takes part in coordinated checkpoints (every every_clocks clocks; at a
/// clock shard 0 picks when rank 0's every_seconds timer fires or a stop is
/// requested; at the end), and a stop request then leaves only after the
/// checkpoint, so the job can resume where it stopped (options.resume_from). `config` must have passed
/// ValidateJobConfig. The compute backend (train.device) is created first,
/// so `--device=cuda` without a usable GPU fails before any data is read or
/// server contacted (Unavailable, saying why). Errors: data errors
/// (file:line), pairing refusals, timeouts naming the silent server,
/// Unavailable naming a gone server (cluster.liveness_timeout_ms), backend
/// errors. On any error after it joined, the worker first tells every shard
/// it can reach (ABORT, best effort, at most a second), so the servers end
/// too instead of waiting for it.
StatusOr<TrainReport> RunWorker(const JobConfig& config, const TrainerOptions& options);

/// The client options of worker `rank` of the job (one place for the config
/// → ClientOptions mapping): its tables (TablesForJob), staleness, job id
/// and generation, timeouts and high-water marks, for `servers` in shard
/// order, and the cache capacity when given in bytes (a fraction of the
/// model is resolved by RunWorker). Context and abort flag are left null.
ClientOptions ClientOptionsFor(const JobConfig& config, int rank, std::vector<std::string> servers);

/// Writes MetricsJson(report, config) (worker/metrics_json.h: the report's
/// test_metrics, train_seconds, samples_per_second, total_samples,
/// test_rows, final_loss, pull_wait_fraction_rank0, num_workers,
/// num_servers, staleness, epochs, seed, and the merged server and worker
/// stats) via a temporary file and rename, so a reader never sees half a
/// file. Errors: IOError naming the path.
Status WriteMetricsJson(const TrainReport& report, const JobConfig& config, const std::string& path);

/// The verdict on a run that returned `report` (JudgeFinishedRun, with the
/// report's divergence and evaluation and the config's fields).
RunVerdict JudgeReport(const TrainReport& report, const JobConfig& config);

}  // namespace tether
