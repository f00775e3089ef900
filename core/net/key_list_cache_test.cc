#include "core/net/key_list_cache.h"

#include <memory>
#include <numeric>
#include <vector>

#include <gtest/gtest.h>

namespace tether {
namespace {

KeyListCache::List ListOf(size_t n, uint64_t first = 0) {
  auto v = std::make_shared<std::vector<uint64_t>>(n);
  std::iota(v->begin(), v->end(), first);
  return v;
}

TEST(KeyListProbeTest, DependsOnTheCountAndTheSampledKeysOnly) {
  std::vector<uint64_t> keys(1000);
  for (size_t i = 0; i < keys.size(); ++i) keys[i] = 3 * i + 7;
  const uint64_t p = KeyListProbe(keys.data(), keys.size());
  EXPECT_NE(p, 0u);
  EXPECT_EQ(p >> 63, 0u);  // top bit clear: signatures named with it set never meet a probe
  EXPECT_NE(p, KeyListProbe(keys.data(), keys.size() - 1));
  for (size_t m = 0; m < kKeyListProbes; ++m) {  // every sampled position, the first and the last among them
    std::vector<uint64_t> other = keys;
    other[(keys.size() - 1) * m / (kKeyListProbes - 1)] += 1;
    EXPECT_NE(p, KeyListProbe(other.data(), other.size())) << "sample " << m;
  }
  std::vector<uint64_t> between = keys;
  between[1] += 1;  // not sampled
  EXPECT_EQ(p, KeyListProbe(between.data(), between.size()));
  // Short lists: every key counts.
  for (size_t i = 0; i < kKeyListProbes; ++i) {
    std::vector<uint64_t> s(keys.begin(), keys.begin() + kKeyListProbes), t = s;
    t[i] += 1;
    EXPECT_NE(KeyListProbe(s.data(), s.size()), KeyListProbe(t.data(), t.size())) << i;
  }
}

TEST(KeyListSignatureTest, DependsOnEveryKeyAndTheCount) {
  std::vector<uint64_t> keys(1001);
  std::iota(keys.begin(), keys.end(), 7);
  const uint64_t s = KeyListSignature(keys.data(), keys.size());
  EXPECT_NE(s, 0u);
  EXPECT_EQ(s, KeyListSignature(keys.data(), keys.size()));  // deterministic
  EXPECT_NE(s, KeyListSignature(keys.data(), keys.size() - 1));
  for (size_t i : {size_t{0}, size_t{1}, size_t{2}, size_t{3}, size_t{500}, size_t{1000}}) {
    std::vector<uint64_t> other = keys;
    other[i] ^= 1;
    EXPECT_NE(s, KeyListSignature(other.data(), other.size())) << "key " << i;
  }
  // Zero keys: a defined, non-zero value.
  EXPECT_NE(KeyListSignature(nullptr, 0), 0u);
}

TEST(KeyListCacheTest, ExactHitsMissesAndBytes) {
  KeyListCache c(10 * KeyListCache::Charge(100));
  EXPECT_EQ(c.Find(0, 5), nullptr);
  ASSERT_TRUE(c.Put(0, 5, ListOf(100)));
  ASSERT_TRUE(c.Put(1, 5, ListOf(300, 9)));  // same id, other table: another list
  EXPECT_EQ(c.size(), 2u);
  EXPECT_EQ(c.bytes(), KeyListCache::Charge(100) + KeyListCache::Charge(300));
  EXPECT_EQ(c.bytes(), 400u * 8 + 2 * 64);
  KeyListCache::List a = c.Find(0, 5), b = c.Find(1, 5);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(a->size(), 100u);
  EXPECT_EQ(b->size(), 300u);
  EXPECT_EQ((*b)[0], 9u);
  EXPECT_EQ(c.Find(0, 6), nullptr);
  EXPECT_EQ(c.stats().hits, 2u);
  EXPECT_EQ(c.stats().misses, 2u);
  EXPECT_EQ(c.stats().puts, 2u);
  // Replacing a list recharges it.
  ASSERT_TRUE(c.Put(0, 5, ListOf(50)));
  EXPECT_EQ(c.size(), 2u);
  EXPECT_EQ(c.bytes(), KeyListCache::Charge(50) + KeyListCache::Charge(300));
  c.Erase(1, 5);
  EXPECT_EQ(c.bytes(), KeyListCache::Charge(50));
  c.Clear();
  EXPECT_EQ(c.bytes(), 0u);
  EXPECT_EQ(c.size(), 0u);
  EXPECT_EQ(c.stats().peak_bytes, KeyListCache::Charge(100) + KeyListCache::Charge(300));
}

TEST(KeyListCacheTest, EvictsLeastRecentlyUsedWithinCapacity) {
  const uint64_t one = KeyListCache::Charge(100);
  KeyListCache c(3 * one);
  ASSERT_TRUE(c.Put(0, 1, ListOf(100)));
  ASSERT_TRUE(c.Put(0, 2, ListOf(100)));
  ASSERT_TRUE(c.Put(0, 3, ListOf(100)));
  EXPECT_EQ(c.bytes(), 3 * one);
  ASSERT_NE(c.Find(0, 1), nullptr);  // 1 is now the most recent; 2 the least
  ASSERT_TRUE(c.Put(0, 4, ListOf(100)));
  EXPECT_EQ(c.stats().evictions, 1u);
  EXPECT_EQ(c.Find(0, 2), nullptr);
  EXPECT_NE(c.Find(0, 1), nullptr);
  EXPECT_NE(c.Find(0, 3), nullptr);
  EXPECT_NE(c.Find(0, 4), nullptr);
  EXPECT_EQ(c.bytes(), 3 * one);
  // Order now (most recent first): 4, 3, 1. A list of 150 keys (1,264
  // bytes) leaves room for one small one: the two least recent (1, then 3)
  // go.
  ASSERT_TRUE(c.Put(0, 5, ListOf(150)));
  EXPECT_EQ(c.stats().evictions, 3u);
  EXPECT_EQ(c.Peek(0, 1), nullptr);
  EXPECT_EQ(c.Peek(0, 3), nullptr);
  EXPECT_NE(c.Peek(0, 4), nullptr);
  EXPECT_NE(c.Peek(0, 5), nullptr);
  EXPECT_EQ(c.bytes(), one + KeyListCache::Charge(150));
  EXPECT_LE(c.bytes(), c.capacity_bytes());
}

TEST(KeyListCacheTest, ListLargerThanCapacityIsNotKept) {
  KeyListCache c(KeyListCache::Charge(100));
  ASSERT_TRUE(c.Put(0, 1, ListOf(100)));
  EXPECT_FALSE(c.Put(0, 1, ListOf(101)));  // and the old (0, 1) is gone
  EXPECT_EQ(c.Find(0, 1), nullptr);
  EXPECT_EQ(c.bytes(), 0u);
  KeyListCache off(0);
  EXPECT_FALSE(off.Put(0, 1, ListOf(1)));
  EXPECT_EQ(off.size(), 0u);
}

TEST(KeyListCacheTest, EvictedListStaysAliveForItsHolder) {
  KeyListCache c(KeyListCache::Charge(10));
  ASSERT_TRUE(c.Put(0, 1, ListOf(10, 100)));
  KeyListCache::List held = c.Find(0, 1);
  ASSERT_TRUE(c.Put(0, 2, ListOf(10)));  // evicts (0, 1)
  EXPECT_EQ(c.Find(0, 1), nullptr);
  EXPECT_EQ((*held)[9], 109u);
}

TEST(KeyListCacheTest, TwoCachesFedTheSameSequenceHoldTheSameLists) {
  // The worker's mirror and the shard's cache see the same Put/Find
  // sequence and must agree on every membership.
  KeyListCache worker(5000), shard(5000);
  uint64_t x = 1;
  for (int step = 0; step < 2000; ++step) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    const uint32_t table = static_cast<uint32_t>((x >> 20) % 3);
    const uint64_t id = (x >> 40) % 17 + 1;
    const size_t n = (x >> 8) % 300;
    if ((x >> 33) % 2 == 0 || worker.Find(table, id) == nullptr) {
      (void)shard.Find(table, id);
      worker.Put(table, id, ListOf(n));
      shard.Put(table, id, ListOf(n));
    } else {
      ASSERT_NE(shard.Find(table, id), nullptr) << "step " << step;
    }
    ASSERT_EQ(worker.bytes(), shard.bytes());
    ASSERT_EQ(worker.size(), shard.size());
  }
}

}  // namespace
}  // namespace tether
