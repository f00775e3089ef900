#include "server/clock_tracker.h"

#include <algorithm>

namespace tether {

ClockTracker::ClockTracker(int num_workers, int64_t staleness)
    : clocks_(num_workers, 0), counts_(num_workers, true), staleness_(staleness) {
  Recompute();
}

bool ClockTracker::Recompute() {
  int64_t m = kNoWorkers;
  for (size_t r = 0; r < clocks_.size(); ++r)
    if (counts_[r]) m = std::min(m, clocks_[r]);
  bool changed = m != min_clock_;
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
  }
  counts_[rank] = true;
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
  return Recompute();
}

}  // namespace tether
