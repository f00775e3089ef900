#include "server/coordinator/adaptive_batches.h"

#include <glog/logging.h>

#include <algorithm>
#include <cmath>

namespace tether {

double AdaptiveBatches::BusySeconds(double between_clocks_s, double bound_wait_s) {
  return std::max(0.0, between_clocks_s - bound_wait_s);
}

StatusOr<std::unique_ptr<BatchController>> AdaptiveBatches::MakeController(const AdaptiveBatchClock& settings) {
  BatchControllerOptions o;
  o.minibatch_size = settings.minibatch_size();
  o.b_min = settings.config().b_min();
  o.b_max = settings.config().b_max();
  o.warmup_clocks = settings.config().warmup_clocks();
  o.window_clocks = settings.config().window_clocks();
  o.smoothing = settings.config().smoothing();
  TETHER_RETURN_IF_ERROR(CheckBatchControllerOptions(o));
  return std::make_unique<BatchController>(o);
}

StatusOr<int> AdaptiveBatches::Report(int rank, const AdaptiveBatchClock& report, double bound_wait_s,
                                      TimePoint now) {
  if (!std::isfinite(report.idle_s()) || report.idle_s() < 0)
    return Status::InvalidArgument("CLOCK from worker " + std::to_string(rank) + ": adaptive batch idle_s " +
                                   std::to_string(report.idle_s()) + " is not a duration (finite, >= 0)");
  AdaptiveBatchClock settings = report;
  settings.clear_rows();
  settings.clear_batch_size();
  settings.clear_idle_s();
  if (controller_ == nullptr) {
    StatusOr<std::unique_ptr<BatchController>> made = MakeController(settings);
    if (!made.ok())
      return Status::InvalidArgument("CLOCK from worker " + std::to_string(rank) +
                                     ": train.adaptive_batch refused: " + made.status().message());
    controller_ = std::move(made).value();
    settings_ = settings;
    const BatchControllerOptions& o = controller_->options();
    LOG(INFO) << log_prefix_ << "adaptive batch sizes in [" << o.b_min << ", " << o.b_max << "], mean "
              << o.minibatch_size << ", after " << o.warmup_clocks << " warm-up clocks (from worker " << rank << ")";
  } else if (settings.SerializeAsString() != settings_.SerializeAsString()) {
    return Status::InvalidArgument("CLOCK from worker " + std::to_string(rank) +
                                   ": train.adaptive_batch differs from the job's (first reported): worker " +
                                   std::to_string(rank) + " has {" + settings.ShortDebugString() + "}, the job {" +
                                   settings_.ShortDebugString() + "}");
  }
  double busy = 0;
  auto [it, first] = timing_.try_emplace(rank);
  if (!first)
    busy = BusySeconds(std::chrono::duration<double>(now - it->second.last_clock).count(),
                       bound_wait_s - it->second.bound_wait_s);
  it->second.last_clock = now;
  it->second.bound_wait_s = bound_wait_s;
  // A clock in which the worker was idle (waiting for a data chunk) is no
  // measure of its pace: its wait, timed by the worker, is typically tens
  // of times the clock's work, timed here, so their difference would be
  // mostly the jitter between the two clocks. It keeps its size.
  if (!first && report.idle_s() > 0) return controller_->batch(rank);
  const int before = controller_->batch(rank);
  const int b = controller_->Report(rank, report.rows(), busy);
  if (b != before)
    VLOG(1) << log_prefix_ << "worker " << rank << " batch " << before << " -> " << b << " ("
            << controller_->rate(rank) << " rows/s)";
  return b;
}

void AdaptiveBatches::Forget(int rank) {
  timing_.erase(rank);
  if (controller_ != nullptr) controller_->Remove(rank);
}

void AdaptiveBatches::Snapshot(AdaptiveBatchState* state) const {
  state->Clear();
  if (controller_ == nullptr) return;
  *state->mutable_settings() = settings_;
  controller_->Snapshot(state);
  for (const auto& [rank, t] : timing_) {
    AdaptiveBatchState::Timing* o = state->add_timing();
    o->set_rank(rank);
    o->set_last_clock_ns(std::chrono::duration_cast<std::chrono::nanoseconds>(t.last_clock.time_since_epoch()).count());
    o->set_bound_wait_s(t.bound_wait_s);
  }
}

Status AdaptiveBatches::Restore(const AdaptiveBatchState& state) {
  if (!state.has_settings()) {
    controller_.reset();
    settings_.Clear();
    timing_.clear();
    return Status::OK();
  }
  StatusOr<std::unique_ptr<BatchController>> made = MakeController(state.settings());
  if (!made.ok()) return Status::InvalidArgument("adaptive batch state: settings refused: " + made.status().message());
  TETHER_RETURN_IF_ERROR((*made)->Restore(state));
  std::map<int, Timing> timing;
  for (const AdaptiveBatchState::Timing& t : state.timing())
    timing[t.rank()] = {TimePoint(std::chrono::duration_cast<TimePoint::duration>(std::chrono::nanoseconds(t.last_clock_ns()))),
                        t.bound_wait_s()};
  controller_ = std::move(made).value();
  settings_ = state.settings();
  timing_ = std::move(timing);
  return Status::OK();
}

}  // namespace tether
