#include "server/clock_tracker.h"

#include <gtest/gtest.h>

namespace tether {
namespace {

TEST(ClockTrackerTest, SspBoundWithSlowWorker) {
  ClockTracker t(/*num_workers=*/2, /*staleness=*/2);
  EXPECT_EQ(t.min_clock(), 0);
  // Worker 1 is slow and stays at clock 0; worker 0 runs ahead to clock 3.
  EXPECT_FALSE(t.Advance(0, 3));  // min clock is still worker 1's 0
  EXPECT_TRUE(t.PullReady(0));
  EXPECT_TRUE(t.PullReady(1));
  EXPECT_TRUE(t.PullReady(2));   // 2 = min + s: still allowed
  EXPECT_FALSE(t.PullReady(3));  // exceeds min + s
  EXPECT_TRUE(t.Advance(1, 1));
  EXPECT_EQ(t.min_clock(), 1);
  EXPECT_TRUE(t.PullReady(3));
  EXPECT_FALSE(t.PullReady(4));
}

TEST(ClockTrackerTest, BspWaitsForEveryone) {
  ClockTracker t(3, 0);
  t.Advance(0, 1);
  t.Advance(1, 1);
  EXPECT_EQ(t.min_clock(), 0);
  EXPECT_FALSE(t.PullReady(1));
  EXPECT_TRUE(t.Advance(2, 1));
  EXPECT_TRUE(t.PullReady(1));
  EXPECT_FALSE(t.PullReady(2));
}

TEST(ClockTrackerTest, AspNeverWaits) {
  ClockTracker t(2, -1);
  EXPECT_TRUE(t.PullReady(1000000));
}

TEST(ClockTrackerTest, RemovedWorkerNoLongerHoldsTheMinimum) {
  ClockTracker t(2, 1);
  t.Advance(0, 5);
  EXPECT_FALSE(t.PullReady(5));
  EXPECT_TRUE(t.Remove(1));
  EXPECT_EQ(t.min_clock(), 5);
  EXPECT_TRUE(t.PullReady(6));
  EXPECT_TRUE(t.Remove(0));
  EXPECT_EQ(t.min_clock(), ClockTracker::kNoWorkers);
  EXPECT_FALSE(t.Remove(0));
}

TEST(ClockTrackerTest, ClocksNeverMoveBackwards) {
  ClockTracker t(1, 0);
  EXPECT_TRUE(t.Advance(0, 3));
  EXPECT_FALSE(t.Advance(0, 2));
  EXPECT_EQ(t.clock(0), 3);
}

}  // namespace
}  // namespace tether
