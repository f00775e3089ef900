// RankingMetrics (P@k, nDCG@k) and BinaryMetrics (accuracy, AUC, log-loss)
// against values computed by hand.
#include "eval/metrics.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace tether {
namespace {

// Three rows over 5 labels, ks {1, 3, 5}.
//  Row 0: s = [0.9, 0.1, 0.8, 0.3, 0.2], Y = {0, 3}.
//    Ranking 0, 2, 3, 4, 1 → rel 1, 0, 1, 0, 0.
//    P@1 = 1, P@3 = 2/3, P@5 = 2/5.
//    DCG@1 = 1, IDCG@1 = 1 → nDCG@1 = 1.
//    DCG@3 = DCG@5 = 1 + 1/log2(4) = 1.5; IDCG@3 = IDCG@5 = 1 + 1/log2(3)
//    = 1.6309298 (|Y| = 2 positions) → nDCG@3 = nDCG@5 = 0.9197208.
//  Row 1: s = [0.5, 0.5, 0.5, 0.1, 0.9], Y = {1}  (a three-way tie).
//    Ranking 4, then the tie {0, 1, 2} (one of the three in Y: each of
//    positions 1-3 is relevant with probability 1/3), then 3 →
//    E[rel] 0, 1/3, 1/3, 1/3, 0 (C21: ties count by their expected value).
//    P@1 = 0, P@3 = 2/9, P@5 = 1/5. nDCG@1 = 0;
//    DCG@3 = (1/log2(3) + 1/log2(4)) / 3 = 0.3769766, IDCG = 1;
//    DCG@5 = (1/log2(3) + 1/log2(4) + 1/log2(5)) / 3 = 0.5205355.
//  Row 2: Y = {} → 0 for everything, but counted.
//  Means over 3 rows: P@1 = 1/3, P@3 = (2/3 + 2/9)/3 = 8/27,
//    P@5 = (0.4 + 0.2)/3 = 0.2; nDCG@1 = 1/3,
//    nDCG@3 = (0.9197208 + 0.3769766)/3 = 0.4322325,
//    nDCG@5 = (0.9197208 + 0.5205355)/3 = 0.4800854.
const std::vector<float> kScores = {0.9f, 0.1f, 0.8f, 0.3f, 0.2f,  //
                                    0.5f, 0.5f, 0.5f, 0.1f, 0.9f,  //
                                    0.7f, 0.6f, 0.5f, 0.4f, 0.3f};
const std::vector<int64_t> kRowPtr = {0, 2, 3, 3};
const std::vector<uint32_t> kColIdx = {0, 3, 1};

TEST(RankingMetricsTest, HandComputedThreeRows) {
  RankingMetrics m;
  m.Add(kScores.data(), 3, 5, kRowPtr.data(), kColIdx.data());
  EXPECT_EQ(m.count(), 3);
  EXPECT_NEAR(m.PrecisionAt(1), 1.0 / 3, 1e-12);
  EXPECT_NEAR(m.PrecisionAt(3), 8.0 / 27, 1e-12);
  EXPECT_NEAR(m.PrecisionAt(5), 0.2, 1e-12);
  EXPECT_NEAR(m.NdcgAt(1), 1.0 / 3, 1e-12);
  EXPECT_NEAR(m.NdcgAt(3), 0.4322325, 1e-7);
  EXPECT_NEAR(m.NdcgAt(5), 0.4800854, 1e-7);
  EXPECT_EQ(m.tied_rows(), 1);
}

// C21: ties no longer go to the smaller label index. s = [1, 1, 1]: with
// Y = {2} or Y = {0} alike, every position holds the true label with
// probability 1/3 → P@1 = P@3 = 1/3, nDCG@1 = 1/3,
// nDCG@3 = (1 + 1/log2(3) + 1/log2(4)) / 3 = 0.7103099.
TEST(RankingMetricsTest, C21TiesCountByTheirExpectedValueNotByLabelIndex) {
  const std::vector<float> s = {1, 1, 1};
  const std::vector<int64_t> rp = {0, 1};
  RankingMetrics last({1, 3}), first({1, 3});
  const uint32_t y_last = 2, y_first = 0;
  last.Add(s.data(), 1, 3, rp.data(), &y_last);
  first.Add(s.data(), 1, 3, rp.data(), &y_first);
  for (const RankingMetrics* m : {&last, &first}) {
    EXPECT_NEAR(m->PrecisionAt(1), 1.0 / 3, 1e-12);
    EXPECT_NEAR(m->PrecisionAt(3), 1.0 / 3, 1e-12);
    EXPECT_NEAR(m->NdcgAt(1), 1.0 / 3, 1e-12);
    EXPECT_NEAR(m->NdcgAt(3), 0.7103099, 1e-7);
    EXPECT_EQ(m->tied_rows(), 1);
  }
  // The case's constant model: 8 labels scored alike, one true label
  // (label 0 in one file, label 7 in the other): P@1 = 1/8 for both.
  const std::vector<float> flat(8, 0.0f);
  const std::vector<int64_t> rp1 = {0, 1};
  for (const uint32_t y : {0u, 7u}) {
    RankingMetrics m({1, 3, 5});
    m.Add(flat.data(), 1, 8, rp1.data(), &y);
    EXPECT_NEAR(m.PrecisionAt(1), 1.0 / 8, 1e-12) << y;
    EXPECT_NEAR(m.PrecisionAt(5), 1.0 / 8, 1e-12) << y;  // (5/8) / 5
  }
  // A tie that begins past the top max(ks) does not count as a tied row.
  const std::vector<float> tail = {0.9f, 0.8f, 0.1f, 0.1f};
  const uint32_t y = 0;
  RankingMetrics m({1});
  m.Add(tail.data(), 1, 4, rp.data(), &y);
  EXPECT_EQ(m.PrecisionAt(1), 1.0);
  EXPECT_EQ(m.tied_rows(), 0);
}

// The expected value is exact: it equals the mean over every order of the
// tied labels (all 5! = 120 tie-breaking orders of 5 labels), for rows with
// ties across and inside the cut-offs, NaN ties included.
TEST(RankingMetricsTest, C21TiesEqualTheMeanOverEveryTieBreakingOrder) {
  const float nan = std::nanf("");
  const std::vector<std::vector<float>> rows = {
      {0.5f, 0.5f, 0.9f, 0.5f, 0.1f}, {1, 1, 1, 1, 1}, {0.2f, nan, 0.7f, nan, 0.7f}, {3, 2, 2, 1, 1}};
  const std::vector<std::vector<uint32_t>> ys = {{0, 4}, {3}, {1, 2, 3}, {2, 3}};
  for (size_t r = 0; r < rows.size(); ++r) {
    const std::vector<float>& sc = rows[r];
    const std::vector<int64_t> rp = {0, static_cast<int64_t>(ys[r].size())};
    RankingMetrics expected({1, 2, 3, 5});
    expected.Add(sc.data(), 1, 5, rp.data(), ys[r].data());
    // Brute force: for each order π of the labels, rank by (score desc, NaN
    // last, then π), score it with the plain definitions, and average.
    std::vector<int> perm = {0, 1, 2, 3, 4};
    double p_sum[4] = {0, 0, 0, 0}, n_sum[4] = {0, 0, 0, 0};
    int orders = 0;
    do {
      std::vector<int> pos(5);
      for (int i = 0; i < 5; ++i) pos[perm[i]] = i;
      std::vector<int> rank = {0, 1, 2, 3, 4};
      std::sort(rank.begin(), rank.end(), [&](int a, int b) {
        const bool an = std::isnan(sc[a]), bn = std::isnan(sc[b]);
        if (an != bn) return bn;
        if (!an && sc[a] != sc[b]) return sc[a] > sc[b];
        return pos[a] < pos[b];
      });
      const int ks[4] = {1, 2, 3, 5};
      for (int c = 0; c < 4; ++c) {
        double hits = 0, dcg = 0, idcg = 0;
        for (int i = 0; i < ks[c]; ++i) {
          const bool rel = std::find(ys[r].begin(), ys[r].end(), static_cast<uint32_t>(rank[i])) != ys[r].end();
          hits += rel;
          dcg += rel / std::log2(i + 2.0);
          if (i < static_cast<int>(ys[r].size())) idcg += 1 / std::log2(i + 2.0);
        }
        p_sum[c] += hits / ks[c];
        n_sum[c] += dcg / idcg;
      }
      ++orders;
    } while (std::next_permutation(perm.begin(), perm.end()));
    const int ks[4] = {1, 2, 3, 5};
    for (int c = 0; c < 4; ++c) {
      EXPECT_NEAR(expected.PrecisionAt(ks[c]), p_sum[c] / orders, 1e-12) << "row " << r << " k " << ks[c];
      EXPECT_NEAR(expected.NdcgAt(ks[c]), n_sum[c] / orders, 1e-12) << "row " << r << " k " << ks[c];
    }
  }
}

TEST(RankingMetricsTest, EmptyLabelRowsCountAsZero) {
  RankingMetrics m({1});
  EXPECT_EQ(m.PrecisionAt(1), 0.0);  // nothing added yet
  const std::vector<float> s = {0.2f, 0.8f, 0.5f, 0.5f};
  const std::vector<int64_t> rp = {0, 0, 0};  // two rows, no labels
  m.Add(s.data(), 2, 2, rp.data(), nullptr);
  EXPECT_EQ(m.count(), 2);
  EXPECT_EQ(m.PrecisionAt(1), 0.0);
  EXPECT_EQ(m.NdcgAt(1), 0.0);
}

TEST(RankingMetricsTest, KLargerThanLabelCount) {
  // 2 labels, s = [0.1, 0.2], Y = {0}: ranking 1, 0 → P@5 = 1/5 (divided by
  // k, not by the labels available); nDCG@5 = (1/log2(3)) / 1 = 0.6309298.
  RankingMetrics m({5});
  const std::vector<float> s = {0.1f, 0.2f};
  const std::vector<int64_t> rp = {0, 1};
  const uint32_t y = 0;
  m.Add(s.data(), 1, 2, rp.data(), &y);
  EXPECT_NEAR(m.PrecisionAt(5), 0.2, 1e-12);
  EXPECT_NEAR(m.NdcgAt(5), 0.6309298, 1e-7);
}

TEST(RankingMetricsTest, RowSliceAndBatchesAndMergeEqualOneAccumulation) {
  // Rows 1..2 alone via a row_ptr that does not start at 0.
  RankingMetrics slice;
  slice.Add(kScores.data() + 5, 2, 5, kRowPtr.data() + 1, kColIdx.data());
  EXPECT_NEAR(slice.PrecisionAt(3), (2.0 / 9) / 2, 1e-12);  // row 1's tie: see the top
  EXPECT_NEAR(slice.NdcgAt(3), 0.3769766 / 2, 1e-7);

  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(0, 1);
  std::uniform_int_distribution<int> nlab(0, 4);
  const int64_t rows = 200, labels = 30;
  std::vector<float> s(rows * labels);
  for (float& v : s) v = u(rng);
  std::vector<int64_t> rp = {0};
  std::vector<uint32_t> ci;
  for (int64_t r = 0; r < rows; ++r) {
    const int n = nlab(rng);
    for (int i = 0; i < n; ++i) ci.push_back(static_cast<uint32_t>(7 * i + r % 7));
    rp.push_back(static_cast<int64_t>(ci.size()));
  }
  RankingMetrics all, a, b;
  all.Add(s.data(), rows, labels, rp.data(), ci.data());
  a.Add(s.data(), 70, labels, rp.data(), ci.data());
  b.Add(s.data() + 70 * labels, 60, labels, rp.data() + 70, ci.data());
  b.Add(s.data() + 130 * labels, rows - 130, labels, rp.data() + 130, ci.data());
  a.Merge(b);
  EXPECT_EQ(a.count(), all.count());
  for (int k : {1, 3, 5}) {
    EXPECT_NEAR(a.PrecisionAt(k), all.PrecisionAt(k), 1e-12) << k;
    EXPECT_NEAR(a.NdcgAt(k), all.NdcgAt(k), 1e-12) << k;
    EXPECT_GT(all.PrecisionAt(k), 0.0);
  }
  a.Reset();
  EXPECT_EQ(a.count(), 0);
  EXPECT_EQ(a.PrecisionAt(1), 0.0);
}

// Logits and ±1 labels:
//   s: 0.4(+) 0.3(−) 0.2(+) 0.2(−) −0.4(−) −0.2(+)
// AUC: positive 0.4 beats all 3 negatives → 3; positive 0.2 loses to 0.3,
//   ties 0.2 (½), beats −0.4 → 1.5; positive −0.2 beats only −0.4 → 1.
//   AUC = 5.5 / (3 · 3) = 0.6111111.
// Accuracy: predicted positive iff s > 0 → correct: 0.4(+), 0.2(+), −0.4(−)
//   → 3/6 = 0.5.
// Log-loss: positives softplus(−s), negatives softplus(s):
//   softplus(−0.4) + softplus(0.3) + softplus(−0.2) + softplus(0.2)
//   + softplus(−0.4) + softplus(0.2) = 0.5130153 + 0.8543552 + 0.5981389
//   + 0.7981389 + 0.5130153 + 0.7981389 = 4.0748024 → mean 0.6791337.
const std::vector<float> kLogits = {0.4f, 0.3f, 0.2f, 0.2f, -0.4f, -0.2f};
const std::vector<float> kSigns = {1, -1, 1, -1, -1, 1};

// PSP@k and PSnDCG@k (Jain, Prabhu & Varma, KDD 2016, as pyxclib), by hand.
// Weights w = 1/p_l = [1, 2, 4, 1.5] over 4 labels; ks {1, 3}; d_i =
// 1/log2(i + 2) = 1, 1/log2(3) = 0.6309298, 1/2.
//  Row 0: s = [0.9, 0.1, 0.5, 0.3], Y = {1, 2}. Ranking 0, 2, 3, 1 →
//    gains g = 0, 4, 0; best ranking of Y by weight: g* = 4, 2, 0.
//    IDCG@1 = 1, IDCG@3 = 1 + 0.6309298 = 1.6309298 (|Y| = 2).
//  Row 1: s = [0.2, 0.8, 0.8, 0.0], Y = {2}: labels 1 and 2 tie at the top
//    (G = 2, the group's weight in Y is 4) → g = 2, 2, then label 0 → 0;
//    g* = 4, 0, 0; IDCG@1 = IDCG@3 = 1.
//  PSP@1 = (0 + 2) / (4 + 4) = 0.25.
//  PSP@3 = ((0+4+0)/3 + (2+2+0)/3) / ((4+2+0)/3 + (4+0+0)/3) = 8 / 10 = 0.8.
//  PSnDCG@1 = (0 + 2) / (4 + 4) = 0.25.
//  PSnDCG@3 = (4·0.6309298/1.6309298 + (2 + 2·0.6309298)/1)
//           / ((4 + 2·0.6309298)/1.6309298 + 4/1)
//           = (1.5474112 + 3.2618595) / (3.2262944 + 4) = 0.6655238.
//  (Plain P@1 = (0 + 1/2)/2 = 0.25 is unchanged by the weights.)
TEST(RankingMetricsTest, PropensityScoredHandComputed) {
  const std::vector<float> scores = {0.9f, 0.1f, 0.5f, 0.3f,  //
                                     0.2f, 0.8f, 0.8f, 0.0f};
  const std::vector<int64_t> row_ptr = {0, 2, 3};
  const std::vector<uint32_t> col_idx = {1, 2, 2};
  RankingMetrics m({1, 3});
  m.SetInversePropensity({1.0, 2.0, 4.0, 1.5});
  ASSERT_TRUE(m.has_propensity());
  m.Add(scores.data(), 2, 4, row_ptr.data(), col_idx.data());
  const double d1 = 1.0 / std::log2(3.0);
  EXPECT_NEAR(m.PsPrecisionAt(1), 0.25, 1e-12);
  EXPECT_NEAR(m.PsPrecisionAt(3), 0.8, 1e-12);
  EXPECT_NEAR(m.PsNdcgAt(1), 0.25, 1e-12);
  const double expected = (4 * d1 / (1 + d1) + (2 + 2 * d1)) / ((4 + 2 * d1) / (1 + d1) + 4);
  EXPECT_NEAR(m.PsNdcgAt(3), expected, 1e-12);
  EXPECT_NEAR(m.PsNdcgAt(3), 0.6655238, 1e-6);
  EXPECT_NEAR(m.PrecisionAt(1), 0.25, 1e-12);

  // Row by row and merged gives the same sums.
  RankingMetrics a({1, 3}), b({1, 3});
  a.SetInversePropensity({1.0, 2.0, 4.0, 1.5});
  b.SetInversePropensity({1.0, 2.0, 4.0, 1.5});
  a.Add(scores.data(), 1, 4, row_ptr.data(), col_idx.data());
  b.Add(scores.data() + 4, 1, 4, row_ptr.data() + 1, col_idx.data());
  a.Merge(b);
  EXPECT_NEAR(a.PsPrecisionAt(3), 0.8, 1e-12);
  EXPECT_NEAR(a.PsNdcgAt(3), expected, 1e-12);
}

// A perfect ranking by weight scores 1; uniform weights make PSP@k the
// P@k normalised by the best P@k possible.
TEST(RankingMetricsTest, PropensityScoredPerfectAndUniform) {
  const std::vector<float> scores = {0.1f, 0.9f, 0.8f, 0.0f};  // 1, 2 on top
  const std::vector<int64_t> row_ptr = {0, 2};
  const std::vector<uint32_t> col_idx = {1, 2};
  RankingMetrics m({1, 3});
  m.SetInversePropensity({5.0, 3.0, 2.0, 1.0});
  m.Add(scores.data(), 1, 4, row_ptr.data(), col_idx.data());
  EXPECT_NEAR(m.PsPrecisionAt(1), 1.0, 1e-12);
  EXPECT_NEAR(m.PsPrecisionAt(3), 1.0, 1e-12);
  EXPECT_NEAR(m.PsNdcgAt(3), 1.0, 1e-12);
}

// pyxclib's compute_inv_propesity: w = 1 + C (N_l + B)^-A,
// C = (ln N − 1)(B + 1)^A. N = 100, A = 0.5, B = 1.5: C = (ln 100 − 1) ·
// sqrt(2.5) = 3.6051702 · 1.5811388 = 5.7002746; counts 0 and 9:
// w = 1 + C / sqrt(1.5) = 5.6542547, 1 + C / sqrt(10.5) = 2.7591429.
TEST(RankingMetricsTest, InversePropensityAsPyxclib) {
  const std::vector<double> w = InversePropensity({0, 9}, 100, 0.5, 1.5);
  ASSERT_EQ(w.size(), 2u);
  const double c = (std::log(100.0) - 1.0) * std::sqrt(2.5);
  EXPECT_NEAR(w[0], 1 + c / std::sqrt(1.5), 1e-12);
  EXPECT_NEAR(w[1], 1 + c / std::sqrt(10.5), 1e-12);
  EXPECT_NEAR(w[0], 5.6542547, 1e-6);
  EXPECT_NEAR(w[1], 2.7591429, 1e-6);
}

TEST(BinaryMetricsTest, HandComputed) {
  BinaryMetrics m;
  m.Add(kLogits.data(), kSigns.data(), 6);
  EXPECT_EQ(m.count(), 6);
  EXPECT_NEAR(m.Auc(), 5.5 / 9, 1e-12);
  EXPECT_NEAR(m.Accuracy(), 0.5, 1e-12);
  EXPECT_NEAR(m.LogLoss(), 0.6791337, 1e-6);
}

TEST(BinaryMetricsTest, MergeAndEdgeCases) {
  BinaryMetrics a, b;
  a.Add(kLogits.data(), kSigns.data(), 4);
  for (int i = 4; i < 6; ++i) b.Add(kLogits[i], kSigns[i] > 0 ? 1.0f : 0.0f);  // 1/0 labels too
  a.Merge(b);
  EXPECT_NEAR(a.Auc(), 5.5 / 9, 1e-12);
  EXPECT_NEAR(a.LogLoss(), 0.6791337, 1e-6);
  EXPECT_NEAR(a.Accuracy(), 0.5, 1e-12);

  BinaryMetrics only_pos;
  only_pos.Add(1.0f, 1.0f);
  EXPECT_TRUE(std::isnan(only_pos.Auc()));
  BinaryMetrics empty;
  EXPECT_EQ(empty.Accuracy(), 0.0);
  EXPECT_EQ(empty.LogLoss(), 0.0);
  // Perfect separation and huge logits: AUC 1, log-loss ~0 without overflow.
  BinaryMetrics perfect;
  perfect.Add(100.0f, 1.0f);
  perfect.Add(-100.0f, -1.0f);
  EXPECT_EQ(perfect.Auc(), 1.0);
  EXPECT_EQ(perfect.Accuracy(), 1.0);
  EXPECT_NEAR(perfect.LogLoss(), 0.0, 1e-40);
}

}  // namespace
}  // namespace tether
