#include "server/row_eviction.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace tether {
namespace {

using V = std::vector<uint64_t>;

TEST(RowEvictionTest, LruVictimIsTheRowTouchedLongestAgo) {
  RowEviction e(LRU, 0, 1);
  for (uint64_t r = 0; r < 4; ++r) e.Added(r, /*clock=*/0, /*serial=*/r + 1);
  EXPECT_EQ(e.rows(), 4u);
  EXPECT_EQ(e.RecencyOrder(), (V{3, 2, 1, 0}));
  e.Touched(0, 1, 5);
  EXPECT_EQ(e.RecencyOrder(), (V{0, 3, 2, 1}));
  EXPECT_EQ(e.Victim(6), 1u);
  EXPECT_EQ(e.touches(0), 2u);
  EXPECT_EQ(e.last_touch(0), 1);
}

TEST(RowEvictionTest, RemovedMovesTheLastRowIntoThePlace) {
  RowEviction e(LRU, 0, 1);
  for (uint64_t r = 0; r < 4; ++r) e.Added(r, 0, r + 1);  // order 3 2 1 0
  e.Touched(1, 2, 9);                                     // order 1 3 2 0
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
  e.Added(0, 0, 7);
  e.Added(1, 0, 7);
  EXPECT_EQ(e.Victim(7), RowEviction::kNone);
  EXPECT_EQ(e.Victim(8), 0u);
  RowEviction f(LFU, 0, 1);
  f.Added(0, 0, 7);
  f.Added(1, 0, 8);
  f.Touched(0, 0, 9);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(f.Victim(9), 1u);  // row 0 is the request's
}

TEST(RowEvictionTest, LfuPrefersTheLeastTouchedOfItsSamples) {
  RowEviction e(LFU, 0, 3);
  e.Added(0, 0, 1);
  e.Added(1, 0, 2);
  for (int i = 0; i < 5; ++i) e.Touched(0, 1, 10 + i);
  // Two rows: row 0 (6 touches) is chosen only when all 8 samples draw it
  // (probability 1/256 a call).
  int ones = 0;
  for (int i = 0; i < 256; ++i) ones += e.Victim(100) == 1u;
  EXPECT_GE(ones, 250);
  // Equal counts: the row touched longest ago.
  RowEviction g(LFU, 0, 3);
  g.Added(0, 4, 1);
  g.Added(1, 2, 2);
  EXPECT_EQ(g.Victim(3), 1u);
}

TEST(RowEvictionTest, TtlExpiresRowsIdleForTtlClocks) {
  RowEviction e(TTL, 3, 1);
  e.Added(0, 0, 1);
  e.Added(1, 1, 2);
  e.Added(2, 2, 3);
  EXPECT_EQ(e.Expired(2, 4), RowEviction::kNone);
  EXPECT_EQ(e.Expired(3, 4), 0u);  // idle 3 clocks
  e.Removed(0);                    // row 2 takes number 0
  EXPECT_EQ(e.Expired(3, 4), RowEviction::kNone);
  EXPECT_EQ(e.Expired(4, 4), 1u);
  e.Touched(1, 4, 5);
  EXPECT_EQ(e.Expired(5, 6), 0u);  // the former row 2, last touched at 2
  // LRU never expires.
  RowEviction lru(LRU, 0, 1);
  lru.Added(0, 0, 1);
  EXPECT_EQ(lru.Expired(1000, 2), RowEviction::kNone);
}

}  // namespace
}  // namespace tether
