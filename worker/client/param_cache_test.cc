#include "worker/client/param_cache.h"

#include <gtest/gtest.h>

#include <tuple>
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

// train.pipeline: the next minibatch's rows are read ahead while the current
// one's pushes go out. The read ahead's versions (ReadRows / NoteReadVersion
// with `ahead`) stay apart, so those pushes keep the current read's; a
// plain read of the table in between does not touch them; UseReadAhead
// makes them the current read's and forgets them; StartReadAhead starts
// them over.
TEST(ParamCacheTest, ReadAheadVersionsTagPushesOnlyOnceUsed) {
  ParamCache c = MakeCache(8, true, 2);
  std::vector<uint64_t> shard0, shard1;
  for (uint64_t k = 0; shard0.empty() || shard1.empty(); ++k) (ShardForKey(k, 2) == 0 ? shard0 : shard1).push_back(k);
  const float v[2] = {0, 0};
  c.InsertRows(kRows, &shard1[0], 1, v, 0, /*version=*/2);

  c.StartRead(kRows);  // the current read: versions 5 and 6
  c.NoteReadVersion(kRows, 0, 5);
  c.NoteReadVersion(kRows, 1, 6);
  c.StartReadAhead(kRows);
  c.NoteReadVersion(kRows, 0, 9, /*ahead=*/true);
  c.NoteReadVersion(kRows, 0, 3, /*ahead=*/true);
  c.NoteReadVersion(kRows, 0, 4, /*ahead=*/true);
  std::vector<float> out(2, -1.0f);
  std::vector<uint64_t> miss;
  std::vector<uint32_t> pos;
  EXPECT_EQ(c.ReadRows(kRows, &shard1[0], 1, 0, out.data(), &miss, &pos, /*ahead=*/true), 1u);  // version 2
  EXPECT_TRUE(miss.empty());
  EXPECT_EQ(c.PushVersion(kRows, 0), 5u) << "the read ahead must not tag the current minibatch's pushes";
  EXPECT_EQ(c.PushVersion(kRows, 1), 6u);
  c.NoteReadVersion(kRows, 1, 1);  // a plain pull reply still lowers the current read
  EXPECT_EQ(c.PushVersion(kRows, 1), 1u);

  c.UseReadAhead(kRows);
  EXPECT_EQ(c.PushVersion(kRows, 0), 3u);
  EXPECT_EQ(c.PushVersion(kRows, 1), 2u);
  c.UseReadAhead(kRows);  // nothing read ahead since: as a read of nothing
  EXPECT_EQ(c.PushVersion(kRows, 0), 0u);
  EXPECT_EQ(c.PushVersion(kRows, 1), 0u);

  c.StartRead(kRows);
  c.NoteReadVersion(kRows, 0, 7);
  c.NoteReadVersion(kRows, 0, 1, /*ahead=*/true);
  c.StartReadAhead(kRows);  // forgets version 1
  c.NoteReadVersion(kRows, 0, 8, /*ahead=*/true);
  c.StartRead(kRows);  // a plain read of the table keeps the read ahead
  c.NoteReadVersion(kRows, 0, 10);
  EXPECT_EQ(c.PushVersion(kRows, 0), 10u);
  c.UseReadAhead(kRows);
  EXPECT_EQ(c.PushVersion(kRows, 0), 8u);
  EXPECT_EQ(c.PushVersion(kRows, 1), 0u);
  // Clear forgets both.
  c.StartReadAhead(kRows);
  c.NoteReadVersion(kRows, 0, 11, /*ahead=*/true);
  c.Clear();
  c.UseReadAhead(kRows);
  EXPECT_EQ(c.PushVersion(kRows, 0), 0u);
}

// ---- capacity (LRU)

// Charged bytes of a row of dim 2 and of a dense slice of n floats.
constexpr uint64_t kRowBytes = 2 * sizeof(float) + ParamCache::kEntryOverheadBytes;
uint64_t SliceBytes(uint64_t n) { return n * sizeof(float) + ParamCache::kEntryOverheadBytes; }

ParamCache MakeBoundedCache(uint64_t capacity, bool refresh_on_push = true, int shards = 1) {
  ParamCache::TableOptions rows;
  rows.dim = 2;
  rows.staleness = 4;
  rows.refresh_on_push = refresh_on_push;
  ParamCache::TableOptions dense = rows;
  dense.dense = true;
  dense.size = 10;
  return ParamCache({rows, dense}, shards, capacity);
}

void InsertKeys(ParamCache& c, const std::vector<uint64_t>& keys, float value = 1.0f) {
  std::vector<float> v(keys.size() * 2, value);
  c.InsertRows(kRows, keys.data(), keys.size(), v.data(), 0, 1);
}

TEST(ParamCacheCapacityTest, EvictsLeastRecentlyUsedRowsWithExactCounts) {
  // Room for exactly 3 rows.
  ParamCache c = MakeBoundedCache(3 * kRowBytes + kRowBytes / 2);
  InsertKeys(c, {1, 2, 3});
  EXPECT_EQ(c.bytes(), 3 * kRowBytes);
  EXPECT_EQ(c.stats().evictions, 0u);
  // A read of key 1 makes key 2 the least recently used.
  EXPECT_EQ(Read(c, {1}, 0).first, 1u);
  InsertKeys(c, {4});
  EXPECT_EQ(c.stats().evictions, 1u);
  EXPECT_EQ(c.stats().evicted_bytes, kRowBytes);
  EXPECT_EQ(c.num_rows(kRows), 3u);
  auto [hits, miss] = Read(c, {1, 2, 3, 4}, 0);
  EXPECT_EQ(hits, 3u);
  EXPECT_EQ(miss, (std::vector<uint64_t>{2}));
  // That read touched 1, 3, 4 in key order: 5 and 6 evict 1 then 3.
  InsertKeys(c, {5, 6});
  EXPECT_EQ(c.stats().evictions, 3u);
  EXPECT_EQ(c.stats().evicted_bytes, 3 * kRowBytes);
  std::tie(hits, miss) = Read(c, {1, 3, 4, 5, 6}, 0);
  EXPECT_EQ(hits, 3u);
  EXPECT_EQ(miss, (std::vector<uint64_t>{1, 3}));
  EXPECT_EQ(c.bytes(), 3 * kRowBytes);
  EXPECT_EQ(c.stats().peak_bytes, 3 * kRowBytes);
  EXPECT_LE(c.stats().peak_bytes, c.capacity_bytes());
}

TEST(ParamCacheCapacityTest, RefreshingAKeptRowCostsNoRoomAndTouchesIt) {
  ParamCache c = MakeBoundedCache(2 * kRowBytes);
  InsertKeys(c, {1, 2});
  InsertKeys(c, {1}, 7.0f);  // a newer copy of 1: same bytes, now the most recent
  EXPECT_EQ(c.stats().evictions, 0u);
  EXPECT_EQ(c.bytes(), 2 * kRowBytes);
  InsertKeys(c, {3});  // evicts 2, the least recently used
  EXPECT_EQ(c.stats().evictions, 1u);
  std::vector<float> out;
  auto [hits, miss] = Read(c, {1, 2, 3}, 0, &out);
  EXPECT_EQ(hits, 2u);
  EXPECT_EQ(miss, (std::vector<uint64_t>{2}));
  EXPECT_EQ(out, (std::vector<float>{7, 7, -1, -1, 1, 1}));
}

TEST(ParamCacheCapacityTest, OneInsertLargerThanTheCapacityKeepsItsLastRows) {
  // 5 rows into room for 2: the first 3 are evicted as the last 2 come in
  // (the caller copied them already), and bytes never pass the capacity.
  ParamCache c = MakeBoundedCache(2 * kRowBytes);
  InsertKeys(c, {10, 11, 12, 13, 14});
  EXPECT_EQ(c.stats().evictions, 3u);
  EXPECT_EQ(c.stats().peak_bytes, 2 * kRowBytes);
  auto [hits, miss] = Read(c, {10, 11, 12, 13, 14}, 0);
  EXPECT_EQ(hits, 2u);
  EXPECT_EQ(miss, (std::vector<uint64_t>{10, 11, 12}));
}

TEST(ParamCacheCapacityTest, AnEntryLargerThanTheCapacityIsNotKept) {
  ParamCache c = MakeBoundedCache(kRowBytes + 8);
  InsertKeys(c, {1});
  std::vector<float> slice(10, 2.0f);
  EXPECT_TRUE(c.InsertDense(kDense, 0, slice.data(), 10, 0, 1)) << "a right-sized slice is accepted";
  EXPECT_EQ(c.stats().not_kept, 1u);
  EXPECT_EQ(c.stats().evictions, 0u) << "nothing is evicted for what can never fit";
  std::vector<float> out(10);
  EXPECT_FALSE(c.ReadDense(kDense, 0, 0, out.data()));
  EXPECT_EQ(Read(c, {1}, 0).first, 1u);
  EXPECT_EQ(c.bytes(), kRowBytes);
}

TEST(ParamCacheCapacityTest, RowsAndDenseSlicesShareOneLru) {
  // Shards 2: dense slices of 5 floats each.
  const uint64_t slice_bytes = SliceBytes(5);
  ParamCache c = MakeBoundedCache(slice_bytes + 2 * kRowBytes, true, 2);
  std::vector<float> slice(5, 3.0f);
  ASSERT_TRUE(c.InsertDense(kDense, 0, slice.data(), 5, 0, 1));
  InsertKeys(c, {1, 2});
  EXPECT_EQ(c.bytes(), slice_bytes + 2 * kRowBytes);
  InsertKeys(c, {3});  // the slice is the least recently used
  EXPECT_EQ(c.stats().evictions, 1u);
  EXPECT_EQ(c.stats().evicted_bytes, slice_bytes);
  std::vector<float> out(5);
  EXPECT_FALSE(c.ReadDense(kDense, 0, 0, out.data()));
  EXPECT_EQ(c.bytes(), 3 * kRowBytes);
  // The slice again: row 1 (the least recent) makes room for it.
  ASSERT_TRUE(c.InsertDense(kDense, 0, slice.data(), 5, 0, 1));
  EXPECT_EQ(c.stats().evictions, 2u);
  EXPECT_TRUE(c.ReadDense(kDense, 0, 0, out.data()));
  EXPECT_EQ(out, slice);
  EXPECT_EQ(c.bytes(), slice_bytes + 2 * kRowBytes);
  EXPECT_EQ(Read(c, {1, 2, 3}, 0).first, 2u);
  EXPECT_LE(c.stats().peak_bytes, c.capacity_bytes());
}

TEST(ParamCacheCapacityTest, EvictingARowWithAPushInFlightKeepsItsPendingCount) {
  ParamCache c = MakeBoundedCache(2 * kRowBytes, /*refresh_on_push=*/true);
  InsertKeys(c, {1, 2});
  const uint64_t one = 1;
  ASSERT_TRUE(c.StartPushRows(kRows, &one, 1));
  EXPECT_EQ(c.bytes(), 2 * kRowBytes) << "kept until room is needed";
  // Row 1 is the least recently used: its values go, its pending count stays.
  InsertKeys(c, {3});
  EXPECT_EQ(c.stats().evictions, 1u);
  EXPECT_EQ(c.num_rows(kRows), 3u) << "rows 2, 3 and row 1's pending entry";
  EXPECT_EQ(c.bytes(), 2 * kRowBytes) << "the pending entry is not charged";
  EXPECT_EQ(Read(c, {1}, 0).first, 0u);
  // A pull reply for row 1 sent before the push: kept (evicting row 2) but
  // not fresh while the push is in flight.
  InsertKeys(c, {1}, 9.0f);
  EXPECT_EQ(c.stats().evictions, 2u);
  EXPECT_EQ(Read(c, {1}, 0).first, 0u);
  // The push's reply: read-my-writes from memory.
  c.FinishPushRows(kRows, &one, 1);
  EXPECT_EQ(c.pushes_in_flight(kRows), 0);
  InsertKeys(c, {1}, 5.0f);
  std::vector<float> out;
  EXPECT_EQ(Read(c, {1}, 0, &out).first, 1u);
  EXPECT_EQ(out, (std::vector<float>{5, 5}));
  EXPECT_EQ(c.stats().evictions, 2u);
  EXPECT_EQ(c.bytes(), 2 * kRowBytes);
  // Evicted while pending and answered without values (a failed push): the
  // entry goes with the push.
  ASSERT_TRUE(c.StartPushRows(kRows, &one, 1));
  InsertKeys(c, {7, 8});
  EXPECT_EQ(c.stats().evictions, 4u);
  c.FinishPushRows(kRows, &one, 1);
  EXPECT_EQ(c.num_rows(kRows), 2u);
  EXPECT_EQ(Read(c, {1, 7, 8}, 0).first, 2u);
}

TEST(ParamCacheCapacityTest, PushWithoutRefreshFreesItsBytes) {
  ParamCache c = MakeBoundedCache(3 * kRowBytes, /*refresh_on_push=*/false);
  InsertKeys(c, {1, 2, 3});
  const std::vector<uint64_t> pushed = {1, 3};
  EXPECT_FALSE(c.StartPushRows(kRows, pushed.data(), 2));
  EXPECT_EQ(c.bytes(), kRowBytes);
  InsertKeys(c, {4, 5});
  EXPECT_EQ(c.stats().evictions, 0u) << "the room the push freed was enough";
  c.Clear();
  EXPECT_EQ(c.bytes(), 0u);
  EXPECT_EQ(c.stats().peak_bytes, 3 * kRowBytes) << "Clear keeps the counters";
}

TEST(ParamCacheCapacityTest, UnboundedCacheCountsBytesAndNeverEvicts) {
  ParamCache c = MakeBoundedCache(0);
  std::vector<uint64_t> keys(1000);
  for (uint64_t k = 0; k < keys.size(); ++k) keys[k] = k;
  InsertKeys(c, keys);
  EXPECT_EQ(c.bytes(), 1000 * kRowBytes);
  EXPECT_EQ(c.stats().peak_bytes, 1000 * kRowBytes);
  EXPECT_EQ(c.stats().evictions, 0u);
  EXPECT_EQ(c.capacity_bytes(), 0u);
}

}  // namespace
}  // namespace tether
