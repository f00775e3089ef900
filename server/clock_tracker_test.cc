#include "server/clock_tracker.h"

#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include "proto/shard_state.pb.h"

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

// A tracker grown by a joiner, with a removed and a parked worker, copied
// into a fresh one: the same state, and the same answers afterwards.
TEST(ClockTrackerTest, ARestoredCopyHoldsTheSameStateAndAnswersTheSame) {
  ClockTracker a(3, /*staleness=*/1);
  a.Advance(0, 6);
  a.Advance(1, 4);
  a.Advance(2, 5);
  a.Remove(0);
  a.Join(5, a.StartClock(5));  // slots 3, 4 skipped over
  a.Park(2, true);
  ClockTrackerState saved;
  a.SaveState(&saved);
  ASSERT_EQ(saved.slots_size(), 6);
  EXPECT_EQ(saved.min_clock(), 4);
  EXPECT_EQ(saved.settled_clock(), 4);
  ClockTracker b(3, 1);
  ASSERT_TRUE(b.RestoreState(saved).ok());
  ClockTrackerState again;
  b.SaveState(&again);
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(saved, again)) << again.DebugString();
  EXPECT_EQ(b.num_workers(), 6);
  EXPECT_FALSE(b.Counts(0));
  EXPECT_FALSE(b.Counts(3));
  EXPECT_TRUE(b.Parked(2));
  EXPECT_EQ(b.clock(0), 6);
  // The same operations give the same results on both.
  for (ClockTracker* t : {&a, &b}) {
    EXPECT_EQ(t->StartClock(0), 4);
    EXPECT_FALSE(t->PullReady(6));
    EXPECT_FALSE(t->Advance(1, 7));  // rank 5 holds both minima at 4
    EXPECT_EQ(t->min_clock(), 4);
    EXPECT_TRUE(t->Advance(5, 8));
    EXPECT_EQ(t->min_clock(), 7);
    EXPECT_EQ(t->settled_clock(), 5);
    EXPECT_TRUE(t->Park(2, false));
    EXPECT_EQ(t->min_clock(), 5);
    EXPECT_TRUE(t->PullReady(6));
    EXPECT_FALSE(t->PullReady(7));
  }
  ClockTrackerState sa, sb;
  a.SaveState(&sa);
  b.SaveState(&sb);
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(sa, sb));
}

// Each kind of malformed state is refused naming its field.
TEST(ClockTrackerTest, AMalformedStateIsRefusedNamingTheField) {
  ClockTracker a(2, 2);
  a.Advance(0, 3);
  ClockTrackerState good;
  a.SaveState(&good);
  auto refused = [](const ClockTrackerState& s) {
    ClockTracker fresh(2, 2);
    const Status st = fresh.RestoreState(s);
    EXPECT_EQ(st.code(), Status::Code::kDataLoss);
    return st.message();
  };
  ClockTrackerState s = good;
  s.mutable_slots()->RemoveLast();
  EXPECT_EQ(refused(s), "shard state: clocks.slots: 1 slots, this job's shard holds 2 to 65536");
  s = good;
  for (int i = 0; i < ClockTracker::kMaxSlots; ++i) s.add_slots();
  EXPECT_EQ(refused(s), "shard state: clocks.slots: 65538 slots, this job's shard holds 2 to 65536");
  s = good;
  s.set_staleness(0);
  EXPECT_EQ(refused(s), "shard state: clocks.staleness: 0, this shard's is 2 (another job's configuration)");
  s = good;
  s.mutable_slots(1)->set_clock(-4);
  EXPECT_EQ(refused(s), "shard state: clocks.slots[1].clock: -4 (clocks are ≥ 0)");
  s = good;
  s.mutable_slots(1)->set_counts(false);
  s.mutable_slots(1)->set_parked(true);
  EXPECT_EQ(refused(s), "shard state: clocks.slots[1].parked: a slot that does not count cannot be parked");
  s = good;
  s.set_min_clock(3);
  EXPECT_EQ(refused(s), "shard state: clocks.min_clock: 3 and settled_clock 0, the slots give 0 and 0");
}

}  // namespace
}  // namespace tether
