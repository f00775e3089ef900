// Stale synchronous parallel bookkeeping for one shard (Ho et al., NIPS 2013):
// every worker's clock, which workers still count, and whether a pull issued
// at a given clock may be answered.
//
// A worker's clock is the number of clocks it has completed. min_clock is the
// smallest clock over workers that still count (not finished, not gone); a
// worker that never said hello counts with clock 0. A pull issued at clock c
// is ready when min_clock ≥ c − s (s = 0: BSP; s < 0 means ∞: ASP, always
// ready). Hence every update pushed before clock c − s − 1 was completed by
// every worker has been applied when the pull is answered.
//
// Not thread-safe: owned by the shard's event loop.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

namespace tether {

class ClockTracker {
 public:
  static constexpr int64_t kNoWorkers = std::numeric_limits<int64_t>::max();

  ClockTracker(int num_workers, int64_t staleness);

  /// Records that `rank` completed clock `clock` (clocks only move forward;
  /// an older value is ignored). Returns true when min_clock changed.
  bool Advance(int rank, int64_t clock);
  /// `rank` stops counting (finished training, left, or timed out).
  /// Returns true when min_clock changed.
  bool Remove(int rank);
  /// `rank` counts again, at clock `clock` (a worker rejoining the job).
  /// Returns true when min_clock changed.
  bool Rejoin(int rank, int64_t clock);
  /// The smallest clock over counted workers other than `rank`
  /// (kNoWorkers when there is none).
  int64_t MinClockExcluding(int rank) const;
  /// Whether `rank` still counts towards min_clock.
  bool Counts(int rank) const { return counts_[rank]; }

  int64_t min_clock() const { return min_clock_; }
  int64_t clock(int rank) const { return clocks_[rank]; }
  int64_t staleness() const { return staleness_; }
  int num_workers() const { return static_cast<int>(clocks_.size()); }

  /// True when a pull issued at clock `c` may be answered now under the
  /// job-wide bound.
  bool PullReady(int64_t c) const { return PullReady(c, staleness_); }
  /// Same under bound `s` (a table's own; s < 0 is ASP).
  bool PullReady(int64_t c, int64_t s) const { return s < 0 || min_clock_ >= c - s; }

 private:
  bool Recompute();
  std::vector<int64_t> clocks_;
  std::vector<bool> counts_;
  int64_t staleness_;
  int64_t min_clock_ = 0;
};

}  // namespace tether
