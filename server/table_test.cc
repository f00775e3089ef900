#include "server/table.h"

#include <gtest/gtest.h>

#include <cmath>

#include <algorithm>
#include <cstdint>
#include <map>
#include <cstring>
#include <random>
#include <vector>

namespace tether {
namespace {

TableSpec RowSpec(uint32_t dim, OptimizerType type, uint64_t seed = 1) {
  TableSpec spec;
  spec.set_id(3);
  spec.set_name("w");
  spec.set_kind(TableSpec::ROW);
  spec.set_dim(dim);
  spec.mutable_init()->set_kind(TableInitializer::UNIFORM);
  spec.mutable_init()->set_bound(0.5f);
  spec.mutable_init()->set_seed(seed);
  spec.mutable_optimizer()->set_type(type);
  spec.mutable_optimizer()->set_learning_rate(0.25f);
  return spec;
}

// Keys from all over the uint64 range (0, the top, neighbours, strides of
// powers of two), enough of them to grow the index many times, each row
// checked against InitialWeight and against a reference map of SGD updates.
TEST(ServerTableTest, RowsKeepTheirValuesThroughIndexGrowth) {
  constexpr uint32_t kDim = 5;
  ServerTable t(RowSpec(kDim, SGD, /*seed=*/9), 0, 0);
  std::vector<uint64_t> keys = {0, 1, 2, ~uint64_t{0}, ~uint64_t{0} - 1, uint64_t{1} << 63};
  for (uint64_t i = 1; i <= 3000; ++i) keys.push_back(i << 20);
  std::mt19937_64 rng(4);
  for (int i = 0; i < 3000; ++i) keys.push_back(rng());
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());

  std::map<uint64_t, std::vector<float>> ref;
  for (uint64_t k : keys) {
    std::vector<float>& r = ref[k];
    for (uint32_t j = 0; j < kDim; ++j) r.push_back(InitialWeight(9, 3, k, j, 0.5f));
  }
  // Push to every third key in batches (creating rows in push order), then
  // pull everything.
  for (size_t b = 0; b < keys.size(); b += 700) {
    std::vector<uint64_t> batch;
    for (size_t i = b; i < std::min(keys.size(), b + 700); i += 3) batch.push_back(keys[i]);
    std::vector<float> g(batch.size() * kDim);
    for (size_t i = 0; i < g.size(); ++i) g[i] = static_cast<float>(i % 7) - 3.0f;
    ASSERT_TRUE(t.PushRows(batch.data(), batch.size(), g.data()).ok());
    for (size_t i = 0; i < batch.size(); ++i)
      for (uint32_t j = 0; j < kDim; ++j) ref[batch[i]][j] -= 0.25f * g[i * kDim + j];
  }
  EXPECT_EQ(t.version(), (keys.size() + 699) / 700);
  std::vector<float> out(keys.size() * kDim, -99.0f);
  ASSERT_TRUE(t.PullRows(keys.data(), keys.size(), out.data()).ok());
  EXPECT_EQ(t.num_rows(), keys.size());
  for (size_t i = 0; i < keys.size(); ++i)
    for (uint32_t j = 0; j < kDim; ++j)
      ASSERT_EQ(out[i * kDim + j], ref[keys[i]][j]) << "key " << keys[i] << " weight " << j;
  // Pulling again creates nothing and returns the same values.
  std::vector<float> again(out.size());
  ASSERT_TRUE(t.PullRows(keys.data(), keys.size(), again.data()).ok());
  EXPECT_EQ(t.num_rows(), keys.size());
  EXPECT_EQ(again, out);
}

// Pushes each batch (SGD, lr 0.25) to `t` and checks every row of every
// batch against a reference map afterwards.
void PushBatchesAndCheck(ServerTable& t, const std::vector<std::vector<uint64_t>>& batches, uint32_t dim) {
  std::map<uint64_t, std::vector<float>> ref;
  for (const auto& batch : batches) {
    std::vector<float> g(batch.size() * dim);
    for (size_t i = 0; i < g.size(); ++i) g[i] = static_cast<float>(i % 5) - 2.0f;
    ASSERT_TRUE(t.PushRows(batch.data(), batch.size(), g.data()).ok());
    for (size_t i = 0; i < batch.size(); ++i) {
      auto [it, fresh] = ref.try_emplace(batch[i]);
      if (fresh)
        for (uint32_t j = 0; j < dim; ++j) it->second.push_back(InitialWeight(9, 3, batch[i], j, 0.5f));
      for (uint32_t j = 0; j < dim; ++j) it->second[j] -= 0.25f * g[i * dim + j];
    }
  }
  std::vector<uint64_t> all;
  for (const auto& [k, v] : ref) all.push_back(k);
  std::vector<float> out(all.size() * dim);
  ASSERT_TRUE(t.PullRows(all.data(), all.size(), out.data()).ok());
  EXPECT_EQ(t.num_rows(), all.size());
  for (size_t i = 0; i < all.size(); ++i)
    for (uint32_t j = 0; j < dim; ++j) ASSERT_EQ(out[i * dim + j], ref[all[i]][j]) << "key " << all[i];
}

// The row index keeps keys in order (its home slot is monotone in the key)
// for dense ids arriving in growing ranges, for ids offset far from 0, and
// for random 64-bit keys: the range widens as keys arrive and every row
// keeps its values; nothing falls back to the hash.
TEST(ServerTableTest, IndexStaysOrderedForDenseOffsetAndRandomKeys) {
  constexpr uint32_t kDim = 2;
  {
    ServerTable t(RowSpec(kDim, SGD, 9), 0, 0);
    std::vector<std::vector<uint64_t>> batches;
    for (uint64_t b = 0; b < 40; ++b) {  // ids 0..19999, then all of them again
      batches.emplace_back();
      for (uint64_t k = b * 500; k < (b + 1) * 500; ++k) batches.back().push_back(b < 20 ? k * 2 : k - 10000);
    }
    PushBatchesAndCheck(t, batches, kDim);
    EXPECT_FALSE(t.index_hashed());
  }
  {
    ServerTable t(RowSpec(kDim, SGD, 9), 0, 0);
    std::vector<std::vector<uint64_t>> batches(3);
    for (uint64_t k = 0; k < 30000; ++k) batches[k % 3].push_back((uint64_t{1} << 40) + 3 * k);
    PushBatchesAndCheck(t, batches, kDim);
    EXPECT_FALSE(t.index_hashed());
  }
  {
    ServerTable t(RowSpec(kDim, SGD, 9), 0, 0);
    std::mt19937_64 rng(7);
    std::vector<std::vector<uint64_t>> batches(8);
    for (auto& b : batches) {
      for (int i = 0; i < 5000; ++i) b.push_back(rng());
      std::sort(b.begin(), b.end());
      b.erase(std::unique(b.begin(), b.end()), b.end());
    }
    PushBatchesAndCheck(t, batches, kDim);
    EXPECT_FALSE(t.index_hashed());
  }
}

// Two far-apart clusters of consecutive ids crowd the ordered layout's
// slots; the index falls back to the mixing hash, and rows keep their values.
TEST(ServerTableTest, ClusteredKeysFallBackToTheHash) {
  constexpr uint32_t kDim = 3;
  ServerTable t(RowSpec(kDim, SGD, 9), 0, 0);
  std::vector<std::vector<uint64_t>> batches(4);
  for (uint64_t k = 0; k < 20000; ++k) batches[k % 4].push_back(k % 2 == 0 ? k : (uint64_t{1} << 62) + k);
  for (auto& b : batches) std::sort(b.begin(), b.end());
  PushBatchesAndCheck(t, batches, kDim);
  EXPECT_TRUE(t.index_hashed());
}

// Adam rows carry their own step count: a row pushed twice and a row pushed
// once end where a lone Optimizer on a copy of each row ends.
TEST(ServerTableTest, AdamRowsMatchTheOptimizerOnTheirOwnRows) {
  constexpr uint32_t kDim = 37;  // not a multiple of the vector width
  const TableSpec spec = RowSpec(kDim, ADAM);
  ServerTable t(spec, 0, 0);
  const Optimizer opt(spec.optimizer());
  const std::vector<uint64_t> both = {10, 20, 30}, once = {20};
  std::vector<float> g(both.size() * kDim);
  for (size_t i = 0; i < g.size(); ++i) g[i] = 0.01f * static_cast<float>(i % 11) - 0.05f;
  ASSERT_TRUE(t.PushRows(both.data(), both.size(), g.data()).ok());
  ASSERT_TRUE(t.PushRows(once.data(), once.size(), g.data()).ok());

  std::vector<float> out(both.size() * kDim);
  ASSERT_TRUE(t.PullRows(both.data(), both.size(), out.data()).ok());
  for (size_t i = 0; i < both.size(); ++i) {
    std::vector<float> w(kDim), state(opt.StateFloats(kDim));
    for (uint32_t j = 0; j < kDim; ++j) w[j] = InitialWeight(1, spec.id(), both[i], j, spec.init().bound());
    opt.InitState(state.data(), kDim);
    opt.Apply(w.data(), state.data(), g.data() + i * kDim, kDim);
    if (both[i] == 20) opt.Apply(w.data(), state.data(), g.data(), kDim);
    for (uint32_t j = 0; j < kDim; ++j) EXPECT_EQ(out[i * kDim + j], w[j]) << "key " << both[i] << " weight " << j;
  }
}

// ForEachRow visits every row once with its weights (not the optimizer
// state), creates nothing, and sees pushed values.
TEST(ServerTableTest, ForEachRowVisitsEveryRowWithItsWeights) {
  ServerTable t(RowSpec(2, SUM), 0, 0);
  const std::vector<uint64_t> keys = {3, 70, 1000003};
  std::vector<float> out(6);
  ASSERT_TRUE(t.PullRows(keys.data(), keys.size(), out.data()).ok());
  const std::vector<float> g = {1, 2, 0, 0, 0, 0};
  ASSERT_TRUE(t.PushRows(keys.data(), 1, g.data()).ok());
  std::map<uint64_t, std::vector<float>> seen;
  t.ForEachRow([&](uint64_t key, const float* w) {
    EXPECT_EQ(seen.count(key), 0u) << key;
    seen[key] = {w[0], w[1]};
  });
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(t.num_rows(), 3u);
  EXPECT_EQ(seen[3][0], out[0] + 1);  // SUM: w += g
  EXPECT_EQ(seen[3][1], out[1] + 2);
  EXPECT_EQ(seen[70], std::vector<float>({out[2], out[3]}));
  EXPECT_EQ(seen[1000003], std::vector<float>({out[4], out[5]}));
}

TEST(ServerTableTest, EmptyRequestsTouchNothing) {
  ServerTable t(RowSpec(4, ADAGRAD), 0, 0);
  ASSERT_TRUE(t.PushRows(nullptr, 0, nullptr).ok());
  ASSERT_TRUE(t.PullRows(nullptr, 0, nullptr).ok());
  EXPECT_EQ(t.num_rows(), 0u);
  EXPECT_EQ(t.version(), 1u);
}

TEST(ServerTableTest, DenseSliceAppliesTheOptimizer) {
  TableSpec spec;
  spec.set_id(1);
  spec.set_name("b");
  spec.set_kind(TableSpec::DENSE);
  spec.set_size(10);
  spec.mutable_init()->set_kind(TableInitializer::ZEROS);
  spec.mutable_optimizer()->set_type(SGD);
  spec.mutable_optimizer()->set_learning_rate(0.5f);
  ServerTable t(spec, 4, 7);  // this shard holds [4, 7)
  const float g[3] = {1.0f, -2.0f, 4.0f};
  ASSERT_TRUE(t.PushDense(g).ok());
  float out[3];
  t.PullDense(out);
  EXPECT_EQ(out[0], -0.5f);
  EXPECT_EQ(out[1], 1.0f);
  EXPECT_EQ(out[2], -2.0f);
  EXPECT_EQ(t.num_rows(), 0u);
}

// A shard never holds more rows than its index can address: a request that
// would cross the limit is refused whole (no row created, nothing applied),
// and rows that already exist stay usable.
TEST(ServerTableTest, RowsPastTheShardLimitAreRefusedWhole) {
  ServerTable t(RowSpec(2, SGD), 0, 0, /*max_rows=*/4);
  const std::vector<uint64_t> three = {1, 2, 3};
  std::vector<float> out(8);
  ASSERT_TRUE(t.PullRows(three.data(), 3, out.data()).ok());
  const std::vector<uint64_t> more = {3, 4, 5};  // 4 and 5 are new: 5 rows
  const std::vector<float> g(6, 1.0f);
  const Status st = t.PushRows(more.data(), 3, g.data());
  EXPECT_EQ(st.code(), Status::Code::kResourceExhausted);
  EXPECT_EQ(st.message(), "table w would hold 5 rows on this shard; the limit is 4 (use more servers)");
  EXPECT_EQ(t.num_rows(), 3u);
  EXPECT_EQ(t.version(), 0u);  // nothing applied
  EXPECT_EQ(t.PullRows(more.data(), 3, out.data()).code(), Status::Code::kResourceExhausted);
  const std::vector<uint64_t> fits = {3, 4};  // one new row: 4, at the limit
  ASSERT_TRUE(t.PushRows(fits.data(), 2, g.data()).ok());
  EXPECT_EQ(t.num_rows(), 4u);
  EXPECT_EQ(t.version(), 1u);
}

// C22: no non-finite value enters a table from the server's own step either.
// AdaGrad with h0 = 0 and ε = 0 (refused by config validation, but a table
// must not rely on that) computes 0/0 for a zero gradient: that row (weights
// and state) stays as it was, the push fails naming the table, the key, the
// optimizer and its settings, and the rows before it keep their updates
// (a whole-push undo copy cost 12 % of Bibtex's samples/s).
TEST(ServerTableTest, C22OptimizerStepThatMakesNaNLeavesTheRowAsItWas) {
  TableSpec spec = RowSpec(2, ADAGRAD);
  spec.mutable_optimizer()->set_initial_accumulator(0.0f);
  spec.mutable_optimizer()->set_epsilon(0.0f);
  ServerTable t(spec, 0, 0);
  const std::vector<uint64_t> keys = {4, 9};
  std::vector<float> before(4), after(4);
  ASSERT_TRUE(t.PullRows(keys.data(), 2, before.data()).ok());
  // Key 4 gets a full gradient; key 9's column 1 gets 0 → 0/0.
  const std::vector<float> g = {1.0f, -1.0f, 0.5f, 0.0f};
  const Status st = t.PushRows(keys.data(), 2, g.data());
  EXPECT_EQ(st.code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(st.message(),
            "table w: the server's ADAGRAD (learning_rate 0.25, initial_accumulator 0, epsilon 0, "
            "l2 0) step made key 9, column 1 NaN; that row was left as it was, and the push's 1 earlier "
            "row(s) kept their updates");
  EXPECT_EQ(t.version(), 1u);
  ASSERT_TRUE(t.PullRows(keys.data(), 2, after.data()).ok());
  for (float v : after) EXPECT_TRUE(std::isfinite(v));
  // Key 4 took its step (h = g², w -= lr·g/|g|); key 9 is as before.
  EXPECT_FLOAT_EQ(after[0], before[0] - 0.25f);
  EXPECT_FLOAT_EQ(after[1], before[1] + 0.25f);
  EXPECT_EQ(after[2], before[2]);
  EXPECT_EQ(after[3], before[3]);
  // Key 9's state was restored as well: a finite push applies exactly as on
  // a fresh row.
  const std::vector<uint64_t> nine = {9};
  const std::vector<float> ok = {0.5f, 2.0f};
  ASSERT_TRUE(t.PushRows(nine.data(), 1, ok.data()).ok());
  ASSERT_TRUE(t.PullRows(keys.data(), 2, after.data()).ok());
  EXPECT_FLOAT_EQ(after[2], before[2] - 0.25f);
  EXPECT_FLOAT_EQ(after[3], before[3] - 0.25f);
  EXPECT_EQ(t.version(), 2u);
}

// An overflow to infinity (a huge step on a finite gradient), in a dense
// slice: refused whole, naming the index in the whole table.
// Narrow SGD rows are applied in one gathered pass (Optimizer::ApplyGathered):
// the same bits as a row-by-row step, and an overflowing row is left as it
// was, named, with the rows before it updated.
TEST(ServerTableTest, C22NarrowSgdRowsGatheredAsRowByRow) {
  for (uint32_t dim : {1u, 3u}) {
    TableSpec spec = RowSpec(dim, SGD);
    spec.mutable_optimizer()->set_learning_rate(4.0f);
    spec.mutable_optimizer()->set_l2(0.125f);
    ServerTable t(spec, 0, 0);
    const std::vector<uint64_t> keys = {4, 9, 12};
    std::vector<float> before(3 * dim), after(3 * dim);
    ASSERT_TRUE(t.PullRows(keys.data(), 3, before.data()).ok());
    std::vector<float> g(3 * dim, 0.75f);
    g[dim + dim - 1] = 3e38f;  // key 9's last column: 4 · 3e38 overflows
    const Status st = t.PushRows(keys.data(), 3, g.data());
    EXPECT_EQ(st.code(), Status::Code::kFailedPrecondition);
    EXPECT_EQ(st.message(), "table w: the server's SGD (learning_rate 4, momentum 0, l2 0.125) step made key 9, column " +
                                std::to_string(dim - 1) +
                                " infinite; that row was left as it was, and the push's 1 earlier row(s) kept "
                                "their updates")
        << "dim " << dim;
    EXPECT_EQ(t.version(), 1u);
    ASSERT_TRUE(t.PullRows(keys.data(), 3, after.data()).ok());
    for (uint32_t j = 0; j < dim; ++j) {
      float w = before[j];
      Optimizer(spec.optimizer()).Apply(&w, nullptr, &g[j], 1);
      EXPECT_EQ(after[j], w);
      EXPECT_EQ(after[dim + j], before[dim + j]);
      EXPECT_EQ(after[2 * dim + j], before[2 * dim + j]);
    }
  }
}

// Rows without state that lie one after the other in the table (created in
// the order of a sorted key list) are stepped and pulled as spans: the same
// bits as a row-by-row step, for runs of every length (offsets partly
// swapped, so scattered rows sit between runs), and a row that overflows in
// the middle of a run is left as it was with the rows before it updated.
TEST(ServerTableTest, RowRunsSteppedAsRowByRow) {
  for (uint32_t dim : {1u, 3u, 64u, 1024u, 1500u}) {
    TableSpec spec = RowSpec(dim, SGD);
    spec.mutable_optimizer()->set_l2(0.125f);
    ServerTable t(spec, 0, 0);
    const uint64_t n = dim >= 1024 ? 9 : 2500;
    std::vector<uint64_t> keys(n);
    for (uint64_t i = 0; i < n; ++i) keys[i] = 1000 + 17 * i;
    std::vector<uint64_t> offsets;
    ASSERT_TRUE(t.ResolveRows(keys.data(), n, &offsets).ok());
    for (uint64_t i = 1; i < n; ++i) ASSERT_EQ(offsets[i], offsets[i - 1] + dim) << "rows created in key order";
    for (uint64_t i = 3; i + 1 < n; i += 7) {
      std::swap(offsets[i], offsets[i + 1]);
      std::swap(keys[i], keys[i + 1]);
    }
    std::vector<float> before(n * dim), after(n * dim), g(n * dim);
    for (uint64_t i = 0; i < g.size(); ++i) g[i] = 0.01f * static_cast<float>((i * 7) % 13) - 0.06f;
    t.PullRowsAt(offsets.data(), n, before.data());
    std::vector<float> by_key(n * dim);
    ASSERT_TRUE(t.PullRows(keys.data(), n, by_key.data()).ok());
    EXPECT_EQ(std::memcmp(before.data(), by_key.data(), before.size() * sizeof(float)), 0) << "dim " << dim;
    ASSERT_TRUE(t.PushRowsAt(offsets.data(), n, g.data(), 1.0f, keys.data()).ok());
    t.PullRowsAt(offsets.data(), n, after.data());
    const Optimizer opt(spec.optimizer());
    std::vector<float> want = before;
    for (uint64_t i = 0; i < n; ++i) ASSERT_TRUE(opt.Apply(&want[i * dim], nullptr, &g[i * dim], dim));
    EXPECT_EQ(std::memcmp(after.data(), want.data(), want.size() * sizeof(float)), 0) << "dim " << dim;

    // An overflow at row `bad`, inside a run (rows bad − 1, bad, bad + 1
    // are neighbours in the table).
    const uint64_t bad = n >= 100 ? 99 : 6;
    ASSERT_EQ(offsets[bad + 1], offsets[bad] + dim);
    ASSERT_EQ(offsets[bad], offsets[bad - 1] + dim);
    std::vector<float> huge = g;
    huge[bad * dim + dim / 2] = 3e38f;
    spec.mutable_optimizer()->set_learning_rate(4.0f);
    ServerTable u(spec, 0, 0);
    std::vector<uint64_t> u_offsets;
    std::vector<uint64_t> sorted = keys;
    std::sort(sorted.begin(), sorted.end());
    ASSERT_TRUE(u.ResolveRows(sorted.data(), n, &u_offsets).ok());
    for (uint64_t i = 0; i < n; ++i) ASSERT_EQ(u_offsets[i], i * dim) << "the same rows as t's";
    u.PullRowsAt(offsets.data(), n, before.data());
    const Status st = u.PushRowsAt(offsets.data(), n, huge.data(), 1.0f, keys.data());
    EXPECT_EQ(st.code(), Status::Code::kFailedPrecondition);
    EXPECT_NE(st.message().find("step made key " + std::to_string(keys[bad]) + ", column " +
                                std::to_string(dim / 2) + " infinite; that row was left as it was, and the push's " +
                                std::to_string(bad) + " earlier row(s) kept their updates"),
              std::string::npos)
        << st.message();
    u.PullRowsAt(offsets.data(), n, after.data());
    const Optimizer big(spec.optimizer());
    want = before;
    for (uint64_t i = 0; i < bad; ++i) ASSERT_TRUE(big.Apply(&want[i * dim], nullptr, &huge[i * dim], dim));
    EXPECT_EQ(std::memcmp(after.data(), want.data(), want.size() * sizeof(float)), 0) << "dim " << dim;
  }
}

// A push whose gradients come in pieces (a push the inbox kept as it came)
// steps every row as one call on the joined gradients does: the same bits,
// one version step, by keys and by resolved rows, for a gathered optimizer
// (SGD) and one with state (Adam); a row refused in a later piece is named
// by its index in the whole push; spans that do not hold n rows are refused.
TEST(ServerTableTest, RowSpansStepAsTheJoinedPush) {
  const uint32_t dim = 5;
  const uint64_t n = 23;
  std::vector<uint64_t> keys(n);
  for (uint64_t i = 0; i < n; ++i) keys[i] = 40 + 3 * ((i * 7) % n);
  std::vector<float> g(n * dim);
  for (uint64_t i = 0; i < g.size(); ++i) g[i] = 0.01f * static_cast<float>((i * 5) % 11) - 0.05f;
  const std::vector<uint64_t> cuts = {4, 0, 9, 1, 9};  // rows per span, one empty
  std::vector<ServerTable::GradientSpan> spans;
  for (uint64_t first = 0, c = 0; c < cuts.size(); first += cuts[c++]) spans.push_back({&g[first * dim], cuts[c]});
  for (OptimizerType type : {SGD, ADAM}) {
    for (bool resolved : {false, true}) {
      ServerTable whole(RowSpec(dim, type), 0, 0), pieces(RowSpec(dim, type), 0, 0);
      std::vector<uint64_t> offsets;
      ASSERT_TRUE(pieces.ResolveRows(keys.data(), n, &offsets).ok());
      ASSERT_TRUE(whole.ResolveRows(keys.data(), n, &offsets).ok());
      for (int round = 0; round < 3; ++round) {
        ASSERT_TRUE(whole.PushRows(keys.data(), n, g.data(), 0.5f, -1).ok());
        ASSERT_TRUE(pieces
                        .PushRowSpans(resolved ? nullptr : keys.data(), resolved ? offsets.data() : nullptr, n,
                                      spans.data(), spans.size(), 0.5f, -1)
                        .ok());
      }
      std::vector<float> a(n * dim), b(n * dim);
      ASSERT_TRUE(whole.PullRows(keys.data(), n, a.data()).ok());
      ASSERT_TRUE(pieces.PullRows(keys.data(), n, b.data()).ok());
      EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << type << " " << resolved;
      EXPECT_EQ(pieces.version(), 3u);
      EXPECT_EQ(pieces.version(), whole.version());
    }
  }
  // An overflow in the fourth span's row (whole-push index 13): rows 0-12
  // keep their steps, the version moves once, the message names row 13.
  TableSpec spec = RowSpec(dim, SGD);
  spec.mutable_optimizer()->set_learning_rate(4.0f);
  ServerTable t(spec, 0, 0);
  std::vector<float> huge = g;
  huge[13 * dim + 2] = 3e38f;
  std::vector<ServerTable::GradientSpan> huge_spans;
  for (uint64_t first = 0, c = 0; c < cuts.size(); first += cuts[c++]) huge_spans.push_back({&huge[first * dim], cuts[c]});
  const Status st = t.PushRowSpans(keys.data(), nullptr, n, huge_spans.data(), huge_spans.size(), 1.0f, -1);
  EXPECT_EQ(st.code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(st.message().find("step made key " + std::to_string(keys[13]) +
                              ", column 2 infinite; that row was left as it was, and the push's 13 earlier row(s) "
                              "kept their updates"),
            std::string::npos)
      << st.message();
  EXPECT_EQ(t.version(), 1u);
  // Spans of 22 rows for 23 keys: refused, nothing applied.
  ServerTable u(RowSpec(dim, SGD), 0, 0);
  std::vector<ServerTable::GradientSpan> short_spans = {{g.data(), 22}};
  const Status refused = u.PushRowSpans(keys.data(), nullptr, n, short_spans.data(), short_spans.size(), 1.0f, -1);
  EXPECT_EQ(refused.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(refused.message(), "table w: a push of 23 keys carries 22 rows of gradients");
  EXPECT_EQ(u.version(), 0u);
}

// PullRowsAt copies rows whose offsets follow one another as one span and
// the others row by row: every row read holds its own key's values, for
// runs of every length between swapped rows and for single scattered rows,
// at widths below, at and above the short-copy cut (16 floats).
TEST(ServerTableTest, PulledRunsHoldEachRowsOwnValues) {
  for (uint32_t dim : {1u, 3u, 15u, 16u, 17u, 64u, 2000u}) {
    TableSpec spec = RowSpec(dim, SUM);
    spec.mutable_init()->set_kind(TableInitializer::ZEROS);  // a row is what was pushed to it
    ServerTable t(spec, 0, 0);
    const uint64_t n = dim >= 1024 ? 12 : 900;
    std::vector<uint64_t> keys(n);
    for (uint64_t i = 0; i < n; ++i) keys[i] = 5 + 3 * i;
    std::vector<uint64_t> offsets;
    ASSERT_TRUE(t.ResolveRows(keys.data(), n, &offsets).ok());
    std::vector<float> g(n * dim);
    for (uint64_t i = 0; i < n; ++i)
      for (uint32_t j = 0; j < dim; ++j) g[i * dim + j] = static_cast<float>(keys[i] * 4096 + j);
    ASSERT_TRUE(t.PushRowsAt(offsets.data(), n, g.data(), 1.0f, keys.data()).ok());
    // Swap pairs at growing gaps: runs of 1, 2, 3, ... rows between them.
    for (uint64_t i = 1, gap = 1; i + 1 < n; gap += 1, i += gap + 2) {
      std::swap(offsets[i], offsets[i + 1]);
      std::swap(keys[i], keys[i + 1]);
    }
    std::vector<float> out(n * dim, -1.0f);
    t.PullRowsAt(offsets.data(), n, out.data());
    for (uint64_t i = 0; i < n; ++i)
      for (uint32_t j = 0; j < dim; ++j)
        ASSERT_EQ(out[i * dim + j], static_cast<float>(keys[i] * 4096 + j)) << "dim " << dim << ", row " << i;
  }
}

// NOOP (benchmarks) looks its rows up or creates them and leaves them as
// they are, at any width (no per-row pass over a wide row either).
TEST(ServerTableTest, NoopRowsStayAsTheyAre) {
  for (uint32_t dim : {1u, 64u, 4096u}) {
    ServerTable t(RowSpec(dim, NOOP), 0, 0);
    const std::vector<uint64_t> keys = {5, 6, 90};
    std::vector<float> before(3 * dim), after(3 * dim), g(3 * dim, 1.5f);
    ASSERT_TRUE(t.PullRows(keys.data(), 3, before.data()).ok());
    ASSERT_TRUE(t.PushRows(keys.data(), 3, g.data()).ok());
    EXPECT_EQ(t.version(), 1u);
    ASSERT_TRUE(t.PullRows(keys.data(), 3, after.data()).ok());
    EXPECT_EQ(std::memcmp(before.data(), after.data(), before.size() * sizeof(float)), 0) << "dim " << dim;
    EXPECT_EQ(after[0], InitialWeight(1, 3, 5, 0, 0.5f));
  }
}

// Key-list caching: rows resolved once (ResolveRows) are served and
// updated by offset with the same bits as by key, stay valid while the
// index grows and re-places its slots around them, and a step that
// overflows is still named by its key (found from the row).
TEST(ServerTableTest, ResolvedRowsMatchRowsByKeyThroughIndexGrowth) {
  for (auto [dim, type] : {std::pair<uint32_t, OptimizerType>{1, SGD}, {6, ADAM}}) {
    TableSpec spec = RowSpec(dim, type);
    ServerTable by_key(spec, 0, 0), by_offset(spec, 0, 0);
    std::mt19937_64 rng(17);
    std::vector<uint64_t> keys(400);
    for (auto& k : keys) k = rng();
    std::sort(keys.begin(), keys.end());
    std::vector<uint64_t> offsets;
    ASSERT_TRUE(by_offset.ResolveRows(keys.data(), keys.size(), &offsets).ok());
    ASSERT_EQ(offsets.size(), keys.size());
    EXPECT_TRUE(by_offset.ValidOffsets(offsets.data(), offsets.size()));
    std::vector<float> g(keys.size() * dim), a(keys.size() * dim), b(keys.size() * dim);
    for (int step = 0; step < 5; ++step) {
      for (size_t i = 0; i < g.size(); ++i) g[i] = 0.01f * static_cast<float>((i * 7 + step) % 13) - 0.06f;
      ASSERT_TRUE(by_key.PushRows(keys.data(), keys.size(), g.data()).ok());
      ASSERT_TRUE(by_offset.PushRowsAt(offsets.data(), keys.size(), g.data(), 1.0f, nullptr).ok());
      // Other keys all over the range: the index grows and re-places its
      // slots (and data_ reallocates) between the cached requests.
      std::vector<uint64_t> more(3000);
      for (auto& k : more) k = rng();
      std::sort(more.begin(), more.end());
      more.erase(std::unique(more.begin(), more.end()), more.end());
      std::vector<float> sink(more.size() * dim);
      ASSERT_TRUE(by_offset.PullRows(more.data(), more.size(), sink.data()).ok());
      ASSERT_TRUE(by_offset.ValidOffsets(offsets.data(), offsets.size()));
    }
    ASSERT_TRUE(by_key.PullRows(keys.data(), keys.size(), a.data()).ok());
    by_offset.PullRowsAt(offsets.data(), offsets.size(), b.data());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << "dim " << dim;
    ASSERT_TRUE(by_offset.PullRows(keys.data(), keys.size(), b.data()).ok());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << "dim " << dim;
    EXPECT_EQ(by_key.version(), 5u);
    EXPECT_EQ(by_offset.version(), 5u);
    // An offset past the rows is refused by the check.
    std::vector<uint64_t> bad = {by_offset.num_rows() * by_offset.stride()};
    EXPECT_FALSE(by_offset.ValidOffsets(bad.data(), 1));
  }
  // A step that overflows, by offset without keys: named by its key.
  TableSpec spec = RowSpec(1, SGD);
  spec.mutable_optimizer()->set_learning_rate(4.0f);
  ServerTable t(spec, 0, 0);
  const std::vector<uint64_t> keys = {4, 9, 12};
  std::vector<uint64_t> offsets;
  ASSERT_TRUE(t.ResolveRows(keys.data(), 3, &offsets).ok());
  const std::vector<float> g = {0.5f, 3e38f, 0.5f};
  const Status st = t.PushRowsAt(offsets.data(), 3, g.data(), 1.0f, nullptr);
  EXPECT_EQ(st.code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(st.message().find("step made key 9, column 0 infinite"), std::string::npos) << st.message();
}

TEST(ServerTableTest, C22OptimizerStepThatOverflowsADenseSliceAppliesNothing) {
  TableSpec spec;
  spec.set_id(1);
  spec.set_name("b");
  spec.set_kind(TableSpec::DENSE);
  spec.set_size(10);
  spec.mutable_init()->set_kind(TableInitializer::ZEROS);
  spec.mutable_optimizer()->set_type(SGD);
  spec.mutable_optimizer()->set_learning_rate(1e30f);
  ServerTable t(spec, 4, 7);
  const float g[3] = {1.0f, 1e10f, 1.0f};
  const Status st = t.PushDense(g);
  EXPECT_EQ(st.code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(st.message(),
            "table b: the server's SGD (learning_rate 1e+30, momentum 0, l2 0) step made index 5 "
            "infinite; nothing of this push was applied");
  float out[3];
  t.PullDense(out);
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_EQ(out[1], 0.0f);
  EXPECT_EQ(out[2], 0.0f);
  EXPECT_EQ(t.version(), 0u);
}

}  // namespace
}  // namespace tether
