// A row table within a budget (TableSpec.budget): admission, eviction and
// their counters through ServerTable's pulls and pushes, with exact counts,
// and random push/pull schedules against a reference map.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "optim/shard_budget.h"
#include "server/table.h"

namespace tether {
namespace {

constexpr uint32_t kDim = 2;
constexpr float kBound = 0.5f;
constexpr uint64_t kSeed = 9;

TableSpec Spec(const TableBudget& budget) {
  TableSpec spec;
  spec.set_id(1);
  spec.set_name("w1");
  spec.set_kind(TableSpec::ROW);
  spec.set_dim(kDim);
  spec.mutable_init()->set_kind(TableInitializer::UNIFORM);
  spec.mutable_init()->set_bound(kBound);
  spec.mutable_init()->set_seed(kSeed);
  spec.mutable_optimizer()->set_type(SUM);  // w += g: exact to compare
  *spec.mutable_budget() = budget;
  return spec;
}

float Init(uint64_t key, uint32_t j) { return InitialWeight(kSeed, 1, key, j, kBound); }

std::vector<float> Pull(ServerTable& t, const std::vector<uint64_t>& keys) {
  std::vector<float> out(keys.size() * kDim, -1.0f);
  EXPECT_TRUE(t.PullRows(keys.data(), keys.size(), out.data()).ok());
  return out;
}

void Push(ServerTable& t, const std::vector<uint64_t>& keys, float g) {
  const std::vector<float> grad(keys.size() * kDim, g);
  ASSERT_TRUE(t.PushRows(keys.data(), keys.size(), grad.data()).ok());
}

TEST(TableBudgetTest, AdmitAfterTwoPushes) {
  TableBudget b;
  b.set_admit_after(2);
  ServerTable t(Spec(b), 0, 0);
  EXPECT_TRUE(t.budgeted());
  // A pull of keys never admitted reads zeros (not the initializer) and
  // creates nothing.
  EXPECT_EQ(Pull(t, {3, 5}), std::vector<float>(4, 0.0f));
  EXPECT_EQ(t.num_rows(), 0u);
  Push(t, {3, 5}, 1.0f);  // first push of each: dropped
  EXPECT_EQ(t.num_rows(), 0u);
  EXPECT_EQ(t.rows_not_admitted(), 2u);
  EXPECT_EQ(t.version(), 1u);  // the push was applied (to no row)
  Push(t, {3, 7}, 2.0f);  // 3: second push, admitted with this gradient; 7: first
  EXPECT_EQ(t.num_rows(), 1u);
  EXPECT_TRUE(t.Contains(3));
  EXPECT_FALSE(t.Contains(7));
  EXPECT_EQ(t.rows_admitted(), 1u);
  EXPECT_EQ(t.rows_not_admitted(), 3u);
  const std::vector<float> v = Pull(t, {3, 5, 7});
  EXPECT_EQ(v, (std::vector<float>{Init(3, 0) + 2.0f, Init(3, 1) + 2.0f, 0, 0, 0, 0}));
  EXPECT_EQ(t.rows_evicted(), 0u);
}

TEST(TableBudgetTest, LruEvictsTheRowTouchedLongestAgoAndItComesBackFromItsInitializer) {
  TableBudget b;
  b.set_max_rows(3);
  b.set_evict(LRU);
  ServerTable t(Spec(b), 0, 0);
  EXPECT_EQ(t.max_rows(), 3u);
  Push(t, {1, 2, 3}, 1.0f);  // pushes create rows without admission
  Pull(t, {1});              // 1 is now the most recent; 2 the least
  Push(t, {4}, 1.0f);        // evicts 2
  EXPECT_EQ(t.num_rows(), 3u);
  EXPECT_FALSE(t.Contains(2));
  EXPECT_EQ(t.rows_evicted(), 1u);
  EXPECT_EQ(t.rows_admitted(), 4u);
  // 2 comes back as new: its initializer, not its old weights. That evicts 3.
  EXPECT_EQ(Pull(t, {2}), (std::vector<float>{Init(2, 0), Init(2, 1)}));
  EXPECT_FALSE(t.Contains(3));
  EXPECT_EQ(t.rows_evicted(), 2u);
  EXPECT_EQ(t.num_rows(), t.rows_admitted() - t.rows_evicted());
  // The rows that stayed kept their updates, wherever they moved.
  EXPECT_EQ(Pull(t, {1, 4}), (std::vector<float>{Init(1, 0) + 1, Init(1, 1) + 1, Init(4, 0) + 1, Init(4, 1) + 1}));
  // The checkpoint's view: row r of raw_data is KeysByRow()[r].
  const std::vector<uint64_t> keys = t.KeysByRow();
  ASSERT_EQ(keys.size(), 3u);
  for (uint64_t r = 0; r < keys.size(); ++r) {
    const float* row = t.raw_data() + r * t.stride();
    const std::vector<float> want = Pull(t, {keys[r]});
    EXPECT_EQ(row[0], want[0]);
    EXPECT_EQ(row[1], want[1]);
  }
}

TEST(TableBudgetTest, ARequestLargerThanTheBudgetIsRefusedAndWithoutEvictMaxRowsRefuses) {
  TableBudget b;
  b.set_max_rows(2);
  b.set_evict(LRU);
  ServerTable t(Spec(b), 0, 0);
  const std::vector<uint64_t> keys = {1, 2, 3};
  std::vector<float> out(6);
  const Status st = t.PullRows(keys.data(), 3, out.data());
  EXPECT_EQ(st.code(), Status::Code::kResourceExhausted);
  EXPECT_NE(st.message().find("its budget's max_rows"), std::string::npos) << st.message();
  EXPECT_EQ(t.num_rows(), 0u);
  TableBudget cap;
  cap.set_max_rows(2);
  ServerTable c(Spec(cap), 0, 0);
  EXPECT_FALSE(c.budgeted());
  Push(c, {1, 2}, 1.0f);
  const std::vector<float> g(2, 1.0f);
  const uint64_t k3 = 3;
  EXPECT_EQ(c.PushRows(&k3, 1, g.data()).code(), Status::Code::kResourceExhausted);
}

TEST(TableBudgetTest, TtlEvictsRowsIdleForTtlClocks) {
  TableBudget b;
  b.set_evict(TTL);
  b.set_ttl_clocks(2);
  ServerTable t(Spec(b), 0, 0);
  t.set_clock(0);
  Push(t, {1, 2}, 1.0f);
  t.set_clock(1);
  Push(t, {2}, 1.0f);
  t.set_clock(2);  // 1 idle for 2 clocks: it goes at this request
  Pull(t, {3});
  EXPECT_FALSE(t.Contains(1));
  EXPECT_TRUE(t.Contains(2));
  EXPECT_EQ(t.rows_evicted(), 1u);
  t.set_clock(1);  // an older clock does not move the table's clock back
  EXPECT_EQ(t.clock(), 2);
  t.set_clock(10);
  Pull(t, {2});  // 3 goes; 2 is this request's and stays
  EXPECT_EQ(t.num_rows(), 1u);
  EXPECT_EQ(t.rows_evicted(), 2u);
}

TEST(TableBudgetTest, AnEvictedKeyComesBackAsNewAndItsPushesCountOn) {
  TableBudget b;
  b.set_admit_after(2);
  b.set_max_rows(1);
  b.set_evict(LRU);
  ServerTable t(Spec(b), 0, 0);
  Push(t, {1}, 1.0f);
  Push(t, {1}, 1.0f);  // admitted
  Push(t, {2}, 1.0f);
  Push(t, {2}, 1.0f);  // admitted, evicts 1
  EXPECT_FALSE(t.Contains(1));
  EXPECT_EQ(Pull(t, {1}), std::vector<float>(2, 0.0f));  // no row: zeros
  Push(t, {1}, 5.0f);  // its third push: admitted again, from its initializer
  EXPECT_EQ(Pull(t, {1}), (std::vector<float>{Init(1, 0) + 5, Init(1, 1) + 5}));
  EXPECT_FALSE(t.Contains(2));
  EXPECT_EQ(t.rows_admitted(), 3u);
  EXPECT_EQ(t.rows_evicted(), 2u);
  EXPECT_EQ(t.rows_not_admitted(), 2u);
}

TEST(TableBudgetTest, ResidentBytesCountRowsIndexMetadataAndSketch) {
  TableBudget b;
  b.set_admit_after(1);
  b.set_max_rows(100);
  b.set_evict(LFU);
  ServerTable t(Spec(b), 0, 0);
  // max_rows reserves the rows, their keys and the index at once: what a
  // shard budget's split counts (optim/shard_budget.h). Eviction metadata
  // is counted per row held.
  const uint64_t full = BudgetedTableBytes(Spec(b), 100);
  EXPECT_EQ(full, 100u * (kDim * 4 + 8 + RowEviction::kBytesPerRow) + 16 * 211 + 4096 * 4 * 2);
  const uint64_t empty = t.resident_bytes();
  EXPECT_EQ(empty, full - 100 * RowEviction::kBytesPerRow);
  std::vector<uint64_t> keys(100);
  for (uint64_t k = 0; k < 100; ++k) keys[k] = k * 1000;
  Push(t, keys, 1.0f);
  EXPECT_EQ(t.resident_bytes(), full);
  Push(t, {7, 8, 9}, 1.0f);  // evicts 3: nothing grows
  EXPECT_EQ(t.rows_evicted(), 3u);
  EXPECT_EQ(t.resident_bytes(), full);
  // Row data and index of 2 MiB or more count in whole huge pages, as the
  // split counts them: 300,000 rows of 8 bytes (2.4 MB → 4 MiB) and
  // 600,011 slots of 16 (→ 10 MiB).
  b.set_max_rows(300000);
  ServerTable big(Spec(b), 0, 0);
  EXPECT_EQ(big.resident_bytes(), (4u << 20) + (10u << 20) + 300000u * 8 + 4 * (1u << 21) * 2);
  EXPECT_EQ(big.resident_bytes(), BudgetedTableBytes(Spec(b), 300000) - 300000 * RowEviction::kBytesPerRow);
  TableBudget none;
  ServerTable plain(Spec(none), 0, 0);
  EXPECT_FALSE(plain.budgeted());
  Push(plain, keys, 1.0f);
  EXPECT_EQ(plain.rows_admitted(), 100u);
  EXPECT_EQ(plain.rows_evicted(), 0u);
}

TEST(TableBudgetTest, RowsOfABudgetedTableAreNotResolvedAndHelloChecksTheBudget) {
  TableBudget b;
  b.set_admit_after(2);
  ServerTable t(Spec(b), 0, 0);
  const std::vector<uint64_t> keys = {1, 2};
  std::vector<uint64_t> offsets;
  const Status st = t.ResolveRows(keys.data(), 2, &offsets);
  EXPECT_EQ(st.code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(t.num_rows(), 0u);
  // A peer's HELLO is checked as the config is, naming the table and field.
  TableSpec dense;
  dense.set_id(0);
  dense.set_name("b1");
  dense.set_kind(TableSpec::DENSE);
  dense.set_size(4);
  dense.mutable_budget()->set_max_rows(3);
  EXPECT_EQ(ValidateTableSpecs({dense}, 1).message(),
            "table 'b1': field budget: only row tables have a budget (admission and eviction)");
  TableSpec row = Spec(b);
  row.set_id(0);
  row.mutable_budget()->set_admit_after(70000);
  EXPECT_EQ(ValidateTableSpecs({row}, 1).message(),
            "table 'w1': field budget.admit_after: must be at most 65535 (the sketch's counters are 16-bit), got 70000");
}

// ---- Random schedules against a reference map.
//
// The reference keeps, per key: resident or not, its weights, its pushes
// while it held no row (admission: exact counts, which the sketch gives
// for 60 keys in 4 × 4096 counters), and its last touch (a global
// sequence: the order in which the table touches rows: held keys in key
// order, then new rows in key order) and last clock. LRU and TTL victims
// are predicted exactly; LFU's sampled victims are read from the table
// (which keys left) and checked to be legal.
struct Reference {
  struct Row {
    bool resident = false;
    std::vector<float> w;
    uint32_t pushes = 0;  // pushes while not resident
    uint64_t seq = 0;
    int64_t clock = 0;
  };
  std::map<uint64_t, Row> rows;
  uint64_t seq = 0, admitted = 0, evicted = 0, not_admitted = 0;
  uint64_t Resident() const {
    uint64_t n = 0;
    for (const auto& [k, r] : rows) n += r.resident;
    return n;
  }
};

void RunBudgetSchedule(const TableBudget& b, int steps, uint32_t seed) {
  SCOPED_TRACE("seed " + std::to_string(seed));
  ServerTable t(Spec(b), 0, 0);
  Reference ref;
  std::mt19937 rng(seed);
  const uint64_t universe = 60;
  int64_t clock = 0;
  uint64_t evictions_seen = 0;
  for (int step = 0; step < steps; ++step) {
    if (rng() % 4 == 0) ++clock;
    t.set_clock(clock);
    std::set<uint64_t> picked;
    const int n = 1 + static_cast<int>(rng() % std::min<uint64_t>(8, b.max_rows() > 0 ? b.max_rows() : 8));
    while (static_cast<int>(picked.size()) < n) picked.insert((rng() % universe) * 7 + 3);
    const std::vector<uint64_t> keys(picked.begin(), picked.end());
    const bool push = rng() % 2 == 0;
    const float g = static_cast<float>(static_cast<int>(rng() % 7) - 3);
    const bool admission = b.admit_after() > 0;
    // Reference: held keys touched, absent ones admitted or left out.
    std::vector<uint64_t> created;
    std::set<uint64_t> in_request(keys.begin(), keys.end());
    for (uint64_t k : keys) {
      Reference::Row& r = ref.rows[k];
      if (r.resident) {
        r.seq = ++ref.seq;
        r.clock = clock;
      } else if (!admission || (push && ++r.pushes >= b.admit_after())) {
        created.push_back(k);
      } else if (push) {
        ++ref.not_admitted;
      }
    }
    auto evict = [&](uint64_t k) {
      ref.rows[k].resident = false;
      ++ref.evicted;
    };
    auto lru_tail = [&]() -> uint64_t {
      uint64_t best = ~uint64_t{0}, best_seq = ~uint64_t{0};
      for (const auto& [k, r] : ref.rows)
        if (r.resident && !in_request.count(k) && r.seq < best_seq) best = k, best_seq = r.seq;
      return best;
    };
    if (b.evict() == TTL) {
      for (;;) {
        const uint64_t k = lru_tail();
        if (k == ~uint64_t{0} || clock - ref.rows[k].clock < static_cast<int64_t>(b.ttl_clocks())) break;
        // Only if every resident row touched later is not older: the tail is the oldest.
        evict(k);
      }
    }
    if (b.evict() == LRU || b.evict() == TTL)
      while (b.max_rows() > 0 && ref.Resident() + created.size() > b.max_rows()) evict(lru_tail());
    for (uint64_t k : created) {
      Reference::Row& r = ref.rows[k];
      r.resident = true;
      r.seq = ++ref.seq;
      r.clock = clock;
      r.w = {Init(k, 0), Init(k, 1)};
      ++ref.admitted;
    }
    // The table.
    std::vector<float> out(keys.size() * kDim);
    if (push) {
      const std::vector<float> grad(keys.size() * kDim, g);
      ASSERT_TRUE(t.PushRows(keys.data(), keys.size(), grad.data()).ok()) << "step " << step;
    } else {
      ASSERT_TRUE(t.PullRows(keys.data(), keys.size(), out.data()).ok()) << "step " << step;
    }
    if (b.evict() == LFU) {
      // Which keys left: legal victims are resident keys outside the request.
      for (auto& [k, r] : ref.rows) {
        if (!r.resident || t.Contains(k)) continue;
        ASSERT_EQ(in_request.count(k), 0u) << "step " << step << ": evicted a key of its own request";
        evict(k);
        ++evictions_seen;
      }
    }
    for (size_t i = 0; i < keys.size(); ++i) {
      Reference::Row& r = ref.rows[keys[i]];
      if (push && r.resident)
        for (uint32_t j = 0; j < kDim; ++j) r.w[j] += g;
      if (!push) {
        for (uint32_t j = 0; j < kDim; ++j)
          ASSERT_EQ(out[i * kDim + j], r.resident ? r.w[j] : 0.0f) << "step " << step << " key " << keys[i];
      }
    }
    // Exact counts, and the same resident set.
    ASSERT_EQ(t.num_rows(), ref.Resident()) << "step " << step;
    ASSERT_EQ(t.rows_admitted(), ref.admitted) << "step " << step;
    ASSERT_EQ(t.rows_evicted(), ref.evicted) << "step " << step;
    ASSERT_EQ(t.rows_not_admitted(), ref.not_admitted) << "step " << step;
    if (b.max_rows() > 0) {
      ASSERT_LE(t.num_rows(), b.max_rows());
    }
    for (const auto& [k, r] : ref.rows) ASSERT_EQ(t.Contains(k), r.resident) << "step " << step << " key " << k;
  }
  // Every resident row's weights, read without touching anything.
  std::map<uint64_t, std::vector<float>> held;
  t.ForEachRow([&](uint64_t key, const float* w) { held[key] = std::vector<float>(w, w + kDim); });
  for (const auto& [k, r] : ref.rows) {
    if (r.resident) {
      EXPECT_EQ(held[k], r.w) << k;
    }
  }
  EXPECT_GT(ref.admitted, 0u);
  if (b.evict() != EVICT_NONE) {
    EXPECT_GT(ref.evicted, 0u) << "the budget never bound";
  }
  if (b.admit_after() > 1) {
    EXPECT_GT(ref.not_admitted, 0u);
  }
  if (b.evict() == LFU) {
    EXPECT_EQ(evictions_seen, ref.evicted);
  }
}

TableBudget Budget(uint32_t admit_after, uint64_t max_rows, EvictPolicy evict, uint64_t ttl = 0) {
  TableBudget b;
  if (admit_after > 0) b.set_admit_after(admit_after);
  if (max_rows > 0) b.set_max_rows(max_rows);
  b.set_evict(evict);
  if (ttl > 0) b.set_ttl_clocks(ttl);
  return b;
}

TEST(TableBudgetScheduleTest, AdmissionOnly) { RunBudgetSchedule(Budget(3, 0, EVICT_NONE), 2000, 1); }
TEST(TableBudgetScheduleTest, Lru) { RunBudgetSchedule(Budget(0, 20, LRU), 2000, 2); }
TEST(TableBudgetScheduleTest, LruWithAdmission) { RunBudgetSchedule(Budget(2, 16, LRU), 2000, 3); }
TEST(TableBudgetScheduleTest, LfuWithAdmission) { RunBudgetSchedule(Budget(2, 16, LFU), 2000, 4); }
TEST(TableBudgetScheduleTest, Ttl) { RunBudgetSchedule(Budget(0, 0, TTL, 3), 2000, 5); }
TEST(TableBudgetScheduleTest, TtlWithMaxRowsAndAdmission) { RunBudgetSchedule(Budget(2, 12, TTL, 4), 2000, 6); }
TEST(TableBudgetScheduleTest, ManySeeds) {
  for (uint32_t seed = 10; seed < 20; ++seed) RunBudgetSchedule(Budget(1 + seed % 3, 8 + seed, LRU), 400, seed);
}

}  // namespace
}  // namespace tether
