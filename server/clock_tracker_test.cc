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

// Elastic membership: a worker with a new rank joins at the slowest clock
// that counts; the slots it skipped over hold nobody back.
TEST(ClockTrackerTest, JoinerStartsAtTheSlowestClockAndSkippedSlotsBlockNobody) {
  ClockTracker t(/*num_workers=*/1, /*staleness=*/1);
  EXPECT_TRUE(t.Advance(0, 4));
  EXPECT_EQ(t.min_clock(), 4);
  EXPECT_EQ(t.StartClock(3), 4);
  EXPECT_FALSE(t.Join(3, t.StartClock(3)));  // min clock stays 4
  EXPECT_EQ(t.num_workers(), 4);
  EXPECT_FALSE(t.Counts(1));  // ranks 1 and 2 never joined
  EXPECT_FALSE(t.Counts(2));
  EXPECT_TRUE(t.Counts(3));
  EXPECT_EQ(t.clock(3), 4);
  EXPECT_EQ(t.min_clock(), 4);
  // Worker 0 runs on; the joiner now holds the minimum and bounds its reads.
  EXPECT_FALSE(t.Advance(0, 6));
  EXPECT_TRUE(t.PullReady(5));
  EXPECT_FALSE(t.PullReady(6));
  EXPECT_TRUE(t.Advance(3, 5));
  EXPECT_EQ(t.min_clock(), 5);
  EXPECT_TRUE(t.PullReady(6));
  // A clock report or removal of a slot that never joined moves nothing.
  EXPECT_FALSE(t.Advance(2, 9));
  EXPECT_FALSE(t.Remove(2));
  EXPECT_FALSE(t.Counts(2));
  EXPECT_EQ(t.min_clock(), 5);
  EXPECT_FALSE(t.Advance(17, 9));  // beyond every slot: ignored
  EXPECT_EQ(t.num_workers(), 4);
  EXPECT_EQ(t.clock(17), 0);
  EXPECT_FALSE(t.Counts(17));
}

TEST(ClockTrackerTest, JoinAfterEveryoneLeftStartsAtItsOwnClock) {
  ClockTracker t(2, 0);
  t.Advance(0, 3);
  t.Advance(1, 3);
  EXPECT_FALSE(t.Remove(0));  // worker 1 still holds the minimum at 3
  EXPECT_TRUE(t.Remove(1));
  EXPECT_EQ(t.min_clock(), ClockTracker::kNoWorkers);
  EXPECT_EQ(t.StartClock(5), 0);  // a new rank: nobody to follow
  EXPECT_TRUE(t.Join(5, t.StartClock(5)));
  EXPECT_EQ(t.min_clock(), 0);
  EXPECT_EQ(t.StartClock(1), 0);  // rejoining rank 1 follows the joiner
}

TEST(ClockTrackerTest, LeaverAndJoinerInTurn) {
  ClockTracker t(3, 2);
  t.Advance(0, 2);
  t.Advance(1, 7);
  t.Advance(2, 5);
  EXPECT_EQ(t.min_clock(), 2);
  EXPECT_TRUE(t.Remove(0));  // the slowest leaves
  EXPECT_EQ(t.min_clock(), 5);
  EXPECT_EQ(t.StartClock(4), 5);
  EXPECT_FALSE(t.Join(4, 5));
  EXPECT_EQ(t.StartClock(0), 5);  // rank 0 rejoining
  EXPECT_FALSE(t.Rejoin(0, t.StartClock(0)));
  EXPECT_EQ(t.clock(0), 5);
  EXPECT_TRUE(t.Counts(0));
}

TEST(ClockTrackerTest, AParkedWorkerLetsTheOthersReachTheRound) {
  // BSP, two workers whose epochs take 203 and 205 clocks: worker 1 waits
  // at the round after clock 203; worker 0, at 204, still has one to go.
  ClockTracker t(2, /*staleness=*/0);
  t.Advance(0, 204);
  t.Advance(1, 203);
  EXPECT_FALSE(t.PullReady(204));
  EXPECT_TRUE(t.Park(1, true));
  EXPECT_TRUE(t.Parked(1));
  EXPECT_TRUE(t.Counts(1));
  EXPECT_TRUE(t.PullReady(204));
  EXPECT_EQ(t.min_clock(), 204);
  // What every worker's updates are in through: the parked one's clock.
  EXPECT_EQ(t.settled_clock(), 203);
  t.Advance(0, 205);
  // Worker 0 parks at the round too: everyone parked, the minimum is
  // theirs, as without parking.
  EXPECT_TRUE(t.Park(0, true));
  EXPECT_EQ(t.min_clock(), 203);
  EXPECT_FALSE(t.Park(0, true));  // already parked: no change
  // After the round both count again; worker 0 waits for worker 1.
  t.Park(0, false);
  t.Park(1, false);
  EXPECT_EQ(t.min_clock(), 203);
  EXPECT_FALSE(t.PullReady(205));
  // A removed or rejoining rank is never left parked.
  t.Park(1, true);
  t.Remove(1);
  EXPECT_FALSE(t.Parked(1));
  t.Join(1, 205);
  EXPECT_FALSE(t.Parked(1));
  EXPECT_FALSE(t.Park(5, true));  // a rank never seen
}

TEST(ClockTrackerTest, AParkedWorkerLeavingMovesTheSettledClock) {
  // Worker 1 parked at 3 leaves: min_clock stays worker 0's 5, but the
  // settled clock (what model averaging closes rounds by) moves to 5, and
  // the caller hears of it.
  ClockTracker t(2, /*staleness=*/0);
  t.Advance(0, 5);
  t.Advance(1, 3);
  EXPECT_TRUE(t.Park(1, true));
  EXPECT_EQ(t.min_clock(), 5);
  EXPECT_EQ(t.settled_clock(), 3);
  EXPECT_TRUE(t.Remove(1));
  EXPECT_EQ(t.min_clock(), 5);
  EXPECT_EQ(t.settled_clock(), 5);
}

}  // namespace
}  // namespace tether
