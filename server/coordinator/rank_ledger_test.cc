#include "server/coordinator/rank_ledger.h"

#include <gtest/gtest.h>

namespace tether {
namespace {

TEST(RankLedgerTest, InitialRanksAreMembersAndOweEvaluationUntilTheyGo) {
  RankLedger ranks(2);
  EXPECT_EQ(ranks.slots(), 2);
  // An initial rank is a member before its HELLO, and holds evaluation back.
  EXPECT_TRUE(ranks.Member(1));
  EXPECT_FALSE(ranks.Excused(1));
  ranks.Joined(1);
  ranks.Left(1);
  EXPECT_TRUE(ranks.Gone(1));
  EXPECT_TRUE(ranks.Excused(1));
  EXPECT_TRUE(ranks.Member(1));  // it took part: still a member
  ranks.Joined(0);
  ranks.Removed(0);
  EXPECT_TRUE(ranks.Gone(0));
  // A rejoin is a fresh record.
  ranks.Joined(0);
  EXPECT_FALSE(ranks.Gone(0));
  EXPECT_FALSE(ranks.Excused(0));
}

TEST(RankLedgerTest, JoinersAreMembersOnceJoinedAndNeverOweEvaluation) {
  RankLedger ranks(2);
  EXPECT_FALSE(ranks.Member(4));  // a slot never taken
  EXPECT_TRUE(ranks.Excused(4));
  ranks.Joined(4);
  EXPECT_TRUE(ranks.Member(4));
  EXPECT_TRUE(ranks.Excused(4));
  EXPECT_FALSE(ranks.Member(3));
  EXPECT_EQ(ranks.slots(), 5);
}

TEST(RankLedgerTest, FinishedKeepsItsEntryUntilARejoin) {
  RankLedger ranks(1);
  ranks.Joined(0);
  CheckpointWorker entry;
  entry.set_final_loss(0.25);
  entry.set_diverged(true);
  ranks.Finished(0, 1234, entry);
  EXPECT_TRUE(ranks.record(0).finished);
  EXPECT_EQ(ranks.record(0).samples, 1234u);
  EXPECT_EQ(ranks.record(0).finished_entry.final_loss(), 0.25);
  ranks.Left(0);
  EXPECT_TRUE(ranks.record(0).finished);  // a BYE after the barrier keeps it
  ranks.Joined(0);
  EXPECT_FALSE(ranks.record(0).finished);
  EXPECT_EQ(ranks.record(0).samples, 0u);
}

TEST(RankLedgerTest, SnapshotRestoresEveryRecordAndRefusesDuplicates) {
  RankLedger ranks(2);
  ranks.Joined(0);
  ranks.Joined(3);
  CheckpointWorker entry;
  entry.set_final_loss(1.5);
  ranks.Finished(3, 77, entry);
  ranks.Removed(0);
  CoordinatorState state;
  ranks.Snapshot(&state);
  RankLedger copy(2);
  ASSERT_TRUE(copy.Restore(state).ok());
  CoordinatorState again;
  copy.Snapshot(&again);
  EXPECT_EQ(again.SerializeAsString(), state.SerializeAsString());
  EXPECT_EQ(copy.slots(), 4);
  EXPECT_TRUE(copy.Gone(0));
  EXPECT_EQ(copy.record(3).samples, 77u);
  EXPECT_EQ(copy.record(3).finished_entry.final_loss(), 1.5);

  *state.add_ranks() = state.ranks(0);
  RankLedger refused(2);
  refused.Joined(1);
  const Status st = refused.Restore(state);
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(st.message().find("rank 0"), std::string::npos) << st.message();
  EXPECT_TRUE(refused.record(1).joined);  // unchanged
}

}  // namespace
}  // namespace tether
