// StopControl's decisions with explicit times: when a stop leaves at once,
// when it asks for and waits on a stop checkpoint, the grace, the
// abandoned round, rank 0's timer, and how a wait for a chunk ends.
#include "worker/train/stop_control.h"

#include <gtest/gtest.h>

namespace tether {
namespace {

using Clock = StopControl::Clock;

Clock::time_point At(double seconds) {
  return Clock::time_point() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

StopControl WithCheckpoints(double every_seconds = 0) {
  StopControl::Options o;
  o.checkpointing = true;
  o.every_seconds = every_seconds;
  return StopControl(o);
}

TEST(StopControlTest, WithoutCheckpointsAStopLeavesAtOnceAndAsksForNothing) {
  StopControl s(StopControl::Options{});
  s.StartTraining(At(0));
  EXPECT_FALSE(s.Notice(false, -1, At(1)));
  EXPECT_FALSE(s.LeavesAtOnce());
  bool first = false;
  EXPECT_TRUE(s.Notice(true, -1, At(2), &first));
  EXPECT_TRUE(first);
  EXPECT_TRUE(s.LeavesAtOnce());
  EXPECT_FALSE(s.WantCheckpoint(At(2), true));
  EXPECT_FALSE(s.CheckpointDue(10, 10, 10));
  // A wait gives up at once: nothing to checkpoint.
  EXPECT_TRUE(s.WaitGivesUp(true, At(2)));
  EXPECT_TRUE(s.WaitForChunkEnds(At(2)));
  EXPECT_EQ(s.chunk_wait_exit(), StopControl::ChunkWaitExit::kNoCheckpoints);
  EXPECT_EQ(s.stopped_by_shard(), -1);
}

TEST(StopControlTest, NoticedOnceAndTheStoppingShardIsKept) {
  StopControl s = WithCheckpoints();
  s.StartTraining(At(0));
  bool first = false;
  EXPECT_TRUE(s.Notice(false, 2, At(1), &first));
  EXPECT_TRUE(first);
  EXPECT_EQ(s.stopped_by_shard(), 2);
  EXPECT_TRUE(s.Notice(true, -1, At(2), &first));
  EXPECT_FALSE(first);                 // already pending
  EXPECT_EQ(s.stopped_by_shard(), 2);  // the first reason stays
  EXPECT_FALSE(s.LeavesAtOnce());      // checkpoints on: not at once
}

TEST(StopControlTest, AStopAsksForOneCheckpointClockAndLeavesAfterIt) {
  StopControl s = WithCheckpoints();
  s.StartTraining(At(0));
  EXPECT_FALSE(s.WantCheckpoint(At(1), true));
  ASSERT_TRUE(s.Notice(true, -1, At(1)));
  EXPECT_TRUE(s.WantCheckpoint(At(1), false));  // asked, not taken: still wanted
  EXPECT_TRUE(s.WantCheckpoint(At(1), true));   // this CLOCK carries it
  EXPECT_FALSE(s.WantCheckpoint(At(1), true));  // once per request
  // A checkpoint of another kind (every_clocks) is also the stop's.
  EXPECT_TRUE(s.CheckpointDue(20, 10, -1));
  EXPECT_FALSE(s.CheckpointDue(21, 10, -1));
  EXPECT_TRUE(s.CheckpointDue(23, 0, 23));
  EXPECT_TRUE(s.CheckpointDone(23, /*abandoned=*/false, At(2)));
  EXPECT_EQ(s.stop_clock(), 23);
  EXPECT_FALSE(s.WantCheckpoint(At(3), true));  // checkpointed: no other request
  EXPECT_TRUE(s.WaitForChunkEnds(At(3)));
  EXPECT_EQ(s.chunk_wait_exit(), StopControl::ChunkWaitExit::kAfterCheckpoint);
}

TEST(StopControlTest, AnAbandonedRoundIsAskedForAgain) {
  StopControl s = WithCheckpoints();
  s.StartTraining(At(0));
  ASSERT_TRUE(s.Notice(true, -1, At(1)));
  EXPECT_TRUE(s.WantCheckpoint(At(1), true));
  EXPECT_FALSE(s.CheckpointDone(8, /*abandoned=*/true, At(2)));  // not the stop's: train on
  EXPECT_EQ(s.stop_clock(), -1);
  EXPECT_TRUE(s.WantCheckpoint(At(2), true));  // the next CLOCK asks again
  EXPECT_TRUE(s.CheckpointDone(9, false, At(3)));
  EXPECT_EQ(s.stop_clock(), 9);
}

TEST(StopControlTest, ACheckpointWithoutAStopDoesNotLeave) {
  StopControl s = WithCheckpoints();
  s.StartTraining(At(0));
  EXPECT_FALSE(s.CheckpointDone(10, false, At(1)));
  EXPECT_EQ(s.stop_clock(), -1);
  EXPECT_FALSE(s.WaitForChunkEnds(At(1)));  // no stop pending
}

TEST(StopControlTest, WaitsGiveUpAtOnceBeforeTrainingAndAfterTheGraceOnceTraining) {
  StopControl s = WithCheckpoints();
  EXPECT_FALSE(s.WaitGivesUp(false, At(0)));
  EXPECT_TRUE(s.WaitGivesUp(true, At(0)));  // HELLO, resume, set-up: nothing to checkpoint
  s.StartTraining(At(10));
  EXPECT_FALSE(s.WaitGivesUp(true, At(11)));  // the grace starts here
  EXPECT_FALSE(s.WaitGivesUp(true, At(11 + kStopCheckpointGraceS)));
  EXPECT_TRUE(s.WaitGivesUp(true, At(11.5 + kStopCheckpointGraceS)));
  // The grace began with the wait, not with the later Notice.
  ASSERT_TRUE(s.Notice(true, -1, At(30)));
  EXPECT_TRUE(s.WaitForChunkEnds(At(11.5 + kStopCheckpointGraceS)));
  EXPECT_EQ(s.chunk_wait_exit(), StopControl::ChunkWaitExit::kGraceOver);
}

TEST(StopControlTest, TheGraceOfAChunkWaitStartsWhenTheStopIsNoticed) {
  StopControl s = WithCheckpoints();
  s.StartTraining(At(0));
  ASSERT_TRUE(s.Notice(false, 0, At(5)));
  EXPECT_FALSE(s.WaitForChunkEnds(At(5 + kStopCheckpointGraceS)));
  EXPECT_TRUE(s.WaitForChunkEnds(At(5.1 + kStopCheckpointGraceS)));
}

TEST(StopControlTest, RankZerosTimerAsksEveryEverySecondsFromTheLastCheckpoint) {
  StopControl s = WithCheckpoints(/*every_seconds=*/30);
  s.StartTraining(At(100));
  EXPECT_FALSE(s.WantCheckpoint(At(129), true));
  EXPECT_TRUE(s.WantCheckpoint(At(130), true));
  EXPECT_FALSE(s.WantCheckpoint(At(140), true));  // asked already
  EXPECT_FALSE(s.CheckpointDone(12, false, At(150)));
  EXPECT_FALSE(s.WantCheckpoint(At(179), true));  // counted from the checkpoint
  EXPECT_TRUE(s.WantCheckpoint(At(180), true));
  // An abandoned round keeps the old start: asked again at once.
  EXPECT_FALSE(s.CheckpointDone(14, true, At(181)));
  EXPECT_TRUE(s.WantCheckpoint(At(182), false));
}

}  // namespace
}  // namespace tether
