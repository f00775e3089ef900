#include "core/stall_watch.h"

#include <gtest/gtest.h>

namespace tether {
namespace {

using std::chrono::milliseconds;

TEST(StallWatchTest, TurnsWithinTheirPollTimeoutAreNoStall) {
  StallWatch w(/*threshold_ms=*/500, /*memory_ms=*/2000);
  const auto t0 = StallWatch::Clock::time_point{} + milliseconds(10000);
  w.Turn(t0, 0);
  w.Turn(t0 + milliseconds(100), 100);   // blocked as asked
  w.Turn(t0 + milliseconds(1100), 1000);  // a long poll, as asked
  w.Turn(t0 + milliseconds(1550), 0);     // 450 ms of work: under the threshold
  EXPECT_FALSE(w.Stalled(t0 + milliseconds(1550)));
  EXPECT_EQ(w.last_stall_ms(), 0);
}

TEST(StallWatchTest, AGapPastTheThresholdIsRememberedForMemoryMs) {
  StallWatch w(500, 2000);
  const auto t0 = StallWatch::Clock::time_point{} + milliseconds(10000);
  w.Turn(t0, 0);
  w.Turn(t0 + milliseconds(11100), 100);  // stopped for 11 s
  EXPECT_EQ(w.last_stall_ms(), 11000);
  EXPECT_TRUE(w.Stalled(t0 + milliseconds(11100)));
  EXPECT_TRUE(w.Stalled(t0 + milliseconds(13100)));
  EXPECT_FALSE(w.Stalled(t0 + milliseconds(13101)));
  // Normal turns afterwards keep the last stall's length, and the verdict
  // lapses memory_ms after the stall ended.
  for (int i = 1; i <= 30; ++i) w.Turn(t0 + milliseconds(11100 + 100 * i), 100);
  EXPECT_EQ(w.last_stall_ms(), 11000);
  EXPECT_FALSE(w.Stalled(t0 + milliseconds(14100)));
}

TEST(StallWatchTest, TheFirstTurnHasNothingToCompareWith) {
  StallWatch w(500, 2000);
  const auto t0 = StallWatch::Clock::time_point{} + milliseconds(99999);
  w.Turn(t0, 0);
  EXPECT_FALSE(w.Stalled(t0));
}

TEST(StallWatchTest, AZeroThresholdTurnsTheWatchOff) {
  StallWatch w(0, 2000);
  const auto t0 = StallWatch::Clock::time_point{} + milliseconds(10000);
  w.Turn(t0, 0);
  w.Turn(t0 + milliseconds(60000), 0);
  EXPECT_FALSE(w.Stalled(t0 + milliseconds(60000)));
  EXPECT_EQ(w.last_stall_ms(), 0);
}

}  // namespace
}  // namespace tether
