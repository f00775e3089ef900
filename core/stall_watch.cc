#include "core/stall_watch.h"

namespace tether {

void StallWatch::Turn(Clock::time_point now, int64_t blocked_ms) {
  if (started_ && threshold_ms_ > 0) {
    const int64_t gap_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(now - last_turn_).count() - blocked_ms;
    if (gap_ms > threshold_ms_) {
      last_stall_ms_ = gap_ms;
      stall_ended_ = now;
    }
  }
  started_ = true;
  last_turn_ = now;
}

bool StallWatch::Stalled(Clock::time_point now) const {
  if (threshold_ms_ <= 0 || last_stall_ms_ == 0) return false;
  return std::chrono::duration_cast<std::chrono::milliseconds>(now - stall_ended_).count() <= memory_ms_;
}

}  // namespace tether
