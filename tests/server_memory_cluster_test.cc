// A shard budget through real shards (cluster.server_memory_bytes): the
// worker's tables carry the split's row limit, 2 shards hold w1 within it
// while one worker under BSP pulls and pushes more keys than fit, rows are
// evicted, and every shard's resident bytes over all tables stay within
// the budget.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <vector>

#include "core/table_spec.h"
#include "optim/shard_budget.h"
#include "server/shard_memory.h"
#include "worker/client/client.h"
#include "worker/client/job_session.h"
#include "worker/models/model_registry.h"
#include "tests/testing/cluster.h"

namespace tether {
namespace {

constexpr int kShards = 2;
constexpr uint64_t kRows = 8;  // the split's row limit, by construction below

// A budget that leaves exactly kRows rows for each row table on each shard.
uint64_t BudgetForRows(const JobConfig& job) {
  uint64_t bytes = 0;
  for (TableSpec t : TablesForJob(job)) {
    if (IsDenseTable(t)) {
      uint64_t most = 0;  // the largest slice over the shards
      for (int s = 0; s < kShards; ++s) most = std::max(most, ShardTableBytes(t, s, kShards));
      bytes += most;
      continue;
    }
    t.mutable_budget()->set_evict(LRU);
    // A keyed table takes at most its fullest shard's keys (optim/shard_budget.h).
    const uint64_t keys = MostKeysOnAShard(t.num_keys(), kShards);
    bytes += BudgetedTableBytes(t, keys == 0 ? kRows : std::min(kRows, keys));
  }
  return bytes;
}

TEST(ServerMemoryClusterTest, ABudgetEvictsAndEveryShardStaysWithinIt) {
  JobConfig job = testing::SgdJob(kShards, 1, /*features=*/50, /*labels=*/4, /*hidden=*/2, /*learning_rate=*/0.5f,
                                  /*timeout_ms=*/30000);
  job.mutable_consistency()->set_staleness(0);
  const uint64_t budget = BudgetForRows(job);
  job.mutable_cluster()->set_server_memory_bytes(budget);
  ASSERT_TRUE(ValidateModelConfig(job).ok()) << ValidateModelConfig(job).message();
  const std::vector<TableSpec> tables = TablesForJob(job);
  uint32_t w1 = 0;
  while (w1 < tables.size() && tables[w1].name() != "w1") ++w1;
  ASSERT_LT(w1, tables.size());
  const uint64_t rows = tables[w1].budget().max_rows();
  EXPECT_EQ(rows, kRows);
  EXPECT_EQ(tables[w1].budget().evict(), LRU);
  const uint32_t dim = tables[w1].dim();

  testing::InProcessCluster cluster(job);
  std::unique_ptr<WorkerClient> worker = cluster.Connect(0);
  ASSERT_TRUE(worker);
  for (int clock = 0; clock < 40; ++clock) {
    std::vector<uint64_t> keys;  // 6 keys a clock, sliding over 0 .. 49
    for (uint64_t k = 0; k < 6; ++k) keys.push_back((clock * 5 + k) % 50);
    const std::set<uint64_t> sorted(keys.begin(), keys.end());
    keys.assign(sorted.begin(), sorted.end());
    std::vector<float> out(keys.size() * dim);
    ASSERT_TRUE(worker->PullRows(w1, keys, out.data()).Wait(5000).ok()) << "clock " << clock;
    const std::vector<float> grads(keys.size() * dim, 0.25f);
    ASSERT_TRUE(worker->PushRows(w1, keys, grads.data()).Wait(5000).ok()) << "clock " << clock;
    ASSERT_TRUE(worker->Clock().ok());
  }
  ASSERT_TRUE(worker->WaitAll().ok());
  StatusOr<std::vector<ShardStats>> stats = JobSession(worker.get()).FetchServerStats();
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  ASSERT_EQ(stats->size(), static_cast<size_t>(kShards));
  for (int s = 0; s < kShards; ++s) {
    const ShardStats& st = (*stats)[s];
    SCOPED_TRACE("shard " + std::to_string(s));
    uint64_t resident = 0;
    for (uint64_t b : st.resident_bytes()) resident += b;
    EXPECT_LE(resident, budget);
    EXPECT_GT(resident, 0u);
    EXPECT_EQ(st.table_rows(w1), rows);
    EXPECT_GT(st.rows_evicted(w1), 0u) << "the budget never bound";
    EXPECT_EQ(st.rows_admitted(w1) - st.rows_evicted(w1), st.table_rows(w1));
  }
}

// A worker whose tables ignore the shards' budget is refused at HELLO,
// naming the budget: a hashed row table without a row limit, or limits
// split from a larger budget.
TEST(ServerMemoryClusterTest, AWorkerWithoutTheBudgetIsRefused) {
  JobConfig job = testing::SgdJob(kShards, 1, 50, 4, 2, 0.5f, 30000);
  std::vector<TableSpec> unbounded = TablesForJob(job);
  unbounded[0].set_num_keys(0);  // as with hashed features
  Status within = CheckShardWithinBudget(unbounded, 0, kShards, 1 << 20);
  ASSERT_FALSE(within.ok());
  EXPECT_NE(within.message().find("row table " + unbounded[0].name() +
                                  " has no row limit, but this shard's budget is 1048576 bytes"),
            std::string::npos)
      << within.message();
  const uint64_t budget = BudgetForRows(job);
  // Hashed tables (keyed ones take only their keys, which may fit any
  // budget) split from a budget 4 times larger.
  std::vector<TableSpec> larger = TablesForJob(job);
  for (TableSpec& t : larger)
    if (IsRowTable(t)) t.set_num_keys(0);
  ASSERT_TRUE(ApplyServerMemoryBudget(4 * budget, kShards, &larger).ok());
  within = CheckShardWithinBudget(larger, 0, kShards, budget);
  ASSERT_FALSE(within.ok());
  EXPECT_NE(within.message().find("but its budget is " + std::to_string(budget) + " bytes"), std::string::npos)
      << within.message();
}

}  // namespace
}  // namespace tether
