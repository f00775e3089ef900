#include "worker/eval/validation_evaluation.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <sstream>
#include <utility>

#include <glog/logging.h>
#include <nlohmann/json.hpp>

#include "core/config.h"
#include "core/net/eval_frames.h"
#include "worker/eval/evaluator.h"
#include "worker/eval/partitioned_eval.h"
#include "worker/models/model_registry.h"
#include "worker/trainer.h"

namespace tether {
namespace {

using SteadyClock = std::chrono::steady_clock;

double SecondsSince(SteadyClock::time_point t) {
  return std::chrono::duration<double>(SteadyClock::now() - t).count();
}

std::string MetricsLine(const std::vector<std::pair<std::string, double>>& metrics) {
  std::ostringstream os;
  for (const auto& [name, value] : metrics) os << " " << name << " " << value;
  return os.str();
}

}  // namespace

double MetricNamed(const std::vector<std::pair<std::string, double>>& metrics, const std::string& name) {
  for (const auto& [n, v] : metrics)
    if (n == name) return v;
  return std::numeric_limits<double>::quiet_NaN();
}

std::string LabelKindName(LabelKind kind) {
  switch (kind) {
    case LabelKind::kMultiLabel:
      return "multi-label";
    case LabelKind::kBinary:
      return "binary";
    default:
      return "multiclass";
  }
}

bool KeepsBestModel(const JobConfig& config) {
  return HasValidationSplit(config) && config.train().keep_best_model();
}

std::string ValidationMetric(const JobConfig& config) {
  const EarlyStopping& es = config.train().early_stopping();
  if (es.has_metric()) return es.metric();
  return LabelKindOf(config) == LabelKind::kMultiLabel ? "precision_at_1" : "accuracy";
}

ValidationOutcome OutcomeOfReport(const TrainReport& report, int scored_epoch) {
  ValidationOutcome o;
  o.set_metric(report.validation_metric);
  o.set_best_epoch(report.best_epoch);
  o.set_rows(report.validation_rows);
  for (const auto& [name, value] : report.validation_metrics) {
    ValidationOutcome::Figure* f = o.add_metrics();
    f->set_name(name);
    f->set_value(value);
  }
  o.set_epochs_trained(report.epochs_trained);
  o.set_scored_epoch(scored_epoch);
  o.set_stopped_early(report.stopped_early);
  return o;
}

void ReportOutcome(const ValidationOutcome& outcome, TrainReport* report) {
  report->validation_metric = outcome.metric();
  report->best_epoch = outcome.best_epoch();
  report->validation_rows = outcome.rows();
  report->validation_metrics.clear();
  for (const ValidationOutcome::Figure& f : outcome.metrics()) report->validation_metrics.emplace_back(f.name(), f.value());
  report->epochs_trained = outcome.epochs_trained();
  report->scored_epoch = outcome.scored_epoch();
  report->stopped_early = outcome.stopped_early();
}

ValidationEvaluation::ValidationEvaluation(const JobConfig& config, int rank, Dataset rows, Model* model,
                                           Backend* backend, WorkerClient* client, JobSession* session)
    : config_(config),
      rank_(rank),
      who_("[worker " + std::to_string(rank) + "] "),
      rows_(std::move(rows)),
      model_(model),
      backend_(backend),
      client_(client),
      session_(session),
      stopper_(ValidationMetric(config), config.train().early_stopping().patience(),
               config.train().early_stopping().min_delta()) {}

Status ValidationEvaluation::AfterEpoch(int epoch, double train_s) {
  const auto start = SteadyClock::now();
  // No propensities: PSP@k is left out of the validation figures.
  Evaluator eval(model_->label_kind(), model_->num_outputs(), backend_, {});
  std::vector<float> scores;
  const int64_t bs = config_.train().eval_minibatch_size();
  const int64_t n = rows_.features.rows;
  // AVERAGE: the servers' merged model is evaluated, not this worker's
  // replica (restored on every path out), as for the test split.
  struct PauseReplica {
    WorkerClient* c;
    ~PauseReplica() { c->set_replica_paused(false); }
  } pause{client_};
  client_->set_replica_paused(true);
  TETHER_RETURN_IF_ERROR(model_->BeginEvaluation(client_));
  const Status st = [&]() -> Status {
    for (int64_t b = 0; b < n; b += bs) {
      const Minibatch batch{&rows_.features, &rows_.labels, b, std::min(n, b + bs)};
      TETHER_RETURN_IF_ERROR(model_->Pull(batch, client_));
      TETHER_RETURN_IF_ERROR(model_->Predict(batch, &scores));
      TETHER_RETURN_IF_ERROR(eval.Add(scores, rows_.labels, batch.begin, batch.end));
    }
    return Status::OK();
  }();
  model_->EndEvaluation();
  TETHER_RETURN_IF_ERROR(st);
  // The cut the best epoch's copy is taken at: this worker's pushes of the
  // epoch are applied on every shard before its part counts.
  TETHER_RETURN_IF_ERROR(client_->WaitAll());
  // Every worker waits for every part and merges them in rank order: the
  // same figures everywhere, so the same decision to stop. A joiner
  // (beyond the initial ranks) holds no validation rows and sends none.
  EvalPartial mine = eval.Partial(rank_);
  const bool owes = rank_ < config_.cluster().num_workers();
  std::vector<EvalPartial> all;
  // Waiting, this worker does not hold the staleness bound: a worker whose
  // epoch takes more clocks (a partition with more rows) reaches the round
  // instead of waiting for this one's next clock. Under model averaging
  // too: the shards close a round only once every worker ended it, parked
  // or not (ClockTracker::settled_clock), so a worker partway into a round
  // here sends its delta after the round.
  TETHER_RETURN_IF_ERROR(client_->ParkClock(true));
  StatusOr<bool> gathered = session_->EvalGather(kValidationEvalRound + epoch, owes ? &mine : nullptr,
                                                 EvalGatherBody::EVAL_WAIT, &all);
  TETHER_RETURN_IF_ERROR(client_->ParkClock(false));
  TETHER_ASSIGN_OR_RETURN(const bool complete, std::move(gathered));
  if (!complete)
    return Status::Internal(who_ + "shard 0 answered the validation round of epoch " + std::to_string(epoch) +
                            " before every part was in");
  Evaluator merged(model_->label_kind(), model_->num_outputs(), backend_, {});
  TETHER_RETURN_IF_ERROR(MergeEvalPartials(all, &merged));
  if (merged.rows() == 0)
    return Status::FailedPrecondition(
        who_ + (config_.data().validation_split().empty()
                    ? "the validation split has no row (train.validation_fraction " +
                          std::to_string(config_.train().validation_fraction()) +
                          " of the training rows chose none): raise it"
                    : "the validation split has no row (data.validation_split " + config_.data().validation_split() +
                          " kept none)"));
  last_ = ValidationEpoch{epoch, merged.rows(), merged.Results()};
  if (stopper_.Add(epoch, MetricNamed(last_.metrics, stopper_.metric()))) {
    best_ = last_;
    // Before any push of the next epoch (server/kept_model.h).
    if (KeepsBestModel(config_)) TETHER_RETURN_IF_ERROR(session_->ModelCut(epoch, /*restore=*/false).status());
  }
  if (rank_ == 0) {
    LOG(INFO) << who_ << "validation after epoch " << epoch << " (" << last_.rows << " rows):"
              << MetricsLine(last_.metrics) << "; best " << stopper_.metric() << " "
              << stopper_.best_value() << " at epoch " << stopper_.best_epoch()
              << (stopper_.ShouldStop() ? " (early stopping: training ends here)" : "");
    if (metrics_log_ != nullptr) {
      nlohmann::json j{{"kind", "validation"}, {"epoch", epoch},       {"train_s", train_s},
                       {"rows", last_.rows},   {"eval_s", SecondsSince(start)}, {"best_epoch", best_epoch()}};
      for (const auto& [name, value] : last_.metrics)
        j[name] = std::isfinite(value) ? nlohmann::json(value) : nullptr;
      metrics_log_->Write(std::move(j));
    }
  }
  return Status::OK();
}

namespace {

void SaveFigures(const std::vector<std::pair<std::string, double>>& metrics,
                 google::protobuf::RepeatedPtrField<ValidationOutcome::Figure>* out) {
  for (const auto& [name, value] : metrics) {
    ValidationOutcome::Figure* f = out->Add();
    f->set_name(name);
    f->set_value(value);
  }
}

ValidationEpoch LoadEpoch(int epoch, int64_t rows,
                          const google::protobuf::RepeatedPtrField<ValidationOutcome::Figure>& figures) {
  ValidationEpoch e{epoch, rows, {}};
  for (const ValidationOutcome::Figure& f : figures) e.metrics.emplace_back(f.name(), f.value());
  return e;
}

}  // namespace

void ValidationEvaluation::SaveHistory(ValidationHistory* out) const {
  out->set_metric(stopper_.metric());
  out->set_best_epoch(stopper_.best_epoch());
  out->set_best_value(stopper_.best_value());
  out->set_last_epoch(stopper_.last_epoch());
  out->set_best_rows(best_.rows);
  SaveFigures(best_.metrics, out->mutable_best_metrics());
  out->set_last_rows(last_.rows);
  SaveFigures(last_.metrics, out->mutable_last_metrics());
}

Status ValidationEvaluation::RestoreHistory(const ValidationHistory& history) {
  if (history.metric() != stopper_.metric())
    return Status::FailedPrecondition(who_ + "the checkpoint's validation history watches " + history.metric() +
                                      ", this job's early stopping " + stopper_.metric() +
                                      ": a resume continues the same rule (train.early_stopping.metric)");
  stopper_.Restore(history.best_epoch(), history.best_value(), history.last_epoch());
  best_ = LoadEpoch(history.best_epoch(), history.best_rows(), history.best_metrics());
  last_ = LoadEpoch(history.last_epoch(), history.last_rows(), history.last_metrics());
  return Status::OK();
}

}  // namespace tether
