#include "worker/param_cache.h"

#include <gtest/gtest.h>

#include <vector>

#include "core/partition.h"

namespace tether {
namespace {

constexpr uint32_t kRows = 0, kDense = 1;

// Table 0: rows of dim 2; table 1: a dense table of 10 floats; both under
// bound `s`, split over `shards`.
ParamCache MakeCache(int64_t s, bool refresh_on_push, int shards = 2, bool cache = true) {
  ParamCache::TableOptions rows;
  rows.dim = 2;
  rows.staleness = s;
  rows.cache = cache;
  rows.refresh_on_push = refresh_on_push;
  ParamCache::TableOptions dense = rows;
  dense.dense = true;
  dense.size = 10;
  return ParamCache({rows, dense}, shards);
}

// Reads `keys` at `clock`; returns the hits and the missed keys.
std::pair<size_t, std::vector<uint64_t>> Read(ParamCache& c, const std::vector<uint64_t>& keys, int64_t clock,
                                              std::vector<float>* out = nullptr) {
  std::vector<float> local(keys.size() * 2, -1.0f);
  if (out == nullptr) out = &local;
  out->assign(keys.size() * 2, -1.0f);
  std::vector<uint64_t> miss;
  std::vector<uint32_t> pos;
  c.StartRead(kRows);
  const size_t hits = c.ReadRows(kRows, keys.data(), keys.size(), clock, out->data(), &miss, &pos);
  EXPECT_EQ(miss.size(), pos.size());
  for (size_t i = 0; i < miss.size(); ++i) EXPECT_EQ(keys[pos[i]], miss[i]);
  return {hits, miss};
}

TEST(ParamCacheTest, RowIsFreshUpToTheBoundEdgeAndNotOneClockPast) {
  for (int64_t s : {0, 1, 3}) {
    SCOPED_TRACE("s = " + std::to_string(s));
    ParamCache c = MakeCache(s, true);
    const uint64_t key = 5;
    const float v[2] = {1.5f, -2.0f};
    c.InsertRows(kRows, &key, 1, v, /*row_clock=*/4, /*version=*/9);
    std::vector<float> out;
    // Read at clock c serves rows with r ≥ c − s: clocks 4 .. 4 + s.
    for (int64_t clock = 0; clock <= 4 + s; ++clock) {
      auto [hits, miss] = Read(c, {key}, clock, &out);
      EXPECT_EQ(hits, 1u) << "clock " << clock;
      EXPECT_EQ(out, (std::vector<float>{1.5f, -2.0f}));
    }
    auto [hits, miss] = Read(c, {key}, 5 + s, &out);
    EXPECT_EQ(hits, 0u);
    EXPECT_EQ(miss, (std::vector<uint64_t>{key}));
    EXPECT_EQ(out, (std::vector<float>{-1.0f, -1.0f})) << "a miss leaves the caller's row alone";
  }
}

TEST(ParamCacheTest, MixedHitsAndMissesKeepTheirPositions) {
  ParamCache c = MakeCache(2, true);
  const std::vector<uint64_t> kept = {3, 8};
  const float v[4] = {3, 3.5f, 8, 8.5f};
  c.InsertRows(kRows, kept.data(), 2, v, 0, 1);
  std::vector<float> out;
  auto [hits, miss] = Read(c, {1, 3, 4, 8, 9}, 1, &out);
  EXPECT_EQ(hits, 2u);
  EXPECT_EQ(miss, (std::vector<uint64_t>{1, 4, 9}));
  EXPECT_EQ(out, (std::vector<float>{-1, -1, 3, 3.5f, -1, -1, 8, 8.5f, -1, -1}));
}

TEST(ParamCacheTest, AspAndCacheOffKeepNothing) {
  for (auto [s, cache] : std::vector<std::pair<int64_t, bool>>{{-1, true}, {2, false}}) {
    ParamCache c = MakeCache(s, true, 2, cache);
    EXPECT_FALSE(c.enabled(kRows));
    EXPECT_FALSE(c.refresh_on_push(kRows));
    const uint64_t key = 1;
    const float v[2] = {1, 2};
    c.InsertRows(kRows, &key, 1, v, 100, 1);
    EXPECT_EQ(c.num_rows(kRows), 0u);
    EXPECT_EQ(Read(c, {key}, 0).first, 0u);
    EXPECT_FALSE(c.StartPushRows(kRows, &key, 1)) << "no want_values for an uncached table";
    EXPECT_FALSE(c.InsertDense(kDense, 0, v, 5, 100, 1));
  }
}

TEST(ParamCacheTest, PendingPushBlocksReadsUntilItsReplyRefreshesTheRow) {
  ParamCache c = MakeCache(8, /*refresh_on_push=*/true);
  const std::vector<uint64_t> keys = {2, 7};
  const float v[4] = {1, 1, 2, 2};
  c.InsertRows(kRows, keys.data(), 2, v, 0, 1);
  EXPECT_EQ(Read(c, keys, 0).first, 2u);
  // Two pushes of key 2 in flight: it is fetched until both are answered.
  EXPECT_TRUE(c.StartPushRows(kRows, keys.data(), 1));
  EXPECT_TRUE(c.StartPushRows(kRows, keys.data(), 1));
  EXPECT_EQ(c.pushes_in_flight(kRows), 2);
  auto [hits, miss] = Read(c, keys, 0);
  EXPECT_EQ(hits, 1u);
  EXPECT_EQ(miss, (std::vector<uint64_t>{2}));
  const float own[2] = {5, 6};
  c.FinishPushRows(kRows, keys.data(), 1);
  c.InsertRows(kRows, keys.data(), 1, own, 0, 2);
  EXPECT_EQ(Read(c, keys, 0).first, 1u) << "one push still in flight";
  c.FinishPushRows(kRows, keys.data(), 1);
  c.InsertRows(kRows, keys.data(), 1, own, 0, 3);
  EXPECT_EQ(c.pushes_in_flight(kRows), 0);
  std::vector<float> out;
  EXPECT_EQ(Read(c, keys, 0, &out).first, 2u);
  EXPECT_EQ(out, (std::vector<float>{5, 6, 2, 2})) << "the reply's values, with the worker's own update";
}

TEST(ParamCacheTest, PushWithoutRefreshEvictsItsRows) {
  ParamCache c = MakeCache(8, /*refresh_on_push=*/false);
  const std::vector<uint64_t> keys = {2, 7, 11};
  const float v[6] = {1, 1, 2, 2, 3, 3};
  c.InsertRows(kRows, keys.data(), 3, v, 0, 1);
  EXPECT_FALSE(c.StartPushRows(kRows, keys.data() + 1, 2));
  EXPECT_EQ(c.pushes_in_flight(kRows), 0);
  EXPECT_EQ(c.num_rows(kRows), 1u);
  auto [hits, miss] = Read(c, keys, 0);
  EXPECT_EQ(hits, 1u);
  EXPECT_EQ(miss, (std::vector<uint64_t>{7, 11}));
}

TEST(ParamCacheTest, DenseSlicesArePerShardWithTheSameRules) {
  const int shards = 3;
  ParamCache c = MakeCache(1, true, shards);
  std::vector<float> out(10, -1.0f);
  for (int s = 0; s < shards; ++s) EXPECT_FALSE(c.ReadDense(kDense, s, 0, out.data())) << "empty";
  // Each shard's slice of the 10 floats (DenseRange: 3, 3, 4).
  for (int s = 0; s < shards; ++s) {
    auto [b, e] = DenseRange(10, s, shards);
    std::vector<float> slice(e - b, static_cast<float>(s + 1));
    EXPECT_FALSE(c.InsertDense(kDense, s, slice.data(), slice.size() + 1, 0, 1)) << "wrong size is refused";
    EXPECT_TRUE(c.InsertDense(kDense, s, slice.data(), slice.size(), /*row_clock=*/s, 10 + s));
  }
  c.StartRead(kDense);
  for (int s = 0; s < shards; ++s) {
    auto [b, e] = DenseRange(10, s, shards);
    EXPECT_TRUE(c.ReadDense(kDense, s, /*clock=*/1, out.data() + b));
    EXPECT_EQ(c.PushVersion(kDense, s), 10u + s);
  }
  EXPECT_EQ(out, (std::vector<float>{1, 1, 1, 2, 2, 2, 3, 3, 3, 3}));
  // At clock 2 only slices read at r ≥ 1 serve (shards 1 and 2).
  EXPECT_FALSE(c.ReadDense(kDense, 0, 2, out.data()));
  EXPECT_TRUE(c.ReadDense(kDense, 1, 2, out.data() + 3));
  // A refreshing push makes its slice pending; without refresh it evicts.
  EXPECT_TRUE(c.StartPushDense(kDense, 1));
  EXPECT_FALSE(c.ReadDense(kDense, 1, 2, out.data() + 3));
  c.FinishPushDense(kDense, 1);
  EXPECT_TRUE(c.ReadDense(kDense, 1, 2, out.data() + 3));
  ParamCache evicting = MakeCache(1, false, shards);
  const float slice[3] = {4, 4, 4};
  ASSERT_TRUE(evicting.InsertDense(kDense, 0, slice, 3, 0, 1));
  EXPECT_FALSE(evicting.StartPushDense(kDense, 0));
  EXPECT_FALSE(evicting.ReadDense(kDense, 0, 0, out.data()));
}

// τ: a push to a shard carries the oldest version among what the last read
// took from that shard, from memory or from pull replies; a new read starts
// over, and a shard nothing was read from carries 0.
TEST(ParamCacheTest, ReadVersionsAreTheOldestOfTheLastReadPerShard) {
  ParamCache c = MakeCache(8, true, 2);
  // Two keys of shard 0 and one of shard 1.
  std::vector<uint64_t> shard0, shard1;
  for (uint64_t k = 0; shard0.size() < 2 || shard1.empty(); ++k)
    (ShardForKey(k, 2) == 0 ? shard0 : shard1).push_back(k);
  shard0.resize(2);
  shard1.resize(1);
  const float v[2] = {0, 0};
  c.InsertRows(kRows, &shard0[0], 1, v, 0, /*version=*/7);
  c.InsertRows(kRows, &shard0[1], 1, v, 0, /*version=*/4);
  EXPECT_EQ(c.PushVersion(kRows, 0), 0u) << "nothing read yet";
  EXPECT_EQ(Read(c, shard0, 0).first, 2u);
  EXPECT_EQ(c.PushVersion(kRows, 0), 4u);
  EXPECT_EQ(c.PushVersion(kRows, 1), 0u);
  c.NoteReadVersion(kRows, 1, 12);  // a pull reply from shard 1
  c.NoteReadVersion(kRows, 1, 15);
  EXPECT_EQ(c.PushVersion(kRows, 1), 12u);
  c.StartRead(kRows);
  EXPECT_EQ(c.PushVersion(kRows, 0), 0u);
  EXPECT_EQ(c.PushVersion(kRows, 1), 0u);
  // Uncached tables track versions too.
  ParamCache off = MakeCache(-1, true, 2);
  off.StartRead(kRows);
  off.NoteReadVersion(kRows, 0, 3);
  EXPECT_EQ(off.PushVersion(kRows, 0), 3u);
}

}  // namespace
}  // namespace tether
