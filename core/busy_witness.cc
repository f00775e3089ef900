#include "core/busy_witness.h"

#include <algorithm>

namespace tether {

void GapMeter::Mark(Clock::time_point now) {
  longest_ = std::max(longest_, std::chrono::duration_cast<std::chrono::milliseconds>(now - last_));
  last_ = std::max(last_, now);
}

BusyWitness::BusyWitness(std::chrono::milliseconds tick)
    : tick_(tick), start_(Clock::now()), meter_(start_), thread_([this] { Watch(); }) {}

BusyWitness::~BusyWitness() { (void)Finish(); }

void BusyWitness::Watch() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!done_) {
    // A wait, not a sleep: Finish() ends it at once.
    wake_.wait_for(lock, tick_);
    meter_.Mark(Clock::now());
  }
}

BusyWitness::Verdict BusyWitness::Finish() {
  if (finished_) return verdict_;
  finished_ = true;
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
  }
  wake_.notify_all();
  thread_.join();
  const auto end = Clock::now();
  // The last stretch counts too: a stop right before Finish() shows here.
  meter_.Mark(end);
  verdict_.busy = std::chrono::duration_cast<std::chrono::milliseconds>(end - start_);
  verdict_.longest_gap = meter_.longest();
  return verdict_;
}

}  // namespace tether
