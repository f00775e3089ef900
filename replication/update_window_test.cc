#include <string>

#include <gtest/gtest.h>

#include "replication/commit_waiters.h"
#include "replication/update_dedup.h"
#include "replication/update_window.h"

namespace tether {
namespace {

TEST(UpdateWindowTest, KeepsUpdatesUntilAcknowledgedCumulatively) {
  UpdateWindow<std::string> w;
  EXPECT_EQ(w.Add("a"), 1u);
  EXPECT_EQ(w.Add("b"), 2u);
  EXPECT_EQ(w.Add("c"), 3u);
  EXPECT_EQ(w.Ack(2), 2u);
  ASSERT_EQ(w.unacked().size(), 1u);
  EXPECT_EQ(w.unacked().front().first, 3u);
  EXPECT_EQ(w.unacked().front().second, "c");
  EXPECT_EQ(w.Ack(1), 0u);  // an older acknowledgement
  EXPECT_EQ(w.acked(), 2u);
  EXPECT_EQ(w.Ack(3), 1u);
  EXPECT_TRUE(w.empty());
  EXPECT_EQ(w.next(), 4u);
}

TEST(UpdateDedupTest, AppliesEachNumberOnceInOrder) {
  UpdateDedup d;
  EXPECT_EQ(d.Check(2, 1), UpdateDedup::Verdict::kNew);
  EXPECT_EQ(d.Check(2, 2), UpdateDedup::Verdict::kGap);
  d.Applied(2, 1, 10);
  d.Applied(2, 2, 12);
  EXPECT_EQ(d.Check(2, 1), UpdateDedup::Verdict::kDuplicate);
  EXPECT_EQ(d.Check(2, 2), UpdateDedup::Verdict::kDuplicate);
  EXPECT_EQ(d.Check(2, 3), UpdateDedup::Verdict::kNew);
  EXPECT_EQ(d.last(2), 2u);
  EXPECT_EQ(d.last_log_seq(2), 12u);
  EXPECT_EQ(d.last(0), 0u);
  d.Restart(2);
  EXPECT_EQ(d.Check(2, 1), UpdateDedup::Verdict::kNew);
  EXPECT_EQ(d.last_log_seq(2), 0u);
}

TEST(CommitWaitersTest, ReleasesInLogOrderOnceCommitted) {
  CommitWaiters w;
  w.Hold(3, 100);
  w.Hold(3, 101);
  w.Hold(7, 102);
  EXPECT_TRUE(w.Release(2).empty());
  EXPECT_EQ(w.Release(5), (std::vector<uint64_t>{100, 101}));
  EXPECT_EQ(w.size(), 1u);
  w.Hold(9, 103);
  EXPECT_EQ(w.DropAll(), (std::vector<uint64_t>{102, 103}));
  EXPECT_EQ(w.size(), 0u);
}

}  // namespace
}  // namespace tether
