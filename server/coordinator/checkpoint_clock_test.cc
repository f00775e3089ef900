#include "server/coordinator/checkpoint_clock.h"

#include <gtest/gtest.h>

namespace tether {
namespace {

CheckpointFile File(const std::string& name, uint64_t bytes) {
  CheckpointFile f;
  f.set_name(name);
  f.set_bytes(bytes);
  f.set_xxh3(bytes * 31);
  return f;
}

TEST(CheckpointClockTest, PicksTwoPastTheLatestClockAndPastTheLastCheckpoint) {
  CheckpointClock clock;
  EXPECT_EQ(clock.due(), -1);
  EXPECT_TRUE(clock.Want(5));
  EXPECT_EQ(clock.due(), 7);
  // A second request while one is due changes nothing.
  EXPECT_FALSE(clock.Want(9));
  EXPECT_EQ(clock.due(), 7);
  clock.RoundEnded(7, true, "ckpt-7", {});
  EXPECT_EQ(clock.due(), -1);
  EXPECT_EQ(clock.last(), 7);
  // Workers that reported clock 3 only (a resume): past the last checkpoint.
  EXPECT_TRUE(clock.Want(3));
  EXPECT_EQ(clock.due(), 8);
}

TEST(CheckpointClockTest, ARoundBelowTheDueClockKeepsItAndAnAbandonedOneClearsIt) {
  CheckpointClock clock;
  ASSERT_TRUE(clock.Want(10));  // due 12
  clock.RoundEnded(11, false, "ckpt-11", {});  // a failed write still counts as the last
  EXPECT_EQ(clock.due(), 12);
  EXPECT_EQ(clock.last(), 11);
  clock.RoundAbandoned(12);
  EXPECT_EQ(clock.due(), -1);
  EXPECT_EQ(clock.last(), 11);
  clock.Resumed(20);
  EXPECT_EQ(clock.last(), 20);
}

TEST(CheckpointClockTest, EntriesNameEveryMemberRankByKind) {
  RankLedger ranks(3);
  for (int r : {0, 1, 2, 5}) ranks.Joined(r);
  CheckpointClock clock;
  // Round 1 at clock 4: ranks 0, 1 and 2 wrote their state.
  clock.RoundEnded(4, true, "ckpt-4", {{0, File("worker-0.state", 10)}, {1, File("worker-1.state", 11)},
                                       {2, File("worker-2.state", 12)}});
  // Rank 1 left, rank 2 finished, rank 5 (a joiner) never wrote a state.
  ranks.Left(1);
  CheckpointWorker done;
  done.set_final_loss(0.5);
  ranks.Finished(2, 999, done);
  google::protobuf::RepeatedPtrField<CheckpointWorker> entries;
  clock.Entries(ranks, {{0, File("worker-0.state", 20)}}, &entries);
  ASSERT_EQ(entries.size(), 4);  // ranks 0, 1, 2, 5 (3 and 4 were never taken)
  EXPECT_EQ(entries[0].rank(), 0);
  EXPECT_EQ(entries[0].kind(), CheckpointWorker::TRAINING);
  EXPECT_EQ(entries[0].file().bytes(), 20u);
  EXPECT_EQ(entries[1].kind(), CheckpointWorker::LEFT);
  EXPECT_EQ(entries[1].file().bytes(), 11u);
  EXPECT_EQ(entries[1].from_dir(), "ckpt-4");
  EXPECT_EQ(entries[2].kind(), CheckpointWorker::FINISHED);
  EXPECT_EQ(entries[2].samples(), 999u);
  EXPECT_EQ(entries[2].final_loss(), 0.5);
  EXPECT_EQ(entries[3].rank(), 5);
  EXPECT_EQ(entries[3].kind(), CheckpointWorker::GONE);
  // The next round holds the left rank's state too: it is LEFT from there.
  clock.RoundEnded(8, true, "ckpt-8", {{0, File("worker-0.state", 20)}});
  entries.Clear();
  clock.Entries(ranks, {}, &entries);
  EXPECT_EQ(entries[1].from_dir(), "ckpt-8");
}

TEST(CheckpointClockTest, SnapshotRoundTrips) {
  CheckpointClock clock;
  clock.RoundEnded(4, true, "a", {{0, File("worker-0.state", 1)}, {3, File("worker-3.state", 2)}});
  ASSERT_TRUE(clock.Want(6));
  CheckpointClockState state;
  clock.Snapshot(&state);
  CheckpointClock copy;
  ASSERT_TRUE(copy.Restore(state).ok());
  CheckpointClockState again;
  copy.Snapshot(&again);
  EXPECT_EQ(again.SerializeAsString(), state.SerializeAsString());
  EXPECT_EQ(copy.due(), 8);
  EXPECT_EQ(copy.last(), 4);
  state.mutable_last_state(1)->set_rank(0);
  EXPECT_EQ(copy.Restore(state).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(copy.due(), 8);
}

}  // namespace
}  // namespace tether
