// Tables within a budget through real shards: one worker under BSP, its
// parameter cache on, pulls and pushes random keys of w1 (admit_after 2,
// max_rows 6 a shard, evict LRU) on 2 shards, one pull and one push a
// clock. Every pull is checked against a reference map per shard (the
// shard a key belongs to, ShardForKey), and the shards' counters (STATS)
// against the reference's exact counts: a row evicted on its shard is read
// again from its initializer (or as zeros until it is admitted again) at
// the next clock, never from the worker's cached copy.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "core/partition.h"
#include "core/table_spec.h"
#include "worker/client/client.h"
#include "worker/client/job_session.h"
#include "worker/models/model_registry.h"
#include "tests/testing/cluster.h"

namespace tether {
namespace {

constexpr uint32_t kW1 = 0;
constexpr int kShards = 2;
constexpr uint32_t kAdmitAfter = 2;
constexpr uint64_t kMaxRows = 6;

// One shard's w1 as the reference sees it (LRU over the order the shard
// touches rows: held keys in key order, then new rows in key order).
struct ShardRef {
  struct Row {
    bool resident = false;
    std::vector<float> w;
    uint32_t pushes = 0;  // pushes while it held no row
    uint64_t seq = 0;
  };
  std::map<uint64_t, Row> rows;
  uint64_t seq = 0, admitted = 0, evicted = 0, not_admitted = 0;

  uint64_t Resident() const {
    uint64_t n = 0;
    for (const auto& [k, r] : rows) n += r.resident;
    return n;
  }
  // A request of `keys` (sorted, this shard's): touches, admission,
  // evictions, new rows from `init`.
  void Request(const std::vector<uint64_t>& keys, bool push, const std::function<std::vector<float>(uint64_t)>& init) {
    std::vector<uint64_t> created;
    const std::set<uint64_t> in(keys.begin(), keys.end());
    for (uint64_t k : keys) {
      Row& r = rows[k];
      if (r.resident) {
        r.seq = ++seq;
      } else if (push && ++r.pushes >= kAdmitAfter) {
        created.push_back(k);
      } else if (push) {
        ++not_admitted;
      }
    }
    while (Resident() + created.size() > kMaxRows) {
      uint64_t victim = 0, best = ~uint64_t{0};
      for (const auto& [k, r] : rows)
        if (r.resident && !in.count(k) && r.seq < best) victim = k, best = r.seq;
      rows[victim].resident = false;
      ++evicted;
    }
    for (uint64_t k : created) {
      Row& r = rows[k];
      r.resident = true;
      r.seq = ++seq;
      r.w = init(k);
      ++admitted;
    }
  }
};

TEST(TableBudgetClusterTest, RandomScheduleAgainstAReferenceWithExactCounts) {
  JobConfig job = testing::SgdJob(kShards, 1, /*features=*/50, /*labels=*/4, /*hidden=*/2, /*learning_rate=*/1.0f,
                                  /*timeout_ms=*/30000);
  job.mutable_consistency()->set_staleness(0);
  job.mutable_consistency()->set_cache(true);
  job.mutable_consistency()->set_refresh_on_push(true);
  TableConfig* w1 = job.add_table();
  w1->set_name("w1");
  w1->set_admit_after(kAdmitAfter);
  w1->set_max_rows(kMaxRows);
  w1->set_evict(LRU);
  const std::vector<TableSpec> tables = TablesForJob(job);
  ASSERT_EQ(tables[kW1].name(), "w1");
  ASSERT_TRUE(AdmitsOrEvicts(tables[kW1]));
  const TableSpec& spec = tables[kW1];
  const uint32_t dim = spec.dim();
  ASSERT_EQ(dim, 2u);
  auto init = [&](uint64_t key) {
    std::vector<float> w(dim);
    for (uint32_t j = 0; j < dim; ++j)
      w[j] = InitialWeight(spec.init().seed(), kW1, key, j, spec.init().bound());
    return w;
  };

  testing::InProcessCluster cluster(job);
  std::unique_ptr<WorkerClient> worker = cluster.Connect(0);
  ASSERT_TRUE(worker);
  std::vector<ShardRef> ref(kShards);
  std::mt19937 rng(21);
  uint64_t evicted_then_read = 0;
  for (int clock = 0; clock < 150; ++clock) {
    std::set<uint64_t> picked;
    const int n = 1 + static_cast<int>(rng() % 6);
    while (static_cast<int>(picked.size()) < n) picked.insert(rng() % 30);
    const std::vector<uint64_t> keys(picked.begin(), picked.end());
    std::vector<std::vector<uint64_t>> per_shard(kShards);
    for (uint64_t k : keys) per_shard[ShardForKey(k, kShards)].push_back(k);
    // The pull: every key's row as its shard holds it now.
    std::vector<float> out(keys.size() * dim, -9.0f);
    ASSERT_TRUE(worker->PullRows(kW1, keys, out.data()).Wait(5000).ok()) << "clock " << clock;
    for (int s = 0; s < kShards; ++s)
      if (!per_shard[s].empty()) ref[s].Request(per_shard[s], /*push=*/false, init);
    for (size_t i = 0; i < keys.size(); ++i) {
      const ShardRef::Row& r = ref[ShardForKey(keys[i], kShards)].rows[keys[i]];
      evicted_then_read += !r.resident && !r.w.empty();
      for (uint32_t j = 0; j < dim; ++j)
        ASSERT_EQ(out[i * dim + j], r.resident ? r.w[j] : 0.0f)
            << "clock " << clock << " key " << keys[i] << " (" << (r.w.empty() ? "never held" : "held before: ")
            << (r.w.empty() ? 0.0f : r.w[j]) << ", pushes " << r.pushes << ")";
    }
    // The push: SGD at rate 1 subtracts the gradient from a held row.
    const float g = static_cast<float>(static_cast<int>(rng() % 5) - 2);
    const std::vector<float> grads(keys.size() * dim, g);
    ASSERT_TRUE(worker->PushRows(kW1, keys, grads.data()).Wait(5000).ok()) << "clock " << clock;
    for (int s = 0; s < kShards; ++s) {
      if (per_shard[s].empty()) continue;
      ref[s].Request(per_shard[s], /*push=*/true, init);
      for (uint64_t k : per_shard[s]) {
        ShardRef::Row& r = ref[s].rows[k];
        if (r.resident)
          for (float& v : r.w) v -= g;
      }
    }
    ASSERT_TRUE(worker->Clock().ok());
  }
  ASSERT_TRUE(worker->WaitAll().ok());
  StatusOr<std::vector<ShardStats>> stats = JobSession(worker.get()).FetchServerStats();
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  ASSERT_EQ(stats->size(), static_cast<size_t>(kShards));
  for (int s = 0; s < kShards; ++s) {
    const ShardStats& st = (*stats)[s];
    SCOPED_TRACE("shard " + std::to_string(s));
    EXPECT_EQ(st.table_rows(kW1), ref[s].Resident());
    EXPECT_EQ(st.rows_admitted(kW1), ref[s].admitted);
    EXPECT_EQ(st.rows_evicted(kW1), ref[s].evicted);
    EXPECT_EQ(st.rows_not_admitted(kW1), ref[s].not_admitted);
    EXPECT_LE(st.table_rows(kW1), kMaxRows);
    EXPECT_GT(st.resident_bytes(kW1), 0u);
    EXPECT_GT(ref[s].evicted, 0u) << "the budget never bound";
    EXPECT_GT(ref[s].not_admitted, 0u);
  }
  EXPECT_GT(evicted_then_read, 0u) << "no evicted key was read again";
}

}  // namespace
}  // namespace tether
