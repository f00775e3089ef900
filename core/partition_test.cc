#include "core/partition.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>

namespace tether {
namespace {

TEST(PartitionTest, EveryKeyOwnedByExactlyOneShardIncludingTailKeys) {
  std::vector<uint64_t> keys;
  for (uint64_t k = 0; k < 10000; ++k) keys.push_back(k);
  // Tail keys: the top of the 64-bit range.
  for (uint64_t k = 0; k < 100; ++k) keys.push_back(UINT64_MAX - 99 + k);
  for (int shards : {1, 2, 3, 7}) {
    std::vector<std::vector<uint64_t>> per;
    std::vector<std::vector<uint32_t>> pos;
    SplitKeysByShard(keys, shards, &per, &pos);
    std::vector<int> seen(keys.size(), 0);
    size_t total = 0;
    for (int s = 0; s < shards; ++s) {
      total += per[s].size();
      ASSERT_EQ(per[s].size(), pos[s].size());
      for (size_t i = 0; i < per[s].size(); ++i) {
        EXPECT_EQ(keys[pos[s][i]], per[s][i]);
        EXPECT_EQ(ShardForKey(per[s][i], shards), s);
        if (i > 0) {
          EXPECT_LT(per[s][i - 1], per[s][i]) << "per-shard keys stay sorted";
        }
        seen[pos[s][i]]++;
      }
    }
    EXPECT_EQ(total, keys.size());
    for (int c : seen) ASSERT_EQ(c, 1);
    // Balance: 10100 keys over `shards` shards, each within 10% of the mean.
    for (int s = 0; s < shards; ++s)
      EXPECT_NEAR(static_cast<double>(per[s].size()), keys.size() / double(shards), 0.1 * keys.size() / shards);
  }
}

// The split as first written: one modulo and two push_backs per key.
void ReferenceSplit(const std::vector<uint64_t>& keys, int shards, std::vector<std::vector<uint64_t>>* per,
                    std::vector<std::vector<uint32_t>>* pos) {
  per->assign(shards, {});
  pos->assign(shards, {});
  for (size_t i = 0; i < keys.size(); ++i) {
    const auto s = static_cast<size_t>(MixKey(keys[i]) % static_cast<uint64_t>(shards));
    (*per)[s].push_back(keys[i]);
    (*pos)[s].push_back(static_cast<uint32_t>(i));
  }
}

std::vector<uint64_t> RandomSortedKeys(std::mt19937_64* rng, size_t n) {
  std::vector<uint64_t> keys(n);
  for (auto& k : keys) k = (*rng)();
  keys.push_back(0);
  keys.push_back(UINT64_MAX);
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  return keys;
}

TEST(PartitionTest, SplitEqualsReferenceOnRandomKeys) {
  std::mt19937_64 rng(20240611);
  // Sizes below, at and above multiples of 4 (the counting pass's stride),
  // empty, and one large request; S = 65 and 300 take the heap counters and
  // four-byte shard ids.
  for (int shards : {1, 2, 3, 4, 7, 8, 65, 300}) {
    // One set of output vectors reused across calls of growing and
    // shrinking size, as the worker client reuses its own.
    std::vector<std::vector<uint64_t>> per(2, std::vector<uint64_t>(5, 42));
    std::vector<std::vector<uint32_t>> pos(3, std::vector<uint32_t>(9, 7));
    for (size_t n : {0, 1, 3, 4, 5, 1000, 100003, 17, 50000, 0, 9}) {
      const std::vector<uint64_t> keys = RandomSortedKeys(&rng, n);
      std::vector<std::vector<uint64_t>> want_per;
      std::vector<std::vector<uint32_t>> want_pos;
      ReferenceSplit(keys, shards, &want_per, &want_pos);
      SplitKeysByShard(keys, shards, &per, &pos);
      ASSERT_EQ(per, want_per) << "shards=" << shards << " keys=" << keys.size();
      ASSERT_EQ(pos, want_pos) << "shards=" << shards << " keys=" << keys.size();
    }
  }
}

TEST(PartitionTest, SplitAgreesWithShardForKeyOnDenseIds) {
  // The transport benchmark's keys: every third id.
  std::vector<uint64_t> keys;
  for (uint64_t k = 0; k < 30000; ++k) keys.push_back(3 * k);
  for (int shards : {2, 3, 4, 7, 8}) {
    std::vector<std::vector<uint64_t>> per;
    std::vector<std::vector<uint32_t>> pos;
    SplitKeysByShard(keys, shards, &per, &pos);
    for (int s = 0; s < shards; ++s)
      for (uint64_t k : per[s]) ASSERT_EQ(ShardForKey(k, shards), s);
  }
}

TEST(PartitionTest, SameKeySameShardAcrossCalls) {
  EXPECT_EQ(ShardForKey(12345, 4), ShardForKey(12345, 4));
  EXPECT_EQ(ShardForKey(UINT64_MAX, 1), 0);
}

TEST(PartitionTest, DenseRangeCoversEveryIndexOnce) {
  for (uint64_t size : {0ull, 1ull, 5ull, 256ull, 1001ull}) {
    for (int shards : {1, 2, 3, 8}) {
      uint64_t expect_begin = 0;
      for (int s = 0; s < shards; ++s) {
        auto [b, e] = DenseRange(size, s, shards);
        EXPECT_EQ(b, expect_begin);
        EXPECT_LE(e - b, size / shards + 1);
        expect_begin = e;
      }
      EXPECT_EQ(expect_begin, size);
    }
  }
  EXPECT_EQ(DenseRange(256, 1, 2), (std::pair<uint64_t, uint64_t>(128, 256)));
  EXPECT_EQ(DenseRange(5, 2, 3), (std::pair<uint64_t, uint64_t>(3, 5)));
  // Past 2^32 floats the split stays exact.
  EXPECT_EQ(DenseRange(10'000'000'000ull, 1, 2).first, 5'000'000'000ull);
}

}  // namespace
}  // namespace tether
