#include "server/table_budget_checkpoint.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <random>
#include <set>

#include "checkpoint/checkpoint.h"
#include "core/partition.h"
#include "server/table_checkpoint.h"
#include "server/testing/one_shard_checkpoint.h"
#include "tests/testing/temp_dir.h"

namespace tether {
namespace {

using Shard = std::vector<std::unique_ptr<ServerTable>>;

TableSpec Spec(EvictPolicy evict) {
  TableSpec spec;
  spec.set_id(0);
  spec.set_name("w1");
  spec.set_kind(TableSpec::ROW);
  spec.set_dim(3);
  spec.mutable_init()->set_kind(TableInitializer::UNIFORM);
  spec.mutable_init()->set_bound(0.5f);
  spec.mutable_init()->set_seed(4);
  spec.mutable_optimizer()->set_type(ADAM);
  spec.mutable_optimizer()->set_learning_rate(0.01f);
  spec.mutable_budget()->set_admit_after(2);
  spec.mutable_budget()->set_max_rows(24);
  spec.mutable_budget()->set_evict(evict);
  if (evict == TTL) spec.mutable_budget()->set_ttl_clocks(6);
  return spec;
}

Shard MakeShard(const TableSpec& spec) {
  Shard s;
  s.push_back(std::make_unique<ServerTable>(spec, 0, 0));
  return s;
}

// Steps [from, to) of a fixed random schedule of pulls and pushes, a clock
// every 4 steps.
void RunSchedule(ServerTable* t, int from, int to) {
  for (int step = from; step < to; ++step) {
    std::mt19937 rng(1000 + step);
    t->set_clock(step / 4);
    std::set<uint64_t> picked;
    const int n = 1 + static_cast<int>(rng() % 8);
    while (static_cast<int>(picked.size()) < n) picked.insert(rng() % 80);
    const std::vector<uint64_t> keys(picked.begin(), picked.end());
    std::vector<float> v(keys.size() * 3);
    if (rng() % 2 == 0) {
      for (float& g : v) g = static_cast<float>(static_cast<int>(rng() % 9) - 4) / 8.0f;
      ASSERT_TRUE(t->PushRows(keys.data(), keys.size(), v.data()).ok());
    } else {
      ASSERT_TRUE(t->PullRows(keys.data(), keys.size(), v.data()).ok());
    }
  }
}

Status Checkpoint(const std::string& dir, int64_t clock, const Shard& shard) {
  return testing::WriteOneShardCheckpoint(dir, clock, shard, /*budget_required=*/true);
}

void ExpectSame(const ServerTable& a, const ServerTable& b) {
  ASSERT_EQ(a.num_rows(), b.num_rows());
  EXPECT_EQ(a.KeysByRow(), b.KeysByRow());
  ASSERT_EQ(a.raw_floats(), b.raw_floats());
  EXPECT_EQ(std::memcmp(a.raw_data(), b.raw_data(), a.raw_floats() * sizeof(float)), 0);
  EXPECT_EQ(a.rows_admitted(), b.rows_admitted());
  EXPECT_EQ(a.rows_evicted(), b.rows_evicted());
  EXPECT_EQ(a.rows_not_admitted(), b.rows_not_admitted());
  EXPECT_EQ(a.clock(), b.clock());
  EXPECT_EQ(a.admission()->sketch().counters(), b.admission()->sketch().counters());
  EXPECT_EQ(a.eviction()->RecencyOrder(), b.eviction()->RecencyOrder());
  for (uint64_t r = 0; r < a.num_rows(); ++r) {
    EXPECT_EQ(a.eviction()->pushes(r), b.eviction()->pushes(r));
    EXPECT_EQ(a.eviction()->last_touch(r), b.eviction()->last_touch(r));
  }
}

// A run checkpointed at step 200 and resumed into a new table ends
// bit-identical to one that ran straight through: rows, optimizer state,
// sketch, eviction order and counts, counters.
void ResumeIsBitIdentical(EvictPolicy evict) {
  testing::ScopedTempDir tmp;
  Shard straight = MakeShard(Spec(evict));
  RunSchedule(straight[0].get(), 0, 500);
  Shard first = MakeShard(Spec(evict));
  RunSchedule(first[0].get(), 0, 200);
  const std::string dir = tmp.path() + "/ckpt";
  ASSERT_TRUE(Checkpoint(dir, 50, first).ok());
  StatusOr<CheckpointManifest> m = ReadManifest(dir);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  Shard resumed = MakeShard(Spec(evict));
  ASSERT_TRUE(RestoreShardTables(dir, *m, 0, 1, &resumed).ok());
  ASSERT_TRUE(RestoreShardBudgetState(dir, *m, 0, 1, &resumed).ok());
  ExpectSame(*first[0], *resumed[0]);
  RunSchedule(resumed[0].get(), 200, 500);
  ExpectSame(*straight[0], *resumed[0]);
  EXPECT_GT(straight[0]->rows_evicted(), 0u);
  EXPECT_GT(straight[0]->rows_not_admitted(), 0u);
  // Without the budget file the resume differs (the check above is sharp).
  Shard bare = MakeShard(Spec(evict));
  ASSERT_TRUE(RestoreShardTables(dir, *m, 0, 1, &bare).ok());
  EXPECT_NE(bare[0]->rows_admitted(), first[0]->rows_admitted());
}

TEST(TableBudgetCheckpointTest, ResumeIsBitIdenticalLru) { ResumeIsBitIdentical(LRU); }
TEST(TableBudgetCheckpointTest, ResumeIsBitIdenticalLfu) { ResumeIsBitIdentical(LFU); }
TEST(TableBudgetCheckpointTest, ResumeIsBitIdenticalTtl) { ResumeIsBitIdentical(TTL); }

// Steps [from, to) of schedule `seed`: pulls and pushes of 1-8 keys from
// `universe`, the clock advancing at random; pulled values appended to
// *pulled.
void RunSeededSchedule(ServerTable* t, uint32_t seed, int from, int to, uint64_t universe,
                       std::vector<float>* pulled) {
  for (int step = from; step < to; ++step) {
    std::mt19937 rng(seed * 100003u + static_cast<uint32_t>(step));
    t->set_clock(step / (2 + static_cast<int>(seed % 4)));
    std::set<uint64_t> picked;
    const int n = 1 + static_cast<int>(rng() % 8);
    while (static_cast<int>(picked.size()) < n) picked.insert(MixKey(rng() % universe));
    const std::vector<uint64_t> keys(picked.begin(), picked.end());
    std::vector<float> v(keys.size() * 3);
    if (rng() % 3 != 0) {
      for (float& g : v) g = static_cast<float>(static_cast<int>(rng() % 9) - 4) / 8.0f;
      ASSERT_TRUE(t->PushRows(keys.data(), keys.size(), v.data()).ok());
    } else {
      ASSERT_TRUE(t->PullRows(keys.data(), keys.size(), v.data()).ok());
      pulled->insert(pulled->end(), v.begin(), v.end());
    }
  }
}

// Everything of a budgeted table, by its saved state (sketch, recency,
// clocks, push counts, sampler, counters) and its rows.
void ExpectSameState(const ServerTable& a, const ServerTable& b) {
  ASSERT_EQ(a.num_rows(), b.num_rows());
  EXPECT_EQ(a.KeysByRow(), b.KeysByRow());
  ASSERT_EQ(a.raw_floats(), b.raw_floats());
  EXPECT_EQ(std::memcmp(a.raw_data(), b.raw_data(), a.raw_floats() * sizeof(float)), 0);
  EXPECT_EQ(a.version(), b.version());
  TableBudgetState sa, sb;
  a.SaveBudgetState(&sa);
  b.SaveBudgetState(&sb);
  EXPECT_EQ(sa.SerializeAsString(), sb.SerializeAsString());
}

// Random budgets, random schedules and 1-4 random checkpoint points: a run
// written and loaded into a fresh table at each point (the budget state
// with it) pulls the same values as an uninterrupted run and ends
// bit-identical to it: rows, optimizer state, keys by row, sketch,
// eviction order and counts, counters.
TEST(TableBudgetCheckpointTest, RandomResumePointsMatchAnUninterruptedRun) {
  testing::ScopedTempDir tmp;
  constexpr int kSteps = 300;
  uint64_t evicted = 0, not_admitted = 0, resumes = 0;
  for (uint32_t seed = 1; seed <= 24; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937 rng(seed);
    const EvictPolicy evict = std::vector<EvictPolicy>{LRU, LFU, TTL}[rng() % 3];
    TableSpec spec = Spec(evict);
    spec.mutable_budget()->set_admit_after(static_cast<uint32_t>(rng() % 4));  // 0: every key
    spec.mutable_budget()->set_max_rows(evict == TTL && rng() % 2 == 0 ? 0 : 8 + rng() % 24);
    if (evict == TTL) spec.mutable_budget()->set_ttl_clocks(2 + rng() % 6);
    const uint64_t universe = 30 + rng() % 90;
    std::set<int> points;
    const int resumes_here = 1 + static_cast<int>(rng() % 4);
    while (static_cast<int>(points.size()) < resumes_here) points.insert(1 + static_cast<int>(rng() % (kSteps - 1)));

    Shard straight = MakeShard(spec);
    std::vector<float> pulled_straight, pulled;
    RunSeededSchedule(straight[0].get(), seed, 0, kSteps, universe, &pulled_straight);
    Shard run = MakeShard(spec);
    int at = 0;
    for (int point : points) {
      RunSeededSchedule(run[0].get(), seed, at, point, universe, &pulled);
      const std::string dir = tmp.path() + "/s" + std::to_string(seed) + "p" + std::to_string(point);
      ASSERT_TRUE(Checkpoint(dir, run[0]->clock(), run).ok());
      StatusOr<CheckpointManifest> m = ReadManifest(dir);
      ASSERT_TRUE(m.ok()) << m.status().ToString();
      Shard resumed = MakeShard(spec);
      ASSERT_TRUE(RestoreShardTables(dir, *m, 0, 1, &resumed).ok());
      ASSERT_TRUE(RestoreShardBudgetState(dir, *m, 0, 1, &resumed).ok());
      ExpectSameState(*run[0], *resumed[0]);
      run = std::move(resumed);
      at = point;
      ++resumes;
    }
    RunSeededSchedule(run[0].get(), seed, at, kSteps, universe, &pulled);
    EXPECT_EQ(pulled, pulled_straight);
    ExpectSameState(*straight[0], *run[0]);
    EXPECT_EQ(run[0]->rows_admitted(), straight[0]->rows_admitted());
    EXPECT_EQ(run[0]->rows_evicted(), straight[0]->rows_evicted());
    EXPECT_EQ(run[0]->rows_not_admitted(), straight[0]->rows_not_admitted());
    evicted += straight[0]->rows_evicted();
    not_admitted += straight[0]->rows_not_admitted();
  }
  // The schedules exercise what they compare.
  EXPECT_GT(evicted, 1000u);
  EXPECT_GT(not_admitted, 100u);
  EXPECT_GE(resumes, 40u);
}

TEST(TableBudgetCheckpointTest, NoBudgetNoFileAndACorruptFileIsRefused) {
  testing::ScopedTempDir tmp;
  TableSpec plain = Spec(LRU);
  plain.clear_budget();
  Shard none = MakeShard(plain);
  CheckpointFile f;
  ASSERT_TRUE(WriteShardBudgetState(FileSystem::Default(), tmp.path(), 0, 1, 3, none, &f).ok());
  EXPECT_FALSE(f.has_name());
  EXPECT_EQ(BudgetFileName(2), "shard-2.budget");

  Shard shard = MakeShard(Spec(LRU));
  RunSchedule(shard[0].get(), 0, 50);
  const std::string dir = tmp.path() + "/ckpt";
  ASSERT_TRUE(Checkpoint(dir, 12, shard).ok());
  {
    std::fstream out(dir + "/shard-0.budget", std::ios::in | std::ios::out | std::ios::binary);
    out.seekp(5);
    out.put('\x7f');
  }
  StatusOr<CheckpointManifest> m = ReadManifest(dir);
  ASSERT_TRUE(m.ok());
  Shard back = MakeShard(Spec(LRU));
  ASSERT_TRUE(RestoreShardTables(dir, *m, 0, 1, &back).ok());
  const Status st = RestoreShardBudgetState(dir, *m, 0, 1, &back);
  EXPECT_EQ(st.code(), Status::Code::kDataLoss);
  EXPECT_NE(st.message().find("shard-0.budget: checksum mismatch"), std::string::npos) << st.message();
}

// On another number of shards the sketches are summed: a key's count is
// at least what any old shard counted for it.
TEST(TableBudgetCheckpointTest, ReshardedResumeMergesTheSketches) {
  testing::ScopedTempDir tmp;
  Shard shard = MakeShard(Spec(LRU));
  RunSchedule(shard[0].get(), 0, 100);
  const std::string dir = tmp.path() + "/ckpt";
  ASSERT_TRUE(Checkpoint(dir, 25, shard).ok());
  StatusOr<CheckpointManifest> m = ReadManifest(dir);
  ASSERT_TRUE(m.ok());
  for (int s = 0; s < 2; ++s) {
    Shard back = MakeShard(Spec(LRU));
    ASSERT_TRUE(RestoreShardTables(dir, *m, s, 2, &back).ok());
    ASSERT_TRUE(RestoreShardBudgetState(dir, *m, s, 2, &back).ok());
    EXPECT_EQ(back[0]->admission()->sketch().counters(), shard[0]->admission()->sketch().counters());
    EXPECT_EQ(back[0]->rows_admitted(), 0u);  // counters start afresh
    EXPECT_EQ(back[0]->clock(), shard[0]->clock());
  }
}

}  // namespace
}  // namespace tether
