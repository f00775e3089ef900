// Stale synchronous parallel bookkeeping for one shard (Ho et al., NIPS 2013):
// every worker's clock, which workers still count, and whether a pull issued
// at a given clock may be answered.
//
// A worker's clock is the number of clocks it has completed. min_clock is the
// smallest clock over workers that still count (not finished, not gone); one
// of the job's initial workers (rank < the constructor's num_workers) that
// has not said hello yet counts with clock 0.
//
// Membership is dynamic (cluster.max_workers, docs/CONSISTENCY.md "Joining
// and leaving"): Join() admits a rank beyond the initial ones, growing the
// tracker; a slot that never joined counts for nobody. A joiner starts at
// StartClock() — the slowest clock that counts — so nobody waits for clocks
// it will never work, and its pulls follow the same rule as everyone's. A pull issued at clock c
// is ready when min_clock ≥ c − s (s = 0: BSP; s < 0 means ∞: ASP, always
// ready). Hence every update pushed before clock c − s − 1 was completed by
// every worker has been applied when the pull is answered.
//
// Not thread-safe: owned by the shard's event loop.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "core/status.h"

namespace tether {

class ClockTrackerState;  // proto/shard_state.proto

class ClockTracker {
 public:
  static constexpr int64_t kNoWorkers = std::numeric_limits<int64_t>::max();

  /// `num_workers` initial ranks [0, num_workers), each counting at clock 0.
  ClockTracker(int num_workers, int64_t staleness);

  /// Records that `rank` completed clock `clock` (clocks only move forward;
  /// an older value is ignored). Returns true when min_clock or
  /// settled_clock changed (as do Remove, Join and Park).
  bool Advance(int rank, int64_t clock);
  /// `rank` stops counting (finished training, left, or timed out).
  bool Remove(int rank);
  /// `rank` (≥ 0) counts, at clock `clock`: a worker joining with a new
  /// rank (the tracker grows to rank + 1 slots; slots skipped over count for
  /// nobody until they join) or rejoining with a known one.
  bool Join(int rank, int64_t clock);
  /// `rank` waits at a round every worker takes part in (the validation
  /// round at an epoch's end) at its clock, having pushed everything of it
  /// (under model averaging: every round it ended; it may be partway into
  /// the next, which is why rounds close by settled_clock): while parked it does not hold min_clock back, so workers whose epochs
  /// take more clocks can reach the round too. It still counts (Counts()).
  /// When every counting worker is parked, min_clock is their smallest
  /// clock as usual. A Join() or Remove() unparks. Returns true when
  /// min_clock or settled_clock changed (Remove of a parked worker may move
  /// settled_clock alone).
  bool Park(int rank, bool parked);
  bool Parked(int rank) const { return Counts(rank) && parked_[rank]; }
  /// Join() for a known rank (a worker rejoining after a crash or timeout).
  bool Rejoin(int rank, int64_t clock) { return Join(rank, clock); }
  /// The clock a worker (re)joining as `rank` starts at: the smallest clock
  /// over the other counted workers, or, when none counts, `rank`'s own
  /// clock (0 for a rank never seen).
  int64_t StartClock(int rank) const;
  /// The smallest clock over counted workers other than `rank`
  /// (kNoWorkers when there is none).
  int64_t MinClockExcluding(int rank) const;
  /// Whether `rank` still counts towards min_clock (false for a rank never
  /// seen).
  bool Counts(int rank) const { return rank >= 0 && rank < num_workers() && counts_[rank]; }

  int64_t min_clock() const { return min_clock_; }
  /// The smallest clock over every counting worker, parked or not: every
  /// update of those clocks has been applied. A reply's min_clock tag (what
  /// a worker's cache trusts a row for) is this one, so a row read past a
  /// parked worker is not served from a cache after that worker counts
  /// again. Model averaging closes rounds by it (KvService): a parked
  /// worker may still owe the delta of the round it is in. Equals
  /// min_clock() when nobody is parked.
  int64_t settled_clock() const { return settled_clock_; }
  /// `rank`'s clock (0 for a rank never seen).
  int64_t clock(int rank) const { return rank >= 0 && rank < num_workers() ? clocks_[rank] : 0; }
  int64_t staleness() const { return staleness_; }
  /// Slots held: the initial workers, grown by Join() to the highest rank
  /// that joined + 1.
  int num_workers() const { return static_cast<int>(clocks_.size()); }

  /// True when a pull issued at clock `c` may be answered now under the
  /// job-wide bound.
  bool PullReady(int64_t c) const { return PullReady(c, staleness_); }
  /// Same under bound `s` (a table's own; s < 0 is ASP).
  bool PullReady(int64_t c, int64_t s) const { return s < 0 || min_clock_ >= c - s; }

  // ---- A copy of the tracker (proto/shard_state.proto ClockTrackerState:
  // a running shard's state sent to a joining replica).
  /// The most slots a restored tracker takes (cluster.max_workers' ceiling).
  static constexpr int kMaxSlots = 1 << 16;
  /// Writes every slot (clock, counts, parked), the bound and the two
  /// minima into `*state` (cleared first).
  void SaveState(ClockTrackerState* state) const;
  /// Takes `state` over a tracker freshly made as the shard makes it (the
  /// same initial workers and staleness), before any other call. Errors:
  /// DataLoss naming the field ("shard state: clocks.slots[3].clock ...")
  /// for fewer slots than the initial workers or more than kMaxSlots, a
  /// negative clock, a parked slot that does not count, another staleness,
  /// or minima the slots do not give; the tracker is then unusable (the
  /// caller throws it away).
  Status RestoreState(const ClockTrackerState& state);

 private:
  bool Recompute();
  std::vector<int64_t> clocks_;
  std::vector<bool> counts_;
  std::vector<bool> parked_;
  int64_t staleness_;
  int64_t settled_clock_ = kNoWorkers;
  int64_t min_clock_ = 0;
};

}  // namespace tether
