// Row numbers past 2³¹ and 2³² (64-bit slots): a table whose index numbers
// its rows from just under 2³¹ (ServerTable::SetFirstRowNumberForTesting)
// pushes, pulls, evicts and checkpoints exactly as one numbered from 0; the
// hashed index reaches every slot past 2³² slots; the default row limit is
// what the process's memory holds (physical memory, or a lower cgroup or
// address-space limit).
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <set>

#include "checkpoint/checkpoint.h"
#include "core/partition.h"
#include "core/process_limits.h"
#include "optim/shard_budget.h"
#include "server/table.h"
#include "server/table_budget_checkpoint.h"
#include "server/table_checkpoint.h"
#include "server/testing/one_shard_checkpoint.h"
#include "tests/testing/temp_dir.h"

namespace tether {
namespace {

using Shard = std::vector<std::unique_ptr<ServerTable>>;

constexpr uint64_t k31 = uint64_t{1} << 31;
constexpr uint64_t k32 = uint64_t{1} << 32;
constexpr uint32_t kDim = 3;

TableSpec Spec(bool budget) {
  TableSpec spec;
  spec.set_id(0);
  spec.set_name("w1");
  spec.set_kind(TableSpec::ROW);
  spec.set_dim(kDim);
  spec.mutable_init()->set_kind(TableInitializer::UNIFORM);
  spec.mutable_init()->set_bound(0.5f);
  spec.mutable_init()->set_seed(4);
  spec.mutable_optimizer()->set_type(ADAGRAD);
  spec.mutable_optimizer()->set_learning_rate(0.1f);
  if (budget) {
    spec.mutable_budget()->set_max_rows(16);
    spec.mutable_budget()->set_evict(LRU);
  }
  return spec;
}

Shard MakeShard(const TableSpec& spec, uint64_t first_row) {
  Shard s;
  s.push_back(std::make_unique<ServerTable>(spec, 0, 0));
  s[0]->SetFirstRowNumberForTesting(first_row);
  return s;
}

// Steps [from, to) of a fixed random schedule of pulls and pushes of keys
// from 60 (scattered over 64 bits), a clock every 4 steps; the pulled
// values are appended to *pulled.
void RunSchedule(ServerTable* t, int from, int to, std::vector<float>* pulled) {
  for (int step = from; step < to; ++step) {
    std::mt19937 rng(700 + step);
    t->set_clock(step / 4);
    std::set<uint64_t> picked;
    const int n = 1 + static_cast<int>(rng() % 6);
    while (static_cast<int>(picked.size()) < n) picked.insert(MixKey(rng() % 60));
    const std::vector<uint64_t> keys(picked.begin(), picked.end());
    std::vector<float> v(keys.size() * kDim);
    if (rng() % 2 == 0) {
      for (float& g : v) g = static_cast<float>(static_cast<int>(rng() % 9) - 4) / 8.0f;
      ASSERT_TRUE(t->PushRows(keys.data(), keys.size(), v.data()).ok());
    } else {
      ASSERT_TRUE(t->PullRows(keys.data(), keys.size(), v.data()).ok());
      pulled->insert(pulled->end(), v.begin(), v.end());
    }
  }
}

void ExpectSame(const ServerTable& a, const ServerTable& b) {
  ASSERT_EQ(a.num_rows(), b.num_rows());
  EXPECT_EQ(a.KeysByRow(), b.KeysByRow());
  ASSERT_EQ(a.raw_floats(), b.raw_floats());
  EXPECT_EQ(std::memcmp(a.raw_data(), b.raw_data(), a.raw_floats() * sizeof(float)), 0);
  if (a.budgeted()) {  // counters are budget state (a plain table restores rows only)
    EXPECT_EQ(a.rows_admitted(), b.rows_admitted());
    EXPECT_EQ(a.rows_evicted(), b.rows_evicted());
    TableBudgetState sa, sb;
    a.SaveBudgetState(&sa);
    b.SaveBudgetState(&sb);
    EXPECT_EQ(sa.SerializeAsString(), sb.SerializeAsString());
  }
}

Status Checkpoint(const std::string& dir, int64_t clock, const Shard& shard) {
  return testing::WriteOneShardCheckpoint(dir, clock, shard, /*budget_required=*/false);
}

// A table numbered from 2³¹ − 10 against one numbered from 0, on the same
// schedule: the same pulls, rows, evictions and budget state; a checkpoint
// of it restores into a table numbered from 2³² − 5 bit for bit, and both
// continue alike.
void AcrossTheBoundary(bool budget) {
  testing::ScopedTempDir tmp;
  Shard zero = MakeShard(Spec(budget), 0);
  Shard high = MakeShard(Spec(budget), k31 - 10);
  std::vector<float> pulled_zero, pulled_high;
  RunSchedule(zero[0].get(), 0, 120, &pulled_zero);
  RunSchedule(high[0].get(), 0, 120, &pulled_high);
  EXPECT_EQ(pulled_zero, pulled_high);
  ExpectSame(*zero[0], *high[0]);
  // The slots hold numbers on both sides of 2³¹.
  uint64_t below = 0, above = 0;
  for (uint64_t key : high[0]->KeysByRow()) {
    const uint64_t number = high[0]->RowNumberForTesting(key);
    EXPECT_GE(number, k31 - 10);
    (number < k31 ? below : above) += 1;
  }
  EXPECT_GT(below, 0u);
  EXPECT_GT(above, 0u);
  if (budget) {
    EXPECT_EQ(high[0]->num_rows(), 16u);
    EXPECT_GT(high[0]->rows_evicted(), 20u);
  } else {
    EXPECT_EQ(high[0]->num_rows(), 60u);
  }

  const std::string dir = tmp.path() + "/ckpt";
  ASSERT_TRUE(Checkpoint(dir, 30, high).ok());
  StatusOr<CheckpointManifest> m = ReadManifest(dir);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  Shard back = MakeShard(Spec(budget), k32 - 5);
  ASSERT_TRUE(RestoreShardTables(dir, *m, 0, 1, &back).ok());
  ASSERT_TRUE(RestoreShardBudgetState(dir, *m, 0, 1, &back).ok());
  ExpectSame(*high[0], *back[0]);
  EXPECT_GE(back[0]->RowNumberForTesting(back[0]->KeysByRow().back()), k32);
  std::vector<float> pulled_back;
  pulled_zero.clear();
  RunSchedule(zero[0].get(), 120, 240, &pulled_zero);
  RunSchedule(back[0].get(), 120, 240, &pulled_back);
  EXPECT_EQ(pulled_zero, pulled_back);
  ExpectSame(*zero[0], *back[0]);
}

TEST(TableRowNumbersTest, BudgetedTableAcrossTwoToThe31) { AcrossTheBoundary(true); }
TEST(TableRowNumbersTest, PlainTableAcrossTwoToThe31) { AcrossTheBoundary(false); }

TEST(TableRowNumbersTest, HashedSlotsReachPastTwoToThe32) {
  // Below 2³² slots: the 32-bit fastmod (the layout tables had before).
  const uint64_t small = 1000003;
  const uint64_t m = UINT64_MAX / small + 1;
  for (uint64_t k = 0; k < 1000; ++k) {
    const uint64_t mixed = MixKey(k);
    EXPECT_EQ(table_internal::HashedSlot(mixed, small, m), static_cast<uint32_t>(mixed ^ (mixed >> 32)) % small);
  }
  // Past 2³² slots every slot is reachable: homes spread over the whole range.
  const uint64_t slots = (uint64_t{1} << 33) + 17;
  const uint64_t mw = UINT64_MAX / slots + 1;
  uint64_t past32 = 0, most = 0;
  constexpr int kKeys = 100000;
  for (uint64_t k = 0; k < kKeys; ++k) {
    const uint64_t h = table_internal::HashedSlot(MixKey(k), slots, mw);
    ASSERT_LT(h, slots);
    past32 += h >= k32 ? 1 : 0;
    most = std::max(most, h);
  }
  EXPECT_NEAR(static_cast<double>(past32) / kKeys, 0.5, 0.01);
  EXPECT_GT(most, slots - slots / 1000);
}

TEST(TableRowNumbersTest, DefaultLimitIsWhatMemoryHolds) {
  // Physical memory, or this process's cgroup or address-space limit when
  // lower (core/process_limits.h).
  std::string source;
  const uint64_t memory = MemoryCeilingBytes(CurrentProcessLimits(), &source);
  TableSpec spec = Spec(false);
  EXPECT_EQ(ServerTable::MemoryRowLimit(spec), memory / ShardRowBytes(spec));
  ServerTable t(spec, 0, 0);
  EXPECT_EQ(t.max_rows(), ServerTable::MemoryRowLimit(spec));
  // Rows of ~memory/3 bytes: the fourth is refused before anything is
  // allocated (the request's buffers are not read).
  spec.set_dim(static_cast<uint32_t>(std::min<uint64_t>(memory / 12, UINT32_MAX)));
  spec.mutable_optimizer()->set_type(SGD);
  ServerTable wide(spec, 0, 0);
  const uint64_t limit = wide.max_rows();
  ASSERT_LT(limit, 64u);
  std::vector<uint64_t> keys(limit + 1);
  for (uint64_t i = 0; i < keys.size(); ++i) keys[i] = i;
  const Status st = wide.PushRows(keys.data(), keys.size(), nullptr);
  EXPECT_EQ(st.code(), Status::Code::kResourceExhausted);
  EXPECT_EQ(st.message(), "table w1 would hold " + std::to_string(limit + 1) + " rows on this shard; the limit is " +
                              std::to_string(limit) + " (what " + source + " holds at " +
                              std::to_string(ShardRowBytes(spec)) +
                              " bytes a row; use more servers, or a budget: --server_memory or the table's max_rows)");
  EXPECT_EQ(wide.num_rows(), 0u);
  // A lower limit given by the shard (tests) names servers only.
  ServerTable four(Spec(false), 0, 0, 4);
  EXPECT_EQ(four.max_rows(), 4u);
}

}  // namespace
}  // namespace tether
