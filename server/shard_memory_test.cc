#include "server/shard_memory.h"

#include <gtest/gtest.h>

namespace tether {
namespace {

std::vector<TableSpec> Tables() {
  std::vector<TableSpec> t(3);
  t[0].set_name("w1");
  t[0].set_dim(8);
  t[0].set_num_keys(101);
  t[0].mutable_optimizer()->set_type(ADAGRAD);  // 1 state float per weight
  t[1].set_name("b1");
  t[1].set_kind(TableSpec::DENSE);
  t[1].set_size(10);
  t[1].mutable_optimizer()->set_type(ADAM);  // 2 per weight + the step count
  t[2].set_name("h");
  t[2].set_dim(4);
  t[2].set_num_keys(0);  // unbounded keys
  t[2].mutable_optimizer()->set_type(SGD);
  return t;
}

TEST(ShardMemoryTest, TableBytesPerShardWithOptimizerStateAndIndex) {
  const std::vector<TableSpec> t = Tables();
  // ⌈101 / 2⌉ = 51 rows × ((8 + 8) × 4 + 32) bytes.
  EXPECT_EQ(ShardTableBytes(t[0], 0, 2), 51u * 96);
  EXPECT_EQ(ShardTableBytes(t[0], 1, 2), 51u * 96);
  EXPECT_EQ(ShardTableBytes(t[0], 0, 1), 101u * 96);
  // Dense 10 over 3 shards: slices 3, 3, 4; Adam: (n + 2n + 1) × 4.
  EXPECT_EQ(ShardTableBytes(t[1], 0, 3), (3u + 7) * 4);
  EXPECT_EQ(ShardTableBytes(t[1], 2, 3), (4u + 9) * 4);
  EXPECT_EQ(ShardTableBytes(t[2], 0, 2), 0u) << "unbounded keys: not counted";
}

// Delay compensation: each row and dense slice also holds backup_workers
// copies of its weights.
TEST(ShardMemoryTest, DelayCompensationCountsOneCopyPerWorker) {
  std::vector<TableSpec> t = Tables();
  for (TableSpec& s : t) {
    s.mutable_optimizer()->set_delay_compensation(0.5f);
    s.set_backup_workers(3);
  }
  // 51 rows × ((8 + 8 + 3 × 8) × 4 + 32) bytes.
  EXPECT_EQ(ShardTableBytes(t[0], 0, 2), 51u * (40 * 4 + 32));
  EXPECT_EQ(ShardRowBytes(t[0]), 40u * 4 + 32);
  // Dense slice of 4: (4 + 9 + 3 × 4) × 4.
  EXPECT_EQ(ShardTableBytes(t[1], 2, 3), (4u + 9 + 12) * 4);
  // λ = 0: the workers field counts nothing.
  t[0].mutable_optimizer()->set_delay_compensation(0.0f);
  EXPECT_EQ(ShardTableBytes(t[0], 0, 2), 51u * 96);
}

TEST(ShardMemoryTest, ABudgetedTableCountsMaxRowsWithMetadataAndSketch) {
  std::vector<TableSpec> t = Tables();
  // Unbounded keys with max_rows 10: 10 rows of (4 × 4 + 32) bytes.
  t[2].mutable_budget()->set_max_rows(10);
  EXPECT_EQ(ShardRowBound(t[2], 2), 10u);
  EXPECT_EQ(ShardTableBytes(t[2], 0, 2), 10u * 48);
  // Evicting: + 8 (the row's key) + 36 (eviction metadata) a row.
  t[2].mutable_budget()->set_evict(LRU);
  EXPECT_EQ(ShardTableBytes(t[2], 0, 2), 10u * (48 + 8 + 36));
  // Admitting: + the sketch, 4 rows × 4096 16-bit counters.
  t[2].mutable_budget()->set_admit_after(2);
  EXPECT_EQ(ShardTableBytes(t[2], 0, 2), 10u * (48 + 8 + 36) + 4 * 4096 * 2);
  // max_rows above the keys' share: the share.
  t[0].mutable_budget()->set_max_rows(1000);
  EXPECT_EQ(ShardRowBound(t[0], 2), 51u);
  t[0].mutable_budget()->set_max_rows(20);
  EXPECT_EQ(ShardRowBound(t[0], 2), 20u);
  EXPECT_EQ(ShardTableBytes(t[0], 0, 2), 20u * 96);
}

TEST(ShardMemoryTest, ShardThatCannotHoldItsTablesFailsNamingTheSizes) {
  const std::vector<TableSpec> t = Tables();
  // Shard 0 of 2: 4896 + (5 + 11) × 4 = 4960 bytes.
  MemoryBudget budget{4960, "consistency.memory_limit_bytes (--memory_limit)"};
  EXPECT_TRUE(CheckShardFits(t, 0, 2, budget).ok());
  budget.bytes = 4959;
  const Status st = CheckShardFits(t, 0, 2, budget);
  ASSERT_EQ(st.code(), Status::Code::kResourceExhausted);
  EXPECT_EQ(st.message(),
            "server shard 0 of 2 does not fit in memory: the job's tables need 4.8 KiB (4960 bytes) on this shard "
            "(weights, optimizer state and row index, in bytes: w1 51 rows 4896, b1 64); tables of unbounded keys "
            "not counted: h, but 4.8 KiB (4959 bytes) are available (consistency.memory_limit_bytes "
            "(--memory_limit)); run more servers (cluster.num_servers), or give each more memory "
            "(docs/OPERATIONS.md, \"Memory sizing\")");
  EXPECT_TRUE(CheckShardFits(t, 0, 2, MemoryBudget{}).ok()) << "unknown memory: no check";
}

// train.keep_best_model: the best epoch's copy of the weights (no
// optimizer state, no index) counts too.
TEST(ShardMemoryTest, TheBestEpochsCopyOfTheWeightsCounts) {
  const std::vector<TableSpec> t = Tables();
  EXPECT_EQ(KeptCopyBytes(t[0], 0, 2), 51u * 8 * 4);
  EXPECT_EQ(KeptCopyBytes(t[1], 2, 3), 4u * 4);
  EXPECT_EQ(KeptCopyBytes(t[2], 0, 2), 0u) << "unbounded keys: not counted";
  // Shard 0 of 2: 4960 + 1632 + 5 × 4 = 6612 bytes.
  MemoryBudget budget{6612, "consistency.memory_limit_bytes (--memory_limit)"};
  EXPECT_TRUE(CheckShardFits(t, 0, 2, budget, /*kept_copy=*/true).ok());
  budget.bytes = 6611;
  const Status st = CheckShardFits(t, 0, 2, budget, /*kept_copy=*/true);
  ASSERT_EQ(st.code(), Status::Code::kResourceExhausted);
  EXPECT_EQ(st.message(),
            "server shard 0 of 2 does not fit in memory: the job's tables need 6.5 KiB (6612 bytes) on this shard "
            "(weights, optimizer state and row index, in bytes: w1 51 rows 4896, b1 64, the best epoch's copy of "
            "the weights 1652); tables of unbounded keys not counted: h, but 6.5 KiB (6611 bytes) are available "
            "(consistency.memory_limit_bytes (--memory_limit)); run more servers (cluster.num_servers), or give "
            "each more memory (docs/OPERATIONS.md, \"Memory sizing\"), or drop the copy "
            "(train.keep_best_model: false)");
}

// cluster.replicas: process p also holds copies of shards p − 1, ...,
// p − replicas (mod S), and the fit counts every shard it holds.
TEST(ShardMemoryTest, AProcessCountsTheReplicaCopiesItHolds) {
  EXPECT_EQ(ShardsOfProcess(0, 3, 2), (std::vector<int>{0, 2, 1}));
  EXPECT_EQ(ShardsOfProcess(1, 3, 1), (std::vector<int>{1, 0}));
  EXPECT_EQ(ShardsOfProcess(2, 3, 0), (std::vector<int>{2}));
  const std::vector<TableSpec> t = Tables();
  // Shard 0 of 3: w1 ⌈101 / 3⌉ = 34 rows × 96 + b1 (3 + 7) × 4 = 3304;
  // shard 2: 3264 + b1's slice of 4, (4 + 9) × 4 = 3316.
  MemoryBudget budget{3304, "consistency.memory_limit_bytes (--memory_limit)"};
  EXPECT_TRUE(CheckShardFits(t, 0, 3, budget).ok());
  EXPECT_FALSE(CheckShardFits(t, 0, 3, budget, false, /*replicas=*/1).ok());
  budget.bytes = 6620;
  EXPECT_TRUE(CheckShardFits(t, 0, 3, budget, false, 1).ok());
  budget.bytes = 6619;
  const Status st = CheckShardFits(t, 0, 3, budget, false, 1);
  ASSERT_EQ(st.code(), Status::Code::kResourceExhausted);
  EXPECT_EQ(st.message(),
            "server process 0 of 3 holds 1 + cluster.replicas = 2 shards (its own, 0, and a copy of shard 2), which "
            "do not fit in memory: the job's tables need 6.5 KiB (6620 bytes) in this process (weights, optimizer "
            "state and row index, in bytes: shard 0: w1 34 rows 3264, b1 40; shard 2: w1 34 rows 3264, b1 52); "
            "tables of unbounded keys not counted: h, but 6.5 KiB (6619 bytes) are available "
            "(consistency.memory_limit_bytes (--memory_limit)); run more servers (cluster.num_servers), fewer "
            "replicas (cluster.replicas), or give each more memory (docs/OPERATIONS.md, \"Memory sizing\")");
  // Two replicas: shards 1, 0 and 2, 3304 + 3304 + 3316 bytes (shard 1's
  // slice of b1 is 3 wide).
  budget.bytes = 9924;
  EXPECT_TRUE(CheckShardFits(t, 1, 3, budget, false, 2).ok());
  budget.bytes = 9923;
  EXPECT_NE(CheckShardFits(t, 1, 3, budget, false, 2)
                .message()
                .find("server process 1 of 3 holds 1 + cluster.replicas = 3 shards (its own, 1, and a copy of shards "
                      "0 and 2), which do not fit in memory: the job's tables need 9.7 KiB (9924 bytes)"),
            std::string::npos)
      << CheckShardFits(t, 1, 3, budget, false, 2).message();
}

// A shard with a budget (cluster.server_memory_bytes) accepts tables split
// from it on every shard, and refuses tables split from another budget or
// none.
TEST(ShardMemoryTest, TablesSplitFromABudgetStayWithinItOnEveryShard) {
  std::vector<TableSpec> t = Tables();
  // 3 shards: b1's largest slice 4 → 13 floats = 52 bytes; w1 (101 keys)
  // takes the rows of its fullest shard's keys, counted at 140 bytes a row
  // as if it evicted, and holds them all (so it does not evict); h (92
  // bytes a row, LRU) gets the rest: R = 151.
  const StatusOr<uint64_t> rows = ApplyServerMemoryBudget(20000, 3, &t);
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ(*rows, 151u);
  EXPECT_EQ(t[0].budget().max_rows(), MostKeysOnAShard(101, 3));
  EXPECT_EQ(t[0].budget().evict(), EVICT_NONE);
  EXPECT_EQ(t[2].budget().max_rows(), 151u);
  for (int s = 0; s < 3; ++s) EXPECT_TRUE(CheckShardWithinBudget(t, s, 3, 20000).ok()) << "shard " << s;
  // Shard 0: w1 ⌈101 / 3⌉ = 34 rows × 96 + h 151 × 92 + b1 (3 + 7) × 4 = 17196.
  EXPECT_EQ(CheckShardWithinBudget(t, 0, 3, 5000).message(),
            "the tables need 17196 bytes on shard 0, but its budget is 5000 bytes; give the workers and the servers "
            "the same cluster.server_memory_bytes (--server_memory)");
  EXPECT_EQ(CheckShardWithinBudget(Tables(), 0, 3, 20000).message(),
            "row table h has no row limit, but this shard's budget is 20000 bytes; give the workers and the "
            "servers the same cluster.server_memory_bytes (--server_memory)");
  EXPECT_TRUE(CheckShardWithinBudget(Tables(), 0, 3, 0).ok()) << "no budget: no check";
}

}  // namespace
}  // namespace tether
