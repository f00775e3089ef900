#include "server/row_eviction.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace tether {
namespace {

using V = std::vector<uint64_t>;

TEST(RowEvictionTest, LruVictimIsTheRowTouchedLongestAgo) {
  RowEviction e(LRU, 0, 1);
  for (uint64_t r = 0; r < 4; ++r) e.Added(r, /*clock=*/0, /*serial=*/r + 1, true);
  EXPECT_EQ(e.rows(), 4u);
  EXPECT_EQ(e.RecencyOrder(), (V{3, 2, 1, 0}));
  e.Touched(0, 1, 5, true);
  EXPECT_EQ(e.RecencyOrder(), (V{0, 3, 2, 1}));
  EXPECT_EQ(e.Victim(6), 1u);
  EXPECT_EQ(e.pushes(0), 2u);
  EXPECT_EQ(e.last_touch(0), 1);
}

TEST(RowEvictionTest, RemovedMovesTheLastRowIntoThePlace) {
  RowEviction e(LRU, 0, 1);
  for (uint64_t r = 0; r < 4; ++r) e.Added(r, 0, r + 1, true);  // order 3 2 1 0
  e.Touched(1, 2, 9, true);                                     // order 1 3 2 0
  e.Removed(0);  // row 3 becomes row 0
  EXPECT_EQ(e.rows(), 3u);
  EXPECT_EQ(e.RecencyOrder(), (V{1, 0, 2}));
  EXPECT_EQ(e.Victim(10), 2u);
  e.Removed(2);  // the last row itself
  EXPECT_EQ(e.RecencyOrder(), (V{1, 0}));
  e.Removed(1);  // the head, which is the last row
  EXPECT_EQ(e.RecencyOrder(), (V{0}));
  e.Removed(0);
  EXPECT_EQ(e.rows(), 0u);
  EXPECT_EQ(e.Victim(11), RowEviction::kNone);
}

TEST(RowEvictionTest, RowsOfTheCurrentRequestAreNeverChosen) {
  RowEviction e(LRU, 0, 1);
  e.Added(0, 0, 7, true);
  e.Added(1, 0, 7, true);
  EXPECT_EQ(e.Victim(7), RowEviction::kNone);
  EXPECT_EQ(e.Victim(8), 0u);
  RowEviction f(LFU, 0, 1);
  f.Added(0, 0, 7, true);
  f.Added(1, 0, 8, true);
  f.Touched(0, 0, 9, true);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(f.Victim(9), 1u);  // row 0 is the request's
}

TEST(RowEvictionTest, PullsMoveRecencyButCountNoPushes) {
  RowEviction e(LFU, 0, 1);
  e.Added(0, 0, 1, /*push=*/false);
  e.Added(1, 0, 2, /*push=*/true);
  e.Touched(0, 3, 3, /*push=*/false);
  EXPECT_EQ(e.pushes(0), 0u);
  EXPECT_EQ(e.pushes(1), 1u);
  EXPECT_EQ(e.last_touch(0), 3);
  EXPECT_EQ(e.RecencyOrder(), (V{0, 1}));
  // Restored metadata: the order, clocks and counts as given.
  ASSERT_TRUE(e.Restore({1, 0}, {5, 6}, {7, 8}, 99).ok());
  EXPECT_EQ(e.RecencyOrder(), (V{1, 0}));
  EXPECT_EQ(e.last_touch(0), 5);
  EXPECT_EQ(e.pushes(1), 8u);
  EXPECT_EQ(e.sample_state(), 99u);
  EXPECT_EQ(e.Victim(1), 0u);  // no row carries a request's stamp after a restore
  EXPECT_FALSE(e.Restore({1, 1}, {5, 6}, {7, 8}, 99).ok());
  EXPECT_FALSE(e.Restore({0, 1}, {5}, {7, 8}, 99).ok());
  EXPECT_EQ(e.RecencyOrder(), (V{1, 0}));
}

TEST(RowEvictionTest, LfuPrefersTheLeastTouchedOfItsSamples) {
  RowEviction e(LFU, 0, 3);
  e.Added(0, 0, 1, true);
  e.Added(1, 0, 2, true);
  for (int i = 0; i < 5; ++i) e.Touched(0, 1, 10 + i, true);
  // Two rows: row 0 (6 touches) is chosen only when all 8 samples draw it
  // (probability 1/256 a call).
  int ones = 0;
  for (int i = 0; i < 256; ++i) ones += e.Victim(100) == 1u;
  EXPECT_GE(ones, 250);
  // Equal counts: the row touched longest ago.
  RowEviction g(LFU, 0, 3);
  g.Added(0, 4, 1, true);
  g.Added(1, 2, 2, true);
  EXPECT_EQ(g.Victim(3), 1u);
}

TEST(RowEvictionTest, TtlExpiresRowsIdleForTtlClocks) {
  RowEviction e(TTL, 3, 1);
  e.Added(0, 0, 1, true);
  e.Added(1, 1, 2, true);
  e.Added(2, 2, 3, true);
  EXPECT_EQ(e.Expired(2, 4), RowEviction::kNone);
  EXPECT_EQ(e.Expired(3, 4), 0u);  // idle 3 clocks
  e.Removed(0);                    // row 2 takes number 0
  EXPECT_EQ(e.Expired(3, 4), RowEviction::kNone);
  EXPECT_EQ(e.Expired(4, 4), 1u);
  e.Touched(1, 4, 5, true);
  EXPECT_EQ(e.Expired(5, 6), 0u);  // the former row 2, last touched at 2
  // LRU never expires.
  RowEviction lru(LRU, 0, 1);
  lru.Added(0, 0, 1, true);
  EXPECT_EQ(lru.Expired(1000, 2), RowEviction::kNone);
}

}  // namespace
}  // namespace tether
