// ValidationEvaluation: the validation split of one training run
// (TrainConfig.validation_fraction or DataConfig.validation_split:
// worker/train/validation_rows.h), evaluated
// after every epoch, and the early-stopping rule fed from it
// (eval/early_stopping.h).
//
// Each worker holds its share of the validation rows (with a fraction,
// those carved from its own training partition) and evaluates all of them after each epoch with the model the
// servers hold; every worker sends its partial sums to shard 0 and waits
// for every worker's (EVAL_WAIT on round kValidationEvalRound + epoch), and
// merges them in rank order (Evaluator::Merge). So every worker computes
// the same figures, bit for bit, and takes the same decision to stop,
// without a further message. Rank 0 logs a line per epoch ("validation
// after epoch N ...") and writes a "kind": "validation" record to the
// metrics log.
//
// The best epoch's model (KeepsBestModel): each worker waits for its
// epoch's pushes to be answered before it sends its part, and after a
// round that finds a new best epoch it tells every shard to keep a copy of
// its weights (JobSession::ModelCut) before it trains on: a consistent cut
// at that epoch's end (server/kept_model.h says why). TrainingRun puts the
// copy back after training.
//
// The figures carry no propensity-scored metrics (PSP@k needs the
// propensities of the rows trained on; the validation rows are not).
//
// Ownership: owns the validation rows; borrows the model, backend, client,
// session and metrics log (may be null), which outlive it. Thread-safety:
// not thread-safe; the training thread owns it.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "telemetry/metrics_log.h"
#include "core/status.h"
#include "proto/checkpoint.pb.h"
#include "proto/config.pb.h"
#include "compute/backend.h"
#include "eval/early_stopping.h"
#include "input/reader.h"
#include "worker/client/client.h"
#include "worker/client/job_session.h"
#include "worker/models/model.h"

namespace tether {

struct TrainReport;  // worker/trainer.h

/// The validation figures of one epoch: the metrics in the order the
/// evaluator gives them (worker/eval/evaluator.h) over `rows` rows.
struct ValidationEpoch {
  int epoch = 0;  // 1-based
  int64_t rows = 0;
  std::vector<std::pair<std::string, double>> metrics;
};

/// The metric `name` of `metrics`; NaN when absent.
double MetricNamed(const std::vector<std::pair<std::string, double>>& metrics, const std::string& name);

/// The label kind's name EarlyStopper::MetricProblem takes ("multi-label",
/// "binary", "multiclass").
std::string LabelKindName(LabelKind kind);

/// Whether the job keeps its best epoch's model: a validation split and
/// train.keep_best_model (default true).
bool KeepsBestModel(const JobConfig& config);

/// The metric early stopping watches: train.early_stopping.metric when
/// set, else precision_at_1 (multi-label) or accuracy.
std::string ValidationMetric(const JobConfig& config);

/// The validation outcome `report` holds (its validation_* fields, the
/// epochs trained, and `scored_epoch`), for a FINISHED checkpoint entry.
ValidationOutcome OutcomeOfReport(const TrainReport& report, int scored_epoch);

/// `outcome` into `report`'s validation fields, epochs_trained,
/// scored_epoch and stopped_early: a resume with nothing left to train
/// reports the finished run's outcome as it was.
void ReportOutcome(const ValidationOutcome& outcome, TrainReport* report);

class ValidationEvaluation {
 public:
  /// `rows`: this worker's validation rows (input/validation_split.h).
  /// train.early_stopping gives the rule; its metric, when not set, is
  /// precision_at_1 for multi-label models and accuracy for the others
  /// (ValidationMetric); patience 0 never stops early.
  ValidationEvaluation(const JobConfig& config, int rank, Dataset rows, Model* model, Backend* backend,
                       WorkerClient* client, JobSession* session);

  void set_metrics_log(MetricsLog* log) { metrics_log_ = log; }
  int64_t local_rows() const { return rows_.features.rows; }

  /// After epoch `epoch` (1-based): evaluates this worker's rows, waits for
  /// every worker's part, merges and feeds the rule; rank 0 logs. A new
  /// best epoch is kept on the shards (KeepsBestModel).
  /// `train_s`: training seconds so far (for the log). Errors: the
  /// client's, the model's; FailedPrecondition when the merged split has no
  /// row (every worker's share was empty: raise validation_fraction).
  Status AfterEpoch(int epoch, double train_s);

  /// Whether the rule says training ends after the last epoch evaluated.
  bool ShouldStop() const { return stopper_.ShouldStop(); }
  /// The best epoch so far (0 before any) and its figures.
  int best_epoch() const { return stopper_.best_epoch(); }
  const ValidationEpoch& best() const { return best_; }
  const ValidationEpoch& last() const { return last_; }
  const std::string& metric() const { return stopper_.metric(); }

  /// The history so far (the rule's state, the best and last epochs'
  /// figures), for a checkpoint's WorkerState.
  void SaveHistory(ValidationHistory* out) const;
  /// Continues from a checkpoint's history (before the first AfterEpoch).
  /// Errors: FailedPrecondition when it watched another metric than this
  /// job's rule (train.early_stopping.metric changed on resume).
  Status RestoreHistory(const ValidationHistory& history);

 private:
  const JobConfig& config_;
  int rank_;
  std::string who_;
  Dataset rows_;
  Model* model_;
  Backend* backend_;
  WorkerClient* client_;
  JobSession* session_;
  MetricsLog* metrics_log_ = nullptr;
  EarlyStopper stopper_;
  ValidationEpoch best_;
  ValidationEpoch last_;
};

}  // namespace tether
