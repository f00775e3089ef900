// PushEncoder (worker/client/push_encoder.h): 16-bit pushes gathered,
// scaled and rounded in one pass; with error feedback, what a shard
// receives over n pushes of a row sums to the n float32 gradients to within
// one final rounding (Seide et al. 2014; Karimireddy et al. 2019), where
// without it the rounding errors add up.
#include "worker/client/push_encoder.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/wire_codec.h"
#include "worker/client/push_encoder_testing.h"

namespace tether {
namespace {

using push_testing::Pool;
using push_testing::RowTable;

std::vector<float> Decoded(const zmq::message_t& f, WireEncoding e) {
  std::vector<float> out(f.size() / WireBytesPerValue(e));
  DecodeValues(f.data(), out.size(), e, out.data());
  return out;
}

// n pushes of one row of `dim`; returns, per column, Σ received − Σ sent in
// float32 (as doubles), and the final residual.
struct Sums {
  std::vector<double> gap;        // Σ received − Σ gradients
  std::vector<double> bound;      // the accumulated float32 rounding of g + r, bounded
  std::vector<float> residual;
  std::vector<float> last_sent;
};

Sums PushOneRow(WireEncoding wire, bool feedback, int n, float bias) {
  const uint32_t dim = 4;
  PushEncoder enc({RowTable(wire, feedback, dim)}, 1 << 20);
  FramePool pool = Pool();
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  Sums s;
  s.gap.assign(dim, 0.0);
  s.bound.assign(dim, 0.0);
  const uint64_t key = 42;
  for (int k = 0; k < n; ++k) {
    std::vector<float> g(dim);
    for (float& x : g) x = bias + 0.01f * u(rng);
    const std::vector<float> got = Decoded(enc.EncodeRows(0, &key, 1, g.data(), nullptr, 1.0f, &pool), wire);
    for (uint32_t j = 0; j < dim; ++j) {
      s.gap[j] += static_cast<double>(got[j]) - static_cast<double>(g[j]);
      s.bound[j] += std::ldexp(std::fabs(static_cast<double>(got[j])) + 1.0, -23);
    }
    s.last_sent = got;
  }
  const float* r = enc.residuals(0) != nullptr ? enc.residuals(0)->Find(key) : nullptr;
  s.residual.assign(dim, 0.0f);
  if (r != nullptr) s.residual.assign(r, r + dim);
  return s;
}

TEST(PushEncoderTest, ErrorFeedbackSumsToTheGradientsWithinOneFinalRounding) {
  for (const WireEncoding wire : {BF16, FP16}) {
    // 1.001 is no 16-bit value: every push of it rounds the same way.
    const Sums s = PushOneRow(wire, /*feedback=*/true, 1000, 1.001f);
    for (size_t j = 0; j < s.gap.size(); ++j) {
      // Σ received + final residual = Σ gradients, to float32's additions.
      EXPECT_LE(std::fabs(s.gap[j] + s.residual[j]), s.bound[j]) << WireEncodingName(wire) << " column " << j;
      // The final residual is at most half a 16-bit ulp of the last value.
      const double half_ulp = std::ldexp(std::fabs(s.last_sent[j]), wire == BF16 ? -8 : -11);
      EXPECT_LE(std::fabs(s.residual[j]), half_ulp) << WireEncodingName(wire) << " column " << j;
      EXPECT_LE(std::fabs(s.gap[j]), half_ulp + s.bound[j]) << WireEncodingName(wire) << " column " << j;
    }
  }
}

TEST(PushEncoderTest, WithoutFeedbackTheRoundingErrorsAddUp) {
  const Sums s = PushOneRow(BF16, /*feedback=*/false, 1000, 1.001f);
  // Around 1.001 ± 0.01 bfloat16's values lie 2^-8 and 2^-7 apart, and
  // most of the gradients round down: 0.17 to 0.25 lost over 1,000 pushes
  // (seed 5), against at most half an ulp (0.004) with error feedback.
  for (size_t j = 0; j < s.gap.size(); ++j) EXPECT_GT(std::fabs(s.gap[j]), 0.1) << j;
  EXPECT_EQ(s.residual, std::vector<float>(4, 0.0f));
}

TEST(PushEncoderTest, GathersScalesAndCountsSaturation) {
  PushEncoder enc({RowTable(FP16, /*feedback=*/false, 2)}, 1 << 20);
  FramePool pool = Pool();
  const std::vector<float> grads = {1, 2, 3, 4, 5, 6, 40000, 7};  // four rows of 2
  const uint64_t keys[2] = {10, 20};
  const uint32_t rows[2] = {3, 1};
  const std::vector<float> got = Decoded(enc.EncodeRows(0, keys, 2, grads.data(), rows, 2.0f, &pool), FP16);
  EXPECT_EQ(got, (std::vector<float>{65504, 14, 6, 8}));
  EXPECT_EQ(enc.stats().saturated, 1u);
  EXPECT_EQ(enc.residuals(0), nullptr);
}

TEST(PushEncoderTest, DenseTablesKeepAResidualPerValue) {
  PushEncoder::Table t;
  t.wire = BF16;
  t.error_feedback = true;
  t.dense = true;
  t.size = 6;
  PushEncoder enc({t}, 1 << 20);
  FramePool pool = Pool();
  const std::vector<float> g(6, 1.001f);
  double sum = 0;
  for (int k = 0; k < 100; ++k) sum += Decoded(enc.EncodeDense(0, 2, 5, g.data(), 1.0f, &pool), BF16)[1];
  EXPECT_NEAR(sum + enc.dense_residuals(0)[3], 100 * 1.001, 1e-3);
  EXPECT_EQ(enc.dense_residuals(0)[0], 0.0f);  // outside the slice pushed
}

TEST(PushEncoderTest, Fp32TablesAreNotNarrowed) {
  PushEncoder enc({RowTable(FP32, true, 3), RowTable(BF16, true, 3)}, 1 << 20);
  EXPECT_FALSE(enc.narrows(0));
  EXPECT_TRUE(enc.narrows(1));
  EXPECT_EQ(enc.residuals(0), nullptr);
  ASSERT_NE(enc.residuals(1), nullptr);
  // The store is bounded by the bytes given: 1 MiB / (3 floats + bookkeeping).
  EXPECT_EQ(enc.residuals(1)->capacity_rows(), (1u << 20) / (12 + 60));
  EXPECT_FALSE(enc.narrows(7));
}

// A checkpoint's residuals restored into a new encoder: its next pushes are
// bit for bit those of the encoder that kept going.
TEST(PushEncoderTest, RestoredResidualsPushWhatTheOriginalWould) {
  auto tables = [] {
    PushEncoder::Table rows = RowTable(BF16, true, 3);
    rows.name = "w";
    PushEncoder::Table dense;
    dense.name = "b";
    dense.wire = BF16;
    dense.error_feedback = true;
    dense.dense = true;
    dense.size = 4;
    PushEncoder::Table plain = RowTable(FP32, false, 2);
    plain.name = "v";
    return std::vector<PushEncoder::Table>{rows, dense, plain};
  };
  PushEncoder a(tables(), 1 << 20);
  FramePool pool = Pool();
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  auto push = [&](PushEncoder* enc, const std::vector<float>& g) {
    const uint64_t keys[2] = {4, 17};
    std::vector<float> out = Decoded(enc->EncodeRows(0, keys, 2, g.data(), nullptr, 0.5f, &pool), BF16);
    const std::vector<float> d = Decoded(enc->EncodeDense(1, 0, 4, g.data(), 0.5f, &pool), BF16);
    out.insert(out.end(), d.begin(), d.end());
    return out;
  };
  std::vector<float> g(6);
  for (int k = 0; k < 5; ++k) {
    for (float& x : g) x = u(rng);
    push(&a, g);
  }
  const std::vector<ResidualTable> saved = a.SaveResiduals();
  ASSERT_EQ(saved.size(), 2u);  // the float32 table keeps none
  EXPECT_EQ(saved[0].table, "w");
  EXPECT_EQ(saved[0].keys.size(), 2u);
  EXPECT_TRUE(saved[1].dense);
  PushEncoder b(tables(), 1 << 20);
  EXPECT_TRUE(b.RestoreResiduals(saved).empty());
  for (int k = 0; k < 3; ++k) {
    for (float& x : g) x = u(rng);
    EXPECT_EQ(push(&a, g), push(&b, g)) << "push " << k << " after the restore";
  }
  // Restored into an encoder that pushes float32 now: skipped, named.
  PushEncoder::Table w32 = RowTable(FP32, false, 3);
  w32.name = "w";
  PushEncoder fp32({w32}, 1 << 20);
  EXPECT_EQ(fp32.RestoreResiduals({saved[0]}), (std::vector<std::string>{"w"}));
}

// Pushes naming their key list (EncodeRows' `list`, the residual store's
// known runs) send bit for bit what pushes without it send, and keep the
// same residuals: a list repeated, gathered through `rows`, then replaced
// by a changed list and by the same keys in another object.
TEST(PushEncoderTest, NamedListsPushWhatUnnamedOnesWould) {
  PushEncoder named({RowTable(BF16, true, 2)}, 1 << 20), plain({RowTable(BF16, true, 2)}, 1 << 20);
  FramePool pool = Pool();
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<uint64_t> keys;
  for (uint64_t k = 0; k < 300; ++k) keys.push_back(10 + 3 * k);
  auto list = std::make_shared<const std::vector<uint64_t>>(keys);
  std::vector<uint32_t> rows(keys.size());
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<uint32_t>(i < 100 ? i : i + 5);  // a gap
  std::vector<float> g((keys.size() + 5) * 2);
  double sent = 0, given = 0;  // key 370's first column
  for (int k = 0; k < 12; ++k) {
    if (k == 6) {  // a changed list: one key replaced
      keys[150] = 7;
      list = std::make_shared<const std::vector<uint64_t>>(keys);
    } else if (k == 9) {  // the same keys in another object
      list = std::make_shared<const std::vector<uint64_t>>(keys);
    }
    for (float& x : g) x = 1.0f + 0.01f * u(rng);
    const uint32_t* at = k % 2 == 0 ? nullptr : rows.data();
    const std::vector<float> a =
        Decoded(named.EncodeRows(0, keys.data(), keys.size(), g.data(), at, 0.5f, &pool, list), BF16);
    const std::vector<float> b = Decoded(plain.EncodeRows(0, keys.data(), keys.size(), g.data(), at, 0.5f, &pool), BF16);
    ASSERT_EQ(a, b) << "push " << k;
    sent += a[2 * 120];
    given += 0.5 * g[2 * (k % 2 == 0 ? 120 : 125)];
  }
  // Pushes 2–5 took the list's known run (push 1 found it in one run).
  // The changed list's rows lay in three runs (its new key's row last), at
  // pushes 7 and 8 alike: laid out as one run after push 8. Its keys under
  // another object (push 9) were compared once, then known (10, 11).
  EXPECT_EQ(named.residuals(0)->known_runs(), 6u);
  EXPECT_EQ(plain.residuals(0)->known_runs(), 0u);
  // Error feedback: what was sent plus what is left is what was given.
  EXPECT_NEAR(sent + named.residuals(0)->Find(keys[120])[0], given, 1e-5);
  EXPECT_NE(named.residuals(0)->Find(keys[120])[0], 0.0f);
  std::vector<std::pair<uint64_t, float>> ra, rb;
  named.residuals(0)->ForEachRow([&](uint64_t key, const float* v) { ra.emplace_back(key, v[1]); });
  plain.residuals(0)->ForEachRow([&](uint64_t key, const float* v) { rb.emplace_back(key, v[1]); });
  EXPECT_EQ(ra, rb);
  EXPECT_EQ(ra.size(), 301u);
}

}  // namespace
}  // namespace tether
