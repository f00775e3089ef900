#include "worker/eval/test_evaluation.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <sstream>

#include <glog/logging.h>
#include <nlohmann/json.hpp>

#include "core/config.h"
#include "core/net/eval_frames.h"
#include "worker/eval/evaluator.h"
#include "worker/models/model_registry.h"
#include "worker/trainer.h"

namespace tether {
namespace {

using SteadyClock = std::chrono::steady_clock;

double SecondsSince(SteadyClock::time_point t) {
  return std::chrono::duration<double>(SteadyClock::now() - t).count();
}

std::string FormatNumber(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

std::string MetricsLine(const std::vector<std::pair<std::string, double>>& metrics) {
  std::string line;
  for (const auto& [name, value] : metrics) line += " " + name + " " + FormatNumber(value);
  return line;
}

}  // namespace

Status MergeEvalResults(const JobConfig& config, const std::vector<EvalPartial>& all, Model* model, Backend* backend,
                        const std::vector<double>& inv_propensity, TrainReport* report) {
  Evaluator merged(model->label_kind(), model->num_outputs(), backend, inv_propensity);
  TETHER_RETURN_IF_ERROR(MergeEvalPartials(all, &merged));
  if (merged.rows() == 0 && static_cast<int>(all.size()) < config.cluster().num_workers())
    // A P@k of 0 over no rows would read as a score: fail instead.
    return Status::FailedPrecondition(
        "evaluation covered 0 test rows: the " + std::to_string(config.cluster().num_workers()) +
        " initial worker(s) hold the test set's parts and every one of them left the job (joiners evaluate "
        "none); no test metrics to report");
  report->test_metrics = merged.Results();
  report->eval_counts = merged.Counts();
  report->test_rows = merged.rows();
  report->eval_workers = static_cast<int>(all.size());
  report->eval_seconds_slowest = 0;
  for (const EvalPartial& p : all) report->eval_seconds_slowest = std::max(report->eval_seconds_slowest, p.eval_seconds());
  if (static_cast<int>(all.size()) < config.cluster().num_workers())
    LOG(WARNING) << "evaluation: only " << all.size() << " of " << config.cluster().num_workers()
                 << " workers sent their part of the test set (the others left the job): the metrics cover "
                 << merged.rows() << " rows";
  if (merged.tied_rows() > 0) {
    LOG(WARNING) << "evaluation: " << merged.tied_rows() << " of " << merged.rows()
                 << " test rows have tied scores at the top of their ranking; ties are scored by their expected "
                    "value under a random order of the tied labels (a model that cannot tell labels apart never "
                    "looks perfect)";
  }
  return Status::OK();
}

TestEvaluation::TestEvaluation(const JobConfig& config, int rank, Dataset test, Model* model, Backend* backend,
                               WorkerClient* client, JobSession* session)
    : config_(config),
      rank_(rank),
      joiner_(rank >= config.cluster().num_workers()),
      who_("[worker " + std::to_string(rank) + "] "),
      test_(std::move(test)),
      model_(model),
      backend_(backend),
      client_(client),
      session_(session) {}

Status TestEvaluation::Setup(const TrainingCounts& counts) {
  const int num_workers = config_.cluster().num_workers();
  const LabelKind kind = LabelKindOf(config_);
  const double psp_a = config_.train().psp_a(), psp_b = config_.train().psp_b();
  TETHER_ASSIGN_OR_RETURN(setup_, joiner_ ? JoinEvalSetup(rank_, num_workers, kind, psp_a, psp_b, session_)
                                          : ExchangeEvalSetup(rank_, num_workers, kind, psp_a, psp_b, counts,
                                                              test_.features.rows, session_));
  return FinishFeatures(config_, setup_.feature_idf, &test_.features);
}

Status TestEvaluation::SetTest(Dataset test) {
  TETHER_RETURN_IF_ERROR(FinishFeatures(config_, setup_.feature_idf, &test.features));
  test_ = std::move(test);
  return Status::OK();
}

StatusOr<EvalPartial> TestEvaluation::ScorePart(int rank, const Dataset& part, int64_t offset) {
  const auto start = SteadyClock::now();
  Evaluator eval(model_->label_kind(), model_->num_outputs(), backend_, setup_.inv_propensity);
  std::vector<float> scores;
  const int64_t bs = config_.train().eval_minibatch_size();
  const int64_t rows = RowsToEvaluate(offset, part.features.rows, config_.train().eval_max_rows());
  // AVERAGE: evaluation reads the servers' merged model, not this worker's
  // replica (restored on every path out).
  struct PauseReplica {
    WorkerClient* c;
    ~PauseReplica() { c->set_replica_paused(false); }
  } pause{client_};
  client_->set_replica_paused(true);
  TETHER_RETURN_IF_ERROR(model_->BeginEvaluation(client_));
  const Status st = [&]() -> Status {
    for (int64_t b = 0; b < rows; b += bs) {
      const Minibatch batch{&part.features, &part.labels, b, std::min(rows, b + bs)};
      TETHER_RETURN_IF_ERROR(model_->Pull(batch, client_));
      TETHER_RETURN_IF_ERROR(model_->Predict(batch, &scores));
      TETHER_RETURN_IF_ERROR(eval.Add(scores, part.labels, batch.begin, batch.end));
    }
    return Status::OK();
  }();
  model_->EndEvaluation();
  TETHER_RETURN_IF_ERROR(st);
  EvalPartial partial = eval.Partial(rank);
  partial.set_eval_seconds(SecondsSince(start));
  return partial;
}

StatusOr<int> TestEvaluation::FillMissingParts(std::vector<EvalPartial>* all) {
  const int num_workers = config_.cluster().num_workers();
  if (!load_part_ || static_cast<int>(all->size()) >= num_workers) return 0;
  std::vector<EvalPartial> filled;
  size_t next = 0;
  int scored = 0;
  for (int r = 0; r < num_workers; ++r) {
    if (next < all->size() && (*all)[next].rank() == r) {
      filled.push_back(std::move((*all)[next++]));
      continue;
    }
    StatusOr<Dataset> part = load_part_(r);
    if (part.ok()) {
      if (Status st = FinishFeatures(config_, setup_.feature_idf, &part->features); !st.ok()) part = st;
    }
    if (!part.ok()) {
      LOG(WARNING) << who_ << "evaluation: worker " << r << " left the job and its part of the test set cannot be "
                   << "read here (" << part.status().message() << "): it is not scored";
      continue;
    }
    const int64_t offset = static_cast<size_t>(r) < setup_.test_offsets.size() ? setup_.test_offsets[r] : 0;
    TETHER_ASSIGN_OR_RETURN(EvalPartial p, ScorePart(r, *part, offset));
    LOG(INFO) << who_ << "evaluation: worker " << r << " left the job; its part of the test set ("
              << part->features.rows << " rows) was scored here, on the same final model";
    filled.push_back(std::move(p));
    ++scored;
  }
  // Partials of ranks beyond the initial ones (none are sent) keep their place.
  for (; next < all->size(); ++next) filled.push_back(std::move((*all)[next]));
  *all = std::move(filled);
  return scored;
}

StatusOr<bool> TestEvaluation::Evaluate(int64_t round, EvalGatherBody::EvalWant want, TrainReport* report) {
  const auto start = SteadyClock::now();
  EvalPartial mine;
  if (!joiner_) {
    TETHER_ASSIGN_OR_RETURN(mine, ScorePart(rank_, test_, setup_.test_offset));
  }
  std::vector<EvalPartial> all;
  // A worker that joined beyond the initial ranks holds no test rows and
  // owes no partial (it only gathers, when it is the evaluator).
  TETHER_ASSIGN_OR_RETURN(bool complete, session_->EvalGather(round, joiner_ ? nullptr : &mine, want, &all));
  if (want == EvalGatherBody::EVAL_ACK || !complete) return false;
  int for_others = 0;
  if (round == kFinalEvalRound) {
    TETHER_ASSIGN_OR_RETURN(for_others, FillMissingParts(&all));
  }
  TETHER_RETURN_IF_ERROR(MergeEvalResults(config_, all, model_, backend_, setup_.inv_propensity, report));
  report->eval_parts_for_others = for_others;
  report->eval_seconds = SecondsSince(start);
  return true;
}

void TestEvaluation::Log(const std::vector<std::pair<std::string, double>>& metrics, int64_t test_rows, int epoch,
                         double train_s, bool log_line, uint64_t samples, double loss) {
  if (log_line)
    LOG(INFO) << who_ << "test after epoch " << epoch << " (" << test_rows << " rows, " << train_s
              << " s of training):" << MetricsLine(metrics);
  if (metrics_log_ == nullptr) return;
  nlohmann::json j{{"kind", "eval"}, {"epoch", epoch}, {"train_s", train_s}, {"samples", samples},
                   {"test_rows", test_rows}, {"loss", loss}};
  for (const auto& [name, value] : metrics) j[name] = std::isfinite(value) ? nlohmann::json(value) : nullptr;
  metrics_log_->Write(std::move(j));
}

Status TestEvaluation::CollectPending(EvalGatherBody::EvalWant want) {
  while (!pending_.empty()) {
    PendingRound& e = pending_.front();
    if (!e.merged) {
      std::vector<EvalPartial> all;
      TETHER_ASSIGN_OR_RETURN(bool complete, session_->EvalGather(e.epoch, nullptr, want, &all));
      if (!complete) return Status::OK();
      TrainReport r;
      TETHER_RETURN_IF_ERROR(MergeEvalResults(config_, all, model_, backend_, setup_.inv_propensity, &r));
      e.merged = true;
      e.metrics = std::move(r.test_metrics);
      e.test_rows = r.test_rows;
    }
    Log(e.metrics, e.test_rows, e.epoch, e.train_s, true, e.samples, e.loss);
    pending_.pop_front();
  }
  return Status::OK();
}

bool TestEvaluation::DueAfter(int epoch) const {
  const int every = config_.train().eval_every_epochs();
  return every > 0 && epoch % every == 0 && epoch < config_.train().epochs() && !joiner_;
}

Status TestEvaluation::AfterEpoch(int epoch, double train_s, uint64_t samples, double loss) {
  // Rank 0 merges the parts once all are in: it does not wait for a slower
  // worker here.
  pending_.push_back({epoch, train_s, samples, loss, false, {}, 0});
  TrainReport mid;
  TETHER_ASSIGN_OR_RETURN(bool merged,
                          Evaluate(epoch, rank_ == 0 ? EvalGatherBody::EVAL_POLL : EvalGatherBody::EVAL_ACK, &mid));
  if (rank_ != 0) {
    pending_.clear();  // only rank 0 reports
    return Status::OK();
  }
  if (merged) {
    pending_.back().merged = true;
    pending_.back().metrics = std::move(mid.test_metrics);
    pending_.back().test_rows = mid.test_rows;
  }
  // Older open rounds first, so the metrics log stays in epoch order.
  return CollectPending(EvalGatherBody::EVAL_POLL);
}

Status TestEvaluation::SendFinalPart() {
  if (joiner_) return Status::OK();
  // The trained model: every worker is past the barrier.
  TrainReport mine;
  return Evaluate(kFinalEvalRound, EvalGatherBody::EVAL_ACK, &mine).status();
}

Status TestEvaluation::Final(TrainReport* report) {
  // Mid-training rounds still open: every worker is past them now.
  TETHER_RETURN_IF_ERROR(CollectPending(EvalGatherBody::EVAL_WAIT));
  TETHER_ASSIGN_OR_RETURN(bool merged, Evaluate(kFinalEvalRound, EvalGatherBody::EVAL_WAIT, report));
  if (!merged) return Status::Internal(who_ + "shard 0 answered the final evaluation before it was complete");
  VLOG(1) << who_ << "evaluation by " << report->eval_workers << " worker(s): " << report->eval_seconds
            << " s (the slowest worker's part: " << report->eval_seconds_slowest << " s)";
  LOG(INFO) << who_ << "test (" << report->test_rows << " rows):" << MetricsLine(report->test_metrics);
  // With a validation split the model scored is that of scored_epoch: the
  // best epoch's when it was kept, else the last epoch trained.
  const int epoch = report->validation_rows > 0 ? report->scored_epoch : config_.train().epochs();
  Log(report->test_metrics, report->test_rows, epoch, report->train_seconds, false,
      report->samples, report->final_loss);
  return Status::OK();
}

}  // namespace tether
