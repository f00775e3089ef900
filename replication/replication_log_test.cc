#include "replication/replication_log.h"

#include <gtest/gtest.h>

namespace tether {
namespace {

using Receipt = ReplicationLog::Receipt;
using Role = ReplicationLog::Role;

// Three members 0 → 1 → 2: entries flow down, acknowledgements flow up.
TEST(ReplicationLogTest, AnEntryIsCommittedOnceTheTailHasIt) {
  const ChainView v = InitialChain(0, 3, 2);
  ReplicationLog p(0), m(1), t(2);
  for (ReplicationLog* l : {&p, &m, &t}) ASSERT_TRUE(l->Adopt(v));
  EXPECT_EQ(p.role(), Role::kPrimary);
  EXPECT_EQ(m.role(), Role::kReplica);
  EXPECT_EQ(p.Append("a"), 1u);
  EXPECT_EQ(p.Append("b"), 2u);
  EXPECT_EQ(p.commit(), 0u);
  for (const LogEntry& e : p.TakeForward()) EXPECT_EQ(m.Receive(0, v, e), Receipt::kApply);
  EXPECT_TRUE(p.TakeForward().empty());
  const auto to_tail = m.TakeForward();
  ASSERT_EQ(to_tail.size(), 2u);
  EXPECT_EQ(t.Receive(1, v, to_tail[0]), Receipt::kApply);
  EXPECT_EQ(t.Receive(1, v, to_tail[0]), Receipt::kDuplicate);
  EXPECT_EQ(t.AckValue(), 1u);  // the tail acknowledges what it applied
  EXPECT_TRUE(m.OnAck(2, v, t.AckValue()));
  EXPECT_EQ(m.commit(), 1u);
  EXPECT_TRUE(p.OnAck(1, v, m.AckValue()));
  EXPECT_EQ(p.commit(), 1u);
  EXPECT_EQ(p.retained(), 1u);  // entry 2 is not committed yet
  EXPECT_FALSE(p.OnAck(2, v, 2));  // not its successor
  EXPECT_FALSE(m.OnAck(2, Without(v, {}), 2));  // another view
}

// A primary that sends to each replica itself reads what each one lacks;
// what every replica acknowledged is gone.
TEST(ReplicationLogTest, EntriesAfterGivesWhatAReplicaLacks) {
  const ChainView v = InitialChain(0, 3, 2);
  ReplicationLog p(0);
  ASSERT_TRUE(p.Adopt(v));
  for (const char* payload : {"a", "b", "c"}) p.Append(payload);
  (void)p.TakeForward();
  const auto after1 = p.EntriesAfter(1);
  ASSERT_EQ(after1.size(), 2u);
  EXPECT_EQ(after1[0].seq, 2u);
  EXPECT_EQ(after1[1].payload, "c");
  EXPECT_EQ(p.EntriesAfter(0).size(), 3u);
  EXPECT_TRUE(p.EntriesAfter(3).empty());
  EXPECT_TRUE(p.OnAck(1, v, 2));
  EXPECT_EQ(p.commit(), 2u);
  const auto kept = p.EntriesAfter(0);  // entries 1 and 2 were trimmed
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_EQ(kept[0].seq, 3u);
}

TEST(ReplicationLogTest, AGapAndAStaleOrForeignSenderAreRefused) {
  const ChainView v = InitialChain(0, 2, 1);
  ReplicationLog r(1);
  const ChainView v2 = Without(v, {});  // generation 2
  ASSERT_TRUE(r.Adopt(v2));
  EXPECT_EQ(r.Receive(0, v, LogEntry{1, "x"}), Receipt::kStale);
  EXPECT_EQ(r.Receive(0, v2, LogEntry{2, "x"}), Receipt::kGap);
  EXPECT_EQ(r.Receive(3, v2, LogEntry{1, "x"}), Receipt::kNotMine);
  EXPECT_EQ(r.Receive(0, Without(v2, {}), LogEntry{1, "x"}), Receipt::kNotMine);
  ChainView rival = v2;  // the same generation claimed by another primary
  rival.members = {1};
  EXPECT_EQ(r.Receive(0, rival, LogEntry{1, "x"}), Receipt::kNotMine);
  EXPECT_EQ(r.Receive(0, v2, LogEntry{1, "x"}), Receipt::kApply);
  EXPECT_FALSE(r.Adopt(v));  // an older view
}

// The primary goes: the replica claims, keeps what it applied and forwards
// its uncommitted entries to its own successor.
TEST(ReplicationLogTest, TheClaimantForwardsItsUncommittedEntries) {
  const ChainView v = InitialChain(0, 3, 2);
  ReplicationLog p(0), m(1), t(2);
  for (ReplicationLog* l : {&p, &m, &t}) l->Adopt(v);
  p.Append("a");
  p.Append("b");
  for (const LogEntry& e : p.TakeForward()) m.Receive(0, v, e);
  const auto first = m.TakeForward();
  t.Receive(1, v, first[0]);  // the tail got entry 1 only
  m.OnAck(2, v, t.AckValue());
  const ChainView after = Without(v, {0});
  ASSERT_TRUE(m.Adopt(after));
  ASSERT_TRUE(t.Adopt(after));
  EXPECT_EQ(m.role(), Role::kPrimary);
  EXPECT_EQ(m.applied(), 2u);
  EXPECT_EQ(m.commit(), 1u);
  const auto again = m.TakeForward();  // restarts after the commit point
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].seq, 2u);
  EXPECT_EQ(t.Receive(1, after, again[0]), Receipt::kApply);
  EXPECT_TRUE(m.OnAck(2, after, t.AckValue()));
  EXPECT_EQ(m.commit(), 2u);
  EXPECT_EQ(m.retained(), 0u);
  EXPECT_EQ(m.Append("c"), 3u);
}

// A single member commits at once; the tail feeds a learner from a copy of
// its state, and the learner is appended once it caught up.
TEST(ReplicationLogTest, ALearnerFollowsTheTailFromACopyOfItsState) {
  ChainView v = InitialChain(0, 1, 0);
  ReplicationLog p(0), j(4);
  p.Adopt(v);
  p.Append("a");
  p.Append("b");
  EXPECT_EQ(p.commit(), 2u);
  EXPECT_EQ(p.retained(), 0u);
  v = WithLearner(v, 4);
  p.Adopt(v);
  j.Adopt(v);
  EXPECT_EQ(j.role(), Role::kLearner);
  EXPECT_EQ(j.Receive(0, v, LogEntry{3, "c"}), Receipt::kGap);  // no state yet
  EXPECT_EQ(p.successor(), -1);
  p.StartLearnerAt(p.applied());
  j.ResetTo(2);
  EXPECT_EQ(p.successor(), 4);
  p.Append("c");
  EXPECT_EQ(p.commit(), 3u);  // the learner does not count
  for (const LogEntry& e : p.TakeForward()) EXPECT_EQ(j.Receive(0, v, e), Receipt::kApply);
  EXPECT_FALSE(p.LearnerCaughtUp());
  EXPECT_TRUE(p.OnAck(4, v, j.AckValue()));
  EXPECT_TRUE(p.LearnerCaughtUp());
  v = WithLearnerAppended(v);
  p.Adopt(v);
  j.Adopt(v);
  EXPECT_EQ(j.role(), Role::kReplica);
  EXPECT_EQ(j.commit(), 3u);
  p.Append("d");
  EXPECT_EQ(p.commit(), 3u);  // now the new tail must have it
  for (const LogEntry& e : p.TakeForward()) EXPECT_EQ(j.Receive(0, v, e), Receipt::kApply);
  p.OnAck(4, v, j.AckValue());
  EXPECT_EQ(p.commit(), 4u);
}

TEST(ReplicationLogTest, AMemberLeftOutDropsItsEntries) {
  const ChainView v = InitialChain(0, 2, 1);
  ReplicationLog p(0);
  p.Adopt(v);
  p.Append("a");
  ASSERT_TRUE(p.Adopt(Without(v, {0})));
  EXPECT_EQ(p.role(), Role::kOut);
  EXPECT_EQ(p.retained(), 0u);
  EXPECT_EQ(p.successor(), -1);
}

}  // namespace
}  // namespace tether
