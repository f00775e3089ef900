// The run's end: the barrier, the final checkpoint, the evaluation and the
// report (the metrics file, the goodbye).
#include "worker/train/training_run.h"

#include <algorithm>

#include <glog/logging.h>

#include "core/wire_codec.h"
#include "worker/client/local_replica.h"
#include "worker/metrics_json.h"
#include "worker/train/job_outcome.h"

namespace tether {
namespace {

double UnixSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// The client's bytes on the wire per table (WorkerStats.wire), the values
// a 16-bit wire saturated both ways, and its error-feedback counters.
void AddWireStats(const ClientStats& cs, const std::vector<TableSpec>& tables, WorkerStats* out) {
  for (size_t t = 0; t < tables.size(); ++t) {
    const TableWireBytes counted = t < cs.wire.size() ? cs.wire[t] : TableWireBytes{};
    WorkerTableWire* w = out->add_wire();
    w->set_table(tables[t].name());
    w->set_pull_wire(WireEncodingName(tables[t].pull_wire()));
    w->set_push_wire(WireEncodingName(tables[t].push_wire()));
    w->set_sent_messages(counted.sent.messages);
    w->set_sent_bytes(counted.sent.bytes);
    w->set_sent_value_bytes(counted.sent.value_bytes);
    w->set_sent_fp32_value_bytes(counted.sent.fp32_value_bytes);
    w->set_received_messages(counted.received.messages);
    w->set_received_bytes(counted.received.bytes);
    w->set_received_value_bytes(counted.received.value_bytes);
    w->set_received_fp32_value_bytes(counted.received.fp32_value_bytes);
  }
  out->set_wire_saturated_sent(cs.push_values_saturated);
  out->set_wire_saturated_received(cs.reply_values_saturated);
  out->set_wire_saturated(cs.push_values_saturated + cs.reply_values_saturated);
  out->set_residual_rows(cs.residual_rows);
  out->set_residual_evicted(cs.residual_evicted);
  out->set_residual_evicted_l1(cs.residual_evicted_l1);
}

}  // namespace

Status TrainingRun::Finish() {
  TETHER_RETURN_IF_ERROR(Barrier());
  TETHER_RETURN_IF_ERROR(RestoreBestModel());
  report_.train_seconds = TrainSeconds();
  report_.samples_per_second = report_.total_samples / std::max(1e-9, report_.train_seconds);
  std::string incomplete;  // set when workers left before the end
  if (checkpointer_->enabled() && rank_ == session_->evaluator_rank()) {
    // The end of the job: every worker is at the barrier, so the shards hold
    // the trained model; worker 0 (or, when it left, the evaluator: the
    // lowest rank at the barrier) takes the final checkpoint alone.
    TETHER_ASSIGN_OR_RETURN(incomplete,
                            checkpointer_->TakeFinal(manifest_, resume_dir_, source_->dealt_by_shard0(), &report_));
  }
  report_.pull_wait_fraction = pull_wait_ / std::max(1e-9, report_.train_seconds);
  LOG(INFO) << who_ << "training done: " << report_.total_samples << " samples over all workers in "
            << report_.train_seconds << " s (" << static_cast<int64_t>(report_.samples_per_second) << " samples/s)";
  TETHER_RETURN_IF_ERROR(Evaluate(&incomplete));
  return Report(incomplete);
}

WorkerStats TrainingRun::BarrierStats() const {
  const ClientStats& cs = client_->stats();
  const double my_train_s = std::max(1e-9, TrainSeconds());
  WorkerStats mine;
  mine.set_rank(rank_);
  // This run's rows, like every other counter here (the job's samples/s
  // comes from them); the barrier's total includes the rows trained before
  // a resume.
  mine.set_samples(report_.samples - start_.samples);
  mine.set_train_seconds(my_train_s);
  mine.set_pulls(cs.pulls);
  mine.set_rows_pulled(cs.rows_pulled);
  mine.set_rows_read(cs.rows_read);
  mine.set_cache_hits(cs.cache_hits);
  mine.set_pushes(cs.pushes);
  mine.set_rows_pushed(cs.rows_pushed);
  mine.set_bytes_sent(cs.bytes_sent);
  mine.set_bytes_received(cs.bytes_received);
  mine.set_wait_seconds(cs.wait_seconds);
  mine.set_wait_fraction(std::min(1.0, cs.wait_seconds / my_train_s));
  mine.set_train_start_unix_s(train_start_unix_s_);
  mine.set_run_samples(report_.samples - start_.samples);
  mine.set_train_end_unix_s(UnixSeconds() - eval_seconds_);
  mine.set_cache_capacity_bytes(cs.cache_capacity_bytes);
  mine.set_cache_peak_bytes(cs.cache_peak_bytes);
  mine.set_cache_evictions(cs.cache_evictions);
  mine.set_cache_hit_rate(cs.rows_read > 0 ? static_cast<double>(cs.cache_hits) / cs.rows_read : 0.0);
  std::vector<int64_t> epoch_rows = epoch_rows_;
  source_->AddStats(&mine, &epoch_rows);
  for (int64_t r : epoch_rows) mine.add_epoch_rows(r);
  mine.set_minibatches(run_minibatches_);
  mine.set_batch_size_final(static_cast<int32_t>(bs_));
  mine.set_batch_size_min(static_cast<int32_t>(bs_min_));
  mine.set_batch_size_max(static_cast<int32_t>(bs_max_));
  WorkerKeyListStats* kl = mine.mutable_key_lists();
  kl->set_defined(cs.key_lists_defined);
  kl->set_used(cs.key_lists_used);
  kl->set_resent(cs.key_lists_resent);
  kl->set_bytes_saved(cs.key_list_bytes_saved);
  AddWireStats(cs, tables_, &mine);
  mine.set_diverged_at_epoch(report_.diverged ? report_.diverged_at_epoch : 0);
  if (const LocalReplica* replica = client_->replica()) {  // model AVERAGE
    mine.mutable_average()->set_local_steps(replica->stats().local_updates);
    mine.mutable_average()->set_deltas_pushed(replica->stats().deltas_pushed);
  }
  return mine;
}

Status TrainingRun::Barrier() {
  // This worker's counters travel with its barrier message; the evaluator
  // gets everyone's back from the servers (STATS) for the metrics JSON.
  const WorkerStats mine = BarrierStats();
  // This worker's entry in a checkpoint cut after it finished: a resume
  // with nothing left to train reports its loss from there.
  CheckpointWorker finished;
  if (report_.final_loss_from != "none") finished.set_final_loss(report_.final_loss);
  finished.set_diverged(report_.diverged);
  finished.set_diverged_at_epoch(report_.diverged_at_epoch);
  if (validation_ != nullptr && report_.validation_rows > 0)
    *finished.mutable_validation() = OutcomeOfReport(report_, ScoredEpoch());
  TETHER_ASSIGN_OR_RETURN(report_.total_samples,
                          session_->Barrier(report_.samples, mine, source_->dealt_by_shard0(), finished));
  return Status::OK();
}

bool TrainingRun::ReportsRecordedValidation() const {
  return validation_ != nullptr && validation_->best_epoch() == 0 && start_.has_validation;
}

int TrainingRun::ScoredEpoch() const {
  if (ReportsRecordedValidation()) return start_.validation.scored_epoch();
  // RestoreBestModel's choice: the kept copy is the best epoch's.
  return KeepsBestModel(config_) && report_.best_epoch > 0 ? report_.best_epoch : report_.epochs_trained;
}

Status TrainingRun::RestoreBestModel() {
  report_.scored_epoch = ScoredEpoch();
  // Resumed with nothing left to train: the final checkpoint's tables hold
  // the model scored then, and no shard holds a kept copy.
  if (ReportsRecordedValidation()) return Status::OK();
  report_.scored_epoch = report_.epochs_trained;
  if (validation_ == nullptr || !KeepsBestModel(config_) || validation_->best_epoch() == 0) return Status::OK();
  // Every worker asks (the first to reach a shard restores): each reads the
  // model for its part of the evaluation only after its own request is
  // answered. No worker pushes after the barrier.
  const int best = validation_->best_epoch();
  TETHER_ASSIGN_OR_RETURN(const int kept, session_->ModelCut(best, /*restore=*/true));
  report_.scored_epoch = kept;
  if (rank_ == 0)
    LOG(INFO) << who_ << "the model of epoch " << best << " (best " << validation_->metric()
              << " on the validation split) put back on the servers"
              << (best < report_.epochs_trained
                      ? " in place of epoch " + std::to_string(report_.epochs_trained) + "'s"
                      : std::string(": the last epoch trained"));
  return Status::OK();
}

Status TrainingRun::Evaluate(std::string* incomplete) {
  // Rank 0 evaluates and reports, or, when it left the job, the lowest rank
  // at the barrier (shard 0 names it in the barrier's reply).
  const int evaluator = session_->evaluator_rank();
  if (test_deferred_) {
    // The first read of the test split: training is over.
    TETHER_ASSIGN_OR_RETURN(Dataset test, LoadTestPart());
    LOG(INFO) << who_ << "read " << test.features.rows << " test rows after training";
    TETHER_RETURN_IF_ERROR(eval_->SetTest(std::move(test)));
  }
  if (evaluator != 0 && rank_ == evaluator)
    LOG(INFO) << who_ << "rank 0 left the job: this worker evaluates and writes the metrics"
              << (options_.metrics_out.empty() ? " (no --metrics_out given to it: the metrics are logged only)" : "");
  if (rank_ != evaluator) return eval_->SendFinalPart();
  TETHER_ASSIGN_OR_RETURN(report_.servers, session_->FetchServerStats());
  // A worker that never reached the barrier left (or was removed) before
  // the end: its rows were not all trained, so the job did not finish.
  // (Rows dealt on demand are dealt again when their worker leaves.)
  if (incomplete->empty() && !report_.servers.empty()) {
    const BarrierVerdict verdict =
        JudgeBarrier(report_.servers[0], RowsDealtOnDemand(config_), source_->dealt_by_shard0(),
                     config_.train().epochs(), partition_rows_, checkpointer_->enabled());
    if (verdict.rows_redealt)
      LOG(WARNING) << who_ << "worker(s) " << verdict.missing << " left before the end of training; data on demand "
                   << "dealt their chunks again, and every epoch's " << partition_rows_ << " rows were trained";
    *incomplete = verdict.incomplete;
  }
  // With every worker's span in hand, the job's throughput is measured from
  // the first start to the last end, not over rank 0's own span.
  report_.samples_per_second = JobSamplesPerSecond(report_);
  LOG(INFO) << who_ << "job: " << static_cast<int64_t>(report_.samples_per_second)
            << " samples/s from the first worker's start of training to the last one's end";
  return eval_->Final(&report_);
}

Status TrainingRun::Report(const std::string& incomplete) {
  const bool writes_metrics = rank_ == session_->evaluator_rank() && !options_.metrics_out.empty();
  if (metrics_log_ != nullptr) TETHER_RETURN_IF_ERROR(metrics_log_->Flush());
  const ClientStats& cs = client_->stats();
  VLOG(1) << who_ << cs.pulls << " pulls (" << cs.rows_pulled << " rows), " << cs.pushes << " pushes ("
            << cs.rows_pushed << " rows), " << cs.bytes_sent / 1e6 << " MB sent, " << cs.bytes_received / 1e6
            << " MB received";
  if (!incomplete.empty()) {
    // The metrics of what was trained are still written, saying why the
    // job failed; the run fails (and RunWorker tells the servers so).
    report_.failure = incomplete;
    if (writes_metrics) TETHER_RETURN_IF_ERROR(WriteMetricsJson(report_, config_, options_.metrics_out));
    return Status::FailedPrecondition(who_ + incomplete);
  }
  if (Status bye = session_->Bye(); !bye.ok()) {
    // The servers answered the goodbye with the job's failure (another
    // worker failed after this one's barrier): the metrics of what was
    // trained are still written, saying so, and the run fails.
    report_.failure = bye.message();
    if (writes_metrics) {
      if (Status st = WriteMetricsJson(report_, config_, options_.metrics_out); !st.ok())
        LOG(ERROR) << who_ << st.message();
    }
    return bye;
  }
  if (writes_metrics) TETHER_RETURN_IF_ERROR(WriteMetricsJson(report_, config_, options_.metrics_out));
  progress_now_.minibatches = minibatches_;
  PublishProgress(config_.train().epochs());
  return Status::OK();
}

}  // namespace tether
