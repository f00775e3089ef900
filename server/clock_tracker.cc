#include "server/clock_tracker.h"

#include <algorithm>
#include <string>

#include "proto/shard_state.pb.h"

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

void ClockTracker::SaveState(ClockTrackerState* state) const {
  state->Clear();
  for (size_t r = 0; r < clocks_.size(); ++r) {
    ClockTrackerState::Slot* slot = state->add_slots();
    slot->set_clock(clocks_[r]);
    slot->set_counts(counts_[r]);
    slot->set_parked(parked_[r]);
  }
  state->set_staleness(staleness_);
  state->set_min_clock(min_clock_);
  state->set_settled_clock(settled_clock_);
}

Status ClockTracker::RestoreState(const ClockTrackerState& state) {
  const std::string at = "shard state: clocks.";
  const int n = state.slots_size();
  if (n < num_workers() || n > kMaxSlots)
    return Status::DataLoss(at + "slots: " + std::to_string(n) + " slots, this job's shard holds " +
                            std::to_string(num_workers()) + " to " + std::to_string(kMaxSlots));
  if (state.staleness() != staleness_)
    return Status::DataLoss(at + "staleness: " + std::to_string(state.staleness()) + ", this shard's is " +
                            std::to_string(staleness_) + " (another job's configuration)");
  clocks_.assign(n, 0);
  counts_.assign(n, false);
  parked_.assign(n, false);
  for (int r = 0; r < n; ++r) {
    const ClockTrackerState::Slot& slot = state.slots(r);
    const std::string field = at + "slots[" + std::to_string(r) + "].";
    if (slot.clock() < 0)
      return Status::DataLoss(field + "clock: " + std::to_string(slot.clock()) + " (clocks are ≥ 0)");
    if (slot.parked() && !slot.counts())
      return Status::DataLoss(field + "parked: a slot that does not count cannot be parked");
    clocks_[r] = slot.clock();
    counts_[r] = slot.counts();
    parked_[r] = slot.parked();
  }
  Recompute();
  if (state.min_clock() != min_clock_ || state.settled_clock() != settled_clock_)
    return Status::DataLoss(at + "min_clock: " + std::to_string(state.min_clock()) + " and settled_clock " +
                            std::to_string(state.settled_clock()) + ", the slots give " + std::to_string(min_clock_) +
                            " and " + std::to_string(settled_clock_));
  return Status::OK();
}

}  // namespace tether
