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
  // A new process in its place starts a fresh record that keeps the rows.
  EXPECT_EQ(ranks.Joined(0), 1234u);
  EXPECT_FALSE(ranks.record(0).finished);
  EXPECT_EQ(ranks.record(0).samples, 1234u);
}

TEST(RankLedgerTest, RowsOfProcessesThatLeftOrWereReplacedStayInTheTotal) {
  RankLedger ranks(3);
  EXPECT_EQ(ranks.Joined(0), 0u);
  EXPECT_EQ(ranks.Joined(1), 0u);
  EXPECT_EQ(ranks.Joined(2), 0u);
  ranks.Clocked(0, 64);
  ranks.Clocked(1, 64);
  ranks.Clocked(2, 64);
  ranks.Clocked(1, 128);
  ranks.Clocked(1, 64);  // a late CLOCK never lowers the count
  EXPECT_EQ(ranks.TotalSamples(), 256u);
  // Rank 1 dies at 128 rows and a new process takes its place: it inherits
  // them and its CLOCKs count on from there.
  ranks.Removed(1);
  EXPECT_EQ(ranks.TotalSamples(), 256u);
  EXPECT_EQ(ranks.Joined(1), 128u);
  ranks.Clocked(1, 192);
  // Rank 2 leaves for good (an elastic leave): its rows stay.
  ranks.Left(2);
  // A joiner beyond the initial ranks counts from its first CLOCK.
  EXPECT_EQ(ranks.Joined(5), 0u);
  ranks.Clocked(5, 32);
  EXPECT_EQ(ranks.TotalSamples(), 64u + 192u + 64u + 32u);
  // The barrier's count is exact and final.
  ranks.Finished(0, 100, CheckpointWorker());
  ranks.Clocked(0, 500);
  EXPECT_EQ(ranks.record(0).samples, 100u);
  EXPECT_EQ(ranks.TotalSamples(), 100u + 192u + 64u + 32u);
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
