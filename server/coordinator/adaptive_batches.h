// AdaptiveBatches: the job coordinator's adaptive batch sizes on the wire
// (train.adaptive_batch; the rule is BatchController's, Ma et al. arXiv
// 2110.07029). Each worker's CLOCK carries an AdaptiveBatchClock report:
// the first report's settings become the job's (a later report with other
// settings is refused), its rows feed the controller with the worker's busy
// time (BusySeconds: the time since its previous CLOCK less what its pulls
// waited on the staleness bound meanwhile), and the size it should train
// with next goes back in the CLOCK_REPLY. A clock in which the worker
// reports idle time (idle_s: waiting for a data chunk, evaluating) is no measurement: the worker keeps its size.
//
// Time is an argument (`now`), never read here, so a test drives it
// exactly. Snapshot/Restore carry the whole state (CoordinatorState.adaptive).
// Not thread-safe: owned by the job coordinator.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>

#include "core/status.h"
#include "proto/coordinator.pb.h"
#include "proto/wire.pb.h"
#include "server/coordinator/batch_controller.h"

namespace tether {

class AdaptiveBatches {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  /// `log_prefix` starts every log line ("[server 0] ").
  explicit AdaptiveBatches(std::string log_prefix = "") : log_prefix_(std::move(log_prefix)) {}

  /// Worker `rank`'s CLOCK at `now` carried `report`; `bound_wait_s` is the
  /// total its pulls have waited on the staleness bound so far (seconds,
  /// non-decreasing). Returns the minibatch size it trains with next.
  /// Errors (nothing recorded): InvalidArgument, naming the rank, when the
  /// settings differ from the job's (the first report's) or, on the first
  /// report, BatchController refuses them; when the report's idle_s is
  /// negative or not finite.
  StatusOr<int> Report(int rank, const AdaptiveBatchClock& report, double bound_wait_s, TimePoint now);
  /// The busy seconds of one clock: `between_clocks_s` (the time between
  /// the worker's two CLOCKs, as shard 0 saw them) less `bound_wait_s` (its
  /// pulls' wait on the staleness bound in that time), never below 0. A
  /// worker's pace is its rows over this: time it spent waiting for others
  /// would make a fast worker look slow.
  static double BusySeconds(double between_clocks_s, double bound_wait_s);
  /// `rank` no longer reports (finished, left, removed, or rejoined afresh).
  void Forget(int rank);

  /// The controller, or null before the first report.
  const BatchController* controller() const { return controller_.get(); }

  void Snapshot(AdaptiveBatchState* state) const;
  /// Continues from `state` (a Snapshot's). Errors: InvalidArgument when
  /// its settings are refused or its workers malformed (BatchController::
  /// Restore); nothing changes then.
  Status Restore(const AdaptiveBatchState& state);

 private:
  struct Timing {
    TimePoint last_clock;       // the rank's previous CLOCK
    double bound_wait_s = 0;    // its bound wait then
  };
  // The controller for `settings` (rows and batch_size cleared), or why
  // they are refused.
  static StatusOr<std::unique_ptr<BatchController>> MakeController(const AdaptiveBatchClock& settings);

  std::string log_prefix_;
  std::unique_ptr<BatchController> controller_;
  AdaptiveBatchClock settings_;  // the job's: rows and batch_size cleared
  std::map<int, Timing> timing_;  // by rank
};

}  // namespace tether
