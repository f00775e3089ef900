#include "optim/shard_budget.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "core/partition.h"

namespace tether {
namespace {

// Two shards: a dense table, a hashed row table that shares the budget, a
// row table with its own max_rows, and an admitting row table that shares it.
std::vector<TableSpec> Tables() {
  std::vector<TableSpec> t(4);
  t[0].set_name("b1");
  t[0].set_kind(TableSpec::DENSE);
  t[0].set_size(10);
  t[0].mutable_optimizer()->set_type(ADAM);  // 2 per weight + the step count
  t[1].set_name("w1");
  t[1].set_dim(8);
  t[1].mutable_optimizer()->set_type(ADAGRAD);  // 1 per weight
  t[2].set_name("h");
  t[2].set_dim(4);
  t[2].mutable_optimizer()->set_type(SGD);
  t[2].mutable_budget()->set_max_rows(100);
  t[2].mutable_budget()->set_evict(LFU);
  t[3].set_name("w2");
  t[3].set_dim(4);
  t[3].mutable_optimizer()->set_type(ADAGRAD);
  t[3].mutable_budget()->set_admit_after(2);
  return t;
}

TEST(ShardBudgetTest, RowBytesCountStateIndexKeyAndEvictionMetadata) {
  std::vector<TableSpec> t = Tables();
  EXPECT_EQ(ShardRowBytes(t[1]), (8u + 8) * 4 + 32);
  t[1].mutable_budget()->set_evict(LRU);
  EXPECT_EQ(ShardRowBytes(t[1]), (8u + 8) * 4 + 32 + 8 + 36);
  EXPECT_EQ(ShardRowBytes(t[2]), 4u * 4 + 32 + 8 + 36);
  EXPECT_EQ(AdmissionSketchBytes(t[3].budget()), 4u * (1 << 20) * 2) << "no max_rows: 2^20 counters a row";
  TableBudget b = t[3].budget();
  b.set_max_rows(1500);  // 4 × 1500 = 6000 → 8192
  EXPECT_EQ(AdmissionSketchBytes(b), 4u * 8192 * 2);
}

TEST(ShardBudgetTest, SplitsTheRestIntoOneRowLimitForTheSharedTables) {
  std::vector<TableSpec> t = Tables();
  // Fixed: b1's largest slice 5 × (1 + 2) + 1 = 16 floats = 64 bytes; h 100
  // rows × (92 − 32) + its index 16 × 211 slots = 9376. Shared, at R rows
  // (both now LRU): w1 R × 108 + 16 × slots, w2 R × 76 + 16 × slots + its
  // sketch 4 × 4096 × 2 = 32768. R = 232 (467 slots): 9440 + 32528 + 57872
  // = 99840 ≤ 100000; R = 233 (479 slots) needs 100408.
  const StatusOr<uint64_t> rows = ApplyServerMemoryBudget(100000, 2, &t);
  ASSERT_TRUE(rows.ok()) << rows.status().message();
  EXPECT_EQ(*rows, 232u);
  EXPECT_EQ(t[1].budget().max_rows(), 232u);
  EXPECT_EQ(t[1].budget().evict(), LRU);
  EXPECT_EQ(t[3].budget().max_rows(), 232u);
  EXPECT_EQ(t[3].budget().evict(), LRU);
  EXPECT_EQ(t[3].budget().admit_after(), 2u) << "admission is kept";
  EXPECT_EQ(t[2].budget().max_rows(), 100u) << "a table's own max_rows wins";
  EXPECT_EQ(t[2].budget().evict(), LFU);
  EXPECT_FALSE(t[0].has_budget());
  EXPECT_EQ(BudgetedTableBytes(t[1], 232), 32528u);
  EXPECT_EQ(BudgetedTableBytes(t[3], 232), 57872u);
  EXPECT_EQ(ReservedIndexSlots(232), 467u);
  EXPECT_EQ(ReservedIndexSlots(1), 61u);
  // Applied again, the limits hold (every row table now has its own max_rows).
  const std::vector<TableSpec> split = t;
  const StatusOr<uint64_t> again = ApplyServerMemoryBudget(100000, 2, &t);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, 0u);
  EXPECT_EQ(t[1].budget().max_rows(), split[1].budget().max_rows());
}

TEST(ShardBudgetTest, ATableThatSetsItsOwnEvictKeepsIt) {
  std::vector<TableSpec> t = Tables();
  t[1].mutable_budget()->set_evict(TTL);
  t[1].mutable_budget()->set_ttl_clocks(5);
  ASSERT_TRUE(ApplyServerMemoryBudget(100000, 2, &t).ok());
  EXPECT_EQ(t[1].budget().evict(), TTL);
  EXPECT_EQ(t[1].budget().max_rows(), 232u);
}

TEST(ShardBudgetTest, BudgetBelowOneRowOfEachTableIsRefusedNamingTheLeast) {
  std::vector<TableSpec> t = Tables();
  const std::vector<TableSpec> before = t;
  // Least: 9440 fixed + one row of w1 (108 + 61 slots × 16 = 1084) and of
  // w2 (76 + 976 + its sketch 32768 = 33820).
  EXPECT_TRUE(ApplyServerMemoryBudget(44344, 2, &t).ok());
  t = before;
  const StatusOr<uint64_t> rows = ApplyServerMemoryBudget(44343, 2, &t);
  ASSERT_FALSE(rows.ok());
  EXPECT_EQ(rows.status().code(), Status::Code::kResourceExhausted);
  EXPECT_EQ(rows.status().message(),
            "cluster.server_memory_bytes (--server_memory) is 43.3 KiB (44343 bytes), but each shard needs at "
            "least 44344 bytes: 9440 for the dense tables and the tables with their own max_rows, plus one row "
            "of each other row table with its index and sketch (w1 1084, w2 33820)");
  EXPECT_FALSE(t[1].has_budget()) << "unchanged on error";
}

TEST(ShardBudgetTest, MostKeysOnAShardCountsTheFullestShard) {
  EXPECT_EQ(MostKeysOnAShard(0, 3), 0u) << "unbounded keys";
  EXPECT_EQ(MostKeysOnAShard(101, 1), 101u);
  std::vector<uint64_t> count(3, 0);
  for (uint64_t k = 0; k < 101; ++k) ++count[ShardForKey(k, 3)];
  EXPECT_EQ(MostKeysOnAShard(101, 3), *std::max_element(count.begin(), count.end()));
  EXPECT_GT(MostKeysOnAShard(101, 3), 34u) << "hashing is not exactly even";
  // Above 2^26 keys, a bound: mean 2^29 + 8 × 2^14.5 (rounded up) + 64.
  EXPECT_EQ(MostKeysOnAShard(uint64_t{1} << 30, 2), (uint64_t{1} << 29) + 8 * 23171 + 64);
}

// A table with a fixed key count takes only the rows of its keys from the
// shared budget, and the other tables share what it leaves.
TEST(ShardBudgetTest, AKeyedTableGetsOnlyItsKeys) {
  std::vector<TableSpec> t = Tables();
  t[1].set_num_keys(101);  // w1: 101 keys over 2 shards
  const uint64_t keys = MostKeysOnAShard(101, 2);
  const StatusOr<uint64_t> rows = ApplyServerMemoryBudget(100000, 2, &t);
  ASSERT_TRUE(rows.ok()) << rows.status().message();
  EXPECT_EQ(t[1].budget().max_rows(), keys);
  EXPECT_EQ(t[1].budget().evict(), EVICT_NONE) << "it holds all its keys: nothing to evict";
  // w2 gets the rest: fixed 9440 + w1 at its keys + w2 at R, the largest R
  // that fits.
  TableSpec w1_counted = t[1];  // counted as if it evicted (monotone in R)
  w1_counted.mutable_budget()->set_evict(LRU);
  const uint64_t w1 = BudgetedTableBytes(w1_counted, keys);
  EXPECT_EQ(*rows, t[3].budget().max_rows());
  EXPECT_LE(9440 + w1 + BudgetedTableBytes(t[3], *rows), 100000u);
  EXPECT_GT(9440 + w1 + BudgetedTableBytes(t[3], *rows + 1), 100000u);
  EXPECT_GT(*rows, 232u) << "more than when w1 took R rows too";
  EXPECT_EQ(t[3].budget().evict(), LRU);
  // A tight budget: the keyed table gets R like the others, and evicts.
  std::vector<TableSpec> tight = Tables();
  tight[1].set_num_keys(100000);
  const StatusOr<uint64_t> r2 = ApplyServerMemoryBudget(100000, 2, &tight);
  ASSERT_TRUE(r2.ok());
  EXPECT_EQ(tight[1].budget().max_rows(), *r2);
  EXPECT_EQ(tight[1].budget().evict(), LRU);
}

TEST(ShardBudgetTest, BlocksOfTwoMiBOrMoreCountInWholeHugePages) {
  EXPECT_EQ(HugePageRoundedBytes(100), 100u);
  EXPECT_EQ(HugePageRoundedBytes((2u << 20) - 1), (2u << 20) - 1) << "not a huge-page block";
  EXPECT_EQ(HugePageRoundedBytes(2u << 20), 2u << 20);
  EXPECT_EQ(HugePageRoundedBytes((2u << 20) + 1), 4u << 20);
  TableSpec w1 = Tables()[1];  // dim 8, AdaGrad: 64 bytes of row data
  w1.mutable_budget()->set_evict(LRU);
  // 40,000 rows: data 2,560,000 bytes → 4 MiB; index 16 × 80,021 slots =
  // 1,280,336 (under 2 MiB: as is); key and eviction metadata 44 a row.
  EXPECT_EQ(ReservedIndexSlots(40000), 80021u);
  EXPECT_EQ(BudgetedTableBytes(w1, 40000), (4u << 20) + 1280336u + 40000u * 44);
}

TEST(ShardBudgetTest, NoBudgetChangesNothing) {
  std::vector<TableSpec> t = Tables();
  const StatusOr<uint64_t> rows = ApplyServerMemoryBudget(0, 2, &t);
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ(*rows, 0u);
  EXPECT_FALSE(t[1].has_budget());
}

}  // namespace
}  // namespace tether
