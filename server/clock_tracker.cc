#include "server/clock_tracker.h"

#include <algorithm>

namespace tether {

ClockTracker::ClockTracker(int num_workers, int64_t staleness)
    : clocks_(num_workers, 0), counts_(num_workers, true), parked_(num_workers, false), staleness_(staleness) {
  Recompute();
}

bool ClockTracker::Recompute() {
  int64_t m = kNoWorkers, all = kNoWorkers;
  for (size_t r = 0; r < clocks_.size(); ++r) {
    if (!counts_[r]) continue;
    all = std::min(all, clocks_[r]);
    if (!parked_[r]) m = std::min(m, clocks_[r]);
  }
  if (m == kNoWorkers) m = all;  // everyone parked (or nobody counts)
  // Either moving may admit a pull or close an AVERAGE round.
  const bool changed = m != min_clock_ || all != settled_clock_;
  settled_clock_ = all;
  min_clock_ = m;
  return changed;
}

bool ClockTracker::Advance(int rank, int64_t clock) {
  if (rank < 0 || rank >= num_workers() || clock <= clocks_[rank]) return false;
  clocks_[rank] = clock;
  return Recompute();
}

bool ClockTracker::Join(int rank, int64_t clock) {
  if (rank >= num_workers()) {
    clocks_.resize(static_cast<size_t>(rank) + 1, 0);
    counts_.resize(static_cast<size_t>(rank) + 1, false);
    parked_.resize(static_cast<size_t>(rank) + 1, false);
  }
  counts_[rank] = true;
  parked_[rank] = false;
  clocks_[rank] = clock;
  return Recompute();
}

int64_t ClockTracker::StartClock(int rank) const {
  const int64_t others = MinClockExcluding(rank);
  return others == kNoWorkers ? clock(rank) : others;
}

int64_t ClockTracker::MinClockExcluding(int rank) const {
  int64_t m = kNoWorkers;
  for (size_t r = 0; r < clocks_.size(); ++r)
    if (counts_[r] && static_cast<int>(r) != rank) m = std::min(m, clocks_[r]);
  return m;
}

bool ClockTracker::Remove(int rank) {
  if (!Counts(rank)) return false;
  counts_[rank] = false;
  parked_[rank] = false;
  return Recompute();
}

bool ClockTracker::Park(int rank, bool parked) {
  if (!Counts(rank) || parked_[rank] == parked) return false;
  parked_[rank] = parked;
  return Recompute();
}

}  // namespace tether
