#include "server/coordinator/batch_controller.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <glog/logging.h>

namespace tether {

Status CheckBatchControllerOptions(const BatchControllerOptions& o) {
  auto bad = [](const std::string& why) { return Status::InvalidArgument(why); };
  if (o.minibatch_size < 1) return bad("minibatch_size " + std::to_string(o.minibatch_size) + " must be ≥ 1");
  if (o.b_min < 1) return bad("b_min " + std::to_string(o.b_min) + " must be ≥ 1");
  if (o.b_min > o.minibatch_size || o.minibatch_size > o.b_max)
    return bad("b_min " + std::to_string(o.b_min) + " ≤ minibatch_size " + std::to_string(o.minibatch_size) +
               " ≤ b_max " + std::to_string(o.b_max) + " does not hold");
  if (o.warmup_clocks < 0) return bad("warmup_clocks " + std::to_string(o.warmup_clocks) + " must be ≥ 0");
  if (o.window_clocks < 1) return bad("window_clocks " + std::to_string(o.window_clocks) + " must be ≥ 1");
  if (!(o.smoothing > 0 && o.smoothing <= 1)) return bad("smoothing " + std::to_string(o.smoothing) + " must be in (0, 1]");
  return Status::OK();
}

BatchController::BatchController(const BatchControllerOptions& o) : options_(o) {
  const Status st = CheckBatchControllerOptions(o);
  CHECK(st.ok()) << st.message();
}

int BatchController::Report(int rank, int64_t rows, double busy_seconds) {
  CHECK_GE(rank, 0);
  auto [it, added] = workers_.try_emplace(rank);
  Worker& w = it->second;
  if (added) w.batch = options_.minibatch_size;
  // Warm-up: start-up costs (connections, rows created on first touch) would
  // make the first clocks look slow; they are neither measured nor acted on.
  if (++w.clocks <= options_.warmup_clocks) return batch(rank);
  if (!(busy_seconds > 0)) {
    w.pending_rows += rows;
    return batch(rank);
  }
  w.window.emplace_back(rows + w.pending_rows, busy_seconds);
  w.pending_rows = 0;
  while (static_cast<int>(w.window.size()) > options_.window_clocks) w.window.pop_front();
  const std::map<int, double> targets = Targets();
  const auto t = targets.find(rank);
  if (t != targets.end()) {
    w.batch += options_.smoothing * (t->second - w.batch);
    w.batch = std::clamp(w.batch, static_cast<double>(options_.b_min), static_cast<double>(options_.b_max));
  }
  return batch(rank);
}

void BatchController::Remove(int rank) { workers_.erase(rank); }

int BatchController::batch(int rank) const {
  const auto it = workers_.find(rank);
  if (it == workers_.end()) return options_.minibatch_size;
  const long b = std::lround(it->second.batch);
  return static_cast<int>(std::clamp<long>(b, options_.b_min, options_.b_max));
}

double BatchController::rate(int rank) const {
  const auto it = workers_.find(rank);
  if (it == workers_.end()) return 0;
  int64_t rows = 0;
  double seconds = 0;
  for (const auto& [r, s] : it->second.window) {
    rows += r;
    seconds += s;
  }
  return seconds > 0 ? static_cast<double>(rows) / seconds : 0;
}

std::map<int, double> BatchController::Targets() const {
  std::map<int, double> rates;
  for (const auto& [rank, w] : workers_) {
    const double r = rate(rank);
    if (r > 0) rates[rank] = r;
  }
  std::map<int, double> targets;
  std::set<int> free;
  for (const auto& [rank, r] : rates) free.insert(rank);
  const double total = static_cast<double>(rates.size()) * options_.minibatch_size;
  const double lo = options_.b_min, hi = options_.b_max;
  double fixed = 0;
  // Water-filling: cap the workers above b_max first (that leaves more for
  // the others, so nobody new goes above), then raise those below b_min
  // (that leaves less, so nobody new goes above either); each pass fixes at
  // least one worker, so it ends within n passes.
  for (bool high = true; !free.empty();) {
    double rsum = 0;
    for (int rank : free) rsum += rates[rank];
    const double k = (total - fixed) / rsum;
    bool fixed_some = false;
    for (auto it = free.begin(); it != free.end();) {
      const double t = k * rates[*it];
      if (high ? t > hi : t < lo) {
        targets[*it] = high ? hi : lo;
        fixed += targets[*it];
        it = free.erase(it);
        fixed_some = true;
      } else {
        ++it;
      }
    }
    if (fixed_some) continue;
    if (high) {
      high = false;
      continue;
    }
    for (int rank : free) targets[rank] = k * rates[rank];
    break;
  }
  return targets;
}

void BatchController::Snapshot(AdaptiveBatchState* state) const {
  state->clear_workers();
  for (const auto& [rank, w] : workers_) {
    AdaptiveBatchState::Worker* o = state->add_workers();
    o->set_rank(rank);
    for (const auto& [rows, seconds] : w.window) {
      o->add_window_rows(rows);
      o->add_window_seconds(seconds);
    }
    o->set_pending_rows(w.pending_rows);
    o->set_clocks(w.clocks);
    o->set_batch(w.batch);
  }
}

Status BatchController::Restore(const AdaptiveBatchState& state) {
  std::map<int, Worker> workers;
  for (const AdaptiveBatchState::Worker& o : state.workers()) {
    if (o.rank() < 0 || o.window_rows_size() != o.window_seconds_size())
      return Status::InvalidArgument("adaptive batch state of rank " + std::to_string(o.rank()) +
                                     ": a negative rank, or a window of " + std::to_string(o.window_rows_size()) +
                                     " row counts and " + std::to_string(o.window_seconds_size()) + " times");
    auto [it, added] = workers.try_emplace(o.rank());
    if (!added) return Status::InvalidArgument("adaptive batch state: rank " + std::to_string(o.rank()) + " listed twice");
    Worker& w = it->second;
    for (int i = 0; i < o.window_rows_size(); ++i) w.window.emplace_back(o.window_rows(i), o.window_seconds(i));
    w.pending_rows = o.pending_rows();
    w.clocks = o.clocks();
    w.batch = o.batch();
  }
  workers_ = std::move(workers);
  return Status::OK();
}

}  // namespace tether
