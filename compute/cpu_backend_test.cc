// Every CpuBackend op against a naive double-precision reference on random
// inputs of several shapes (exact for top-k), the losses against values
// computed by hand, determinism, argument errors and the factory.
#include "compute/cpu_backend.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "compute/backend.h"

namespace tether {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

std::vector<float> RandomVector(int64_t n, std::mt19937* rng, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(*rng);
  return v;
}

// rows × cols CSR with each entry present with probability `density`,
// columns ascending, values uniform in [-1, 1].
CsrMatrix RandomCsr(int64_t rows, int64_t cols, double density, std::mt19937* rng) {
  std::bernoulli_distribution keep(density);
  std::uniform_real_distribution<float> val(-1.0f, 1.0f);
  CsrMatrix m;
  m.rows = rows;
  m.cols = cols;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      if (keep(*rng)) {
        m.col_idx.push_back(static_cast<uint32_t>(c));
        m.values.push_back(val(*rng));
      }
    }
    m.row_ptr.push_back(static_cast<int64_t>(m.col_idx.size()));
  }
  return m;
}

std::vector<double> Densify(const CsrView& a) {
  std::vector<double> d(a.rows * a.cols, 0.0);
  for (int64_t i = 0; i < a.rows; ++i) {
    for (int64_t p = a.row_ptr[i]; p < a.row_ptr[i + 1]; ++p) {
      d[i * a.cols + a.col_idx[p]] += a.values[p];
    }
  }
  return d;
}

// Compares with a tolerance relative to the magnitude of the summed terms
// (`scale`), which bounds float rounding of a sum of products.
void ExpectNear(const std::vector<float>& got, const std::vector<double>& want,
                const std::vector<double>& scale, const char* what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], 2e-6 * (scale[i] + 1.0)) << what << " at " << i;
  }
}

struct SpShape {
  int64_t m, k, n;
  double density;
};
// n = 105 = 64 + 32 + 8 + 1 takes every column block of the kernels.
const SpShape kSpShapes[] = {{1, 1, 1, 1.0},        {5, 7, 3, 0.4}, {33, 100, 17, 0.1},
                             {64, 1000, 256, 0.07}, {4, 9, 0, 0.5}, {0, 6, 4, 0.5},
                             {9, 30, 105, 0.3}};

TEST(CpuBackendTest, SpMMMatchesNaive) {
  CpuBackend be(1);
  std::mt19937 rng(1);
  for (const SpShape& s : kSpShapes) {
    for (float beta : {0.0f, 1.0f, -0.5f}) {
      const CsrMatrix a = RandomCsr(s.m, s.k, s.density, &rng);
      const std::vector<float> b = RandomVector(s.k * s.n, &rng);
      std::vector<float> c = RandomVector(s.m * s.n, &rng);
      if (beta == 0.0f) std::fill(c.begin(), c.end(), kNaN);  // must not be read
      const float alpha = 1.5f;
      const std::vector<double> ad = Densify(ViewOf(a));
      std::vector<double> want(s.m * s.n), scale(s.m * s.n);
      for (int64_t i = 0; i < s.m; ++i) {
        for (int64_t t = 0; t < s.n; ++t) {
          double acc = 0, mag = 0;
          for (int64_t j = 0; j < s.k; ++j) {
            acc += ad[i * s.k + j] * b[j * s.n + t];
            mag += std::fabs(ad[i * s.k + j] * b[j * s.n + t]);
          }
          const double c0 = beta == 0.0f ? 0.0 : c[i * s.n + t];
          want[i * s.n + t] = alpha * acc + beta * c0;
          scale[i * s.n + t] = std::fabs(alpha) * mag + std::fabs(beta * c0);
        }
      }
      ASSERT_TRUE(be.SpMM(ViewOf(a), b.data(), s.n, alpha, beta, c.data()).ok());
      ExpectNear(c, want, scale, "SpMM");
    }
  }
}

TEST(CpuBackendTest, SpMMTransposedMatchesNaive) {
  CpuBackend be(1);
  std::mt19937 rng(2);
  for (const SpShape& s : kSpShapes) {
    for (float beta : {0.0f, 1.0f, 2.0f}) {
      const CsrMatrix a = RandomCsr(s.m, s.k, s.density, &rng);
      const std::vector<float> d = RandomVector(s.m * s.n, &rng);
      std::vector<float> c = RandomVector(s.k * s.n, &rng);
      if (beta == 0.0f) std::fill(c.begin(), c.end(), kNaN);
      const float alpha = -0.75f;
      const std::vector<double> ad = Densify(ViewOf(a));
      std::vector<double> want(s.k * s.n), scale(s.k * s.n);
      for (int64_t j = 0; j < s.k; ++j) {
        for (int64_t t = 0; t < s.n; ++t) {
          double acc = 0, mag = 0;
          for (int64_t i = 0; i < s.m; ++i) {
            acc += ad[i * s.k + j] * d[i * s.n + t];
            mag += std::fabs(ad[i * s.k + j] * d[i * s.n + t]);
          }
          const double c0 = beta == 0.0f ? 0.0 : c[j * s.n + t];
          want[j * s.n + t] = alpha * acc + beta * c0;
          scale[j * s.n + t] = std::fabs(alpha) * mag + std::fabs(beta * c0);
        }
      }
      ASSERT_TRUE(be.SpMMTransposed(ViewOf(a), d.data(), s.n, alpha, beta, c.data()).ok());
      ExpectNear(c, want, scale, "SpMMTransposed");
    }
  }
}

TEST(CpuBackendTest, SpMMOnRowSliceAndDuplicateColumns) {
  CpuBackend be(1);
  // Rows: {0:1, 0:2} (duplicate column sums), {}, {2:-1}, {1:4}.
  CsrMatrix a;
  a.rows = 4;
  a.cols = 3;
  a.row_ptr = {0, 2, 2, 3, 4};
  a.col_idx = {0, 0, 2, 1};
  a.values = {1, 2, -1, 4};
  const std::vector<float> b = {1, 10, 2, 20, 3, 30};  // 3 × 2
  std::vector<float> c(2 * 2, kNaN);
  // Rows 1..2 only: row_ptr of the view starts at 2, not 0.
  ASSERT_TRUE(be.SpMM(RowSliceOf(a, 1, 3), b.data(), 2, 1.0f, 0.0f, c.data()).ok());
  EXPECT_EQ(c, (std::vector<float>{0, 0, -3, -30}));
  std::vector<float> full(4 * 2);
  ASSERT_TRUE(be.SpMM(ViewOf(a), b.data(), 2, 1.0f, 0.0f, full.data()).ok());
  EXPECT_EQ(full, (std::vector<float>{3, 30, 0, 0, -3, -30, 8, 80}));
  // Transposed on the same slice: c (3 × 2) = rows 1..2ᵀ · d; column 0 has
  // no entries there, so its row is zeroed (beta = 0) or scaled (beta = 2).
  const std::vector<float> d = {5, 6, 7, 8};  // 2 × 2
  std::vector<float> t(3 * 2, kNaN);
  ASSERT_TRUE(be.SpMMTransposed(RowSliceOf(a, 1, 3), d.data(), 2, 1.0f, 0.0f, t.data()).ok());
  EXPECT_EQ(t, (std::vector<float>{0, 0, 0, 0, -7, -8}));
  const std::vector<float> d4 = {1, 2, 3, 4, 5, 6, 7, 8};  // 4 × 2
  std::vector<float> t2 = {1, 1, 1, 1, 1, 1};
  ASSERT_TRUE(be.SpMMTransposed(ViewOf(a), d4.data(), 0, 1.0f, 2.0f, t2.data()).ok());
  EXPECT_EQ(t2, (std::vector<float>{1, 1, 1, 1, 1, 1}));  // n = 0: nothing to write
  ASSERT_TRUE(be.SpMMTransposed(ViewOf(a), d4.data(), 2, 1.0f, 2.0f, t2.data()).ok());
  // Column 0 ← row 0 twice (1 + 2)·(1, 2); column 1 ← row 3: 4·(7, 8);
  // column 2 ← row 2: −(5, 6); plus 2·1 everywhere.
  EXPECT_EQ(t2, (std::vector<float>{5, 8, 30, 34, -3, -4}));
}

TEST(CpuBackendTest, GemmMatchesNaiveForAllTransposes) {
  CpuBackend be(1);
  std::mt19937 rng(3);
  struct Shape {
    int64_t m, n, k;
  };
  for (const Shape s : {Shape{1, 1, 1}, Shape{7, 5, 3}, Shape{128, 159, 256}, Shape{3, 4, 0}}) {
    for (Transpose ta : {Transpose::kNo, Transpose::kYes}) {
      for (Transpose tb : {Transpose::kNo, Transpose::kYes}) {
        const bool tra = ta == Transpose::kYes, trb = tb == Transpose::kYes;
        // Padded strides exercise lda/ldb/ldc.
        const int64_t lda = (tra ? s.m : s.k) + 2, ldb = (trb ? s.k : s.n) + 1, ldc = s.n + 3;
        const std::vector<float> a = RandomVector((tra ? s.k : s.m) * lda, &rng);
        const std::vector<float> b = RandomVector((trb ? s.n : s.k) * ldb, &rng);
        std::vector<float> c = RandomVector(s.m * ldc, &rng);
        const std::vector<float> c0 = c;
        const float alpha = 0.5f, beta = -2.0f;
        std::vector<double> want(c.begin(), c.end()), scale(c.size());
        for (int64_t i = 0; i < s.m; ++i) {
          for (int64_t j = 0; j < s.n; ++j) {
            double acc = 0, mag = 0;
            for (int64_t p = 0; p < s.k; ++p) {
              const double x = tra ? a[p * lda + i] : a[i * lda + p];
              const double y = trb ? b[j * ldb + p] : b[p * ldb + j];
              acc += x * y;
              mag += std::fabs(x * y);
            }
            want[i * ldc + j] = alpha * acc + beta * c0[i * ldc + j];
            scale[i * ldc + j] = std::fabs(alpha) * mag + std::fabs(beta * c0[i * ldc + j]);
          }
        }
        ASSERT_TRUE(
            be.Gemm(ta, tb, s.m, s.n, s.k, alpha, a.data(), lda, b.data(), ldb, beta, c.data(), ldc)
                .ok());
        ExpectNear(c, want, scale, "Gemm");  // padding columns must be untouched too
      }
    }
  }
}

TEST(CpuBackendTest, BiasColumnSumAndRelu) {
  CpuBackend be(1);
  std::mt19937 rng(4);
  const int64_t rows = 9, cols = 13;
  std::vector<float> x = RandomVector(rows * cols, &rng);
  const std::vector<float> bias = RandomVector(cols, &rng);
  std::vector<float> want = x;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < cols; ++j) want[r * cols + j] += bias[j];
  }
  ASSERT_TRUE(be.AddBias(rows, cols, bias.data(), x.data()).ok());
  EXPECT_EQ(x, want);  // one float add each: exact

  std::vector<float> sums(cols, kNaN);
  ASSERT_TRUE(be.ColumnSum(rows, cols, x.data(), 0.0f, sums.data()).ok());
  for (int64_t j = 0; j < cols; ++j) {
    double s = 0;
    for (int64_t r = 0; r < rows; ++r) s += x[r * cols + j];
    EXPECT_NEAR(sums[j], s, 1e-5);
  }
  std::vector<float> sums2(cols, 1.0f);
  ASSERT_TRUE(be.ColumnSum(rows, cols, x.data(), 3.0f, sums2.data()).ok());
  for (int64_t j = 0; j < cols; ++j) EXPECT_NEAR(sums2[j], sums[j] + 3.0f, 1e-5);

  const std::vector<float> z = {-1.0f, 0.0f, 2.5f, -0.0f, kNaN, 1e-30f};
  std::vector<float> y(z.size());
  ASSERT_TRUE(be.Relu(6, z.data(), y.data()).ok());
  EXPECT_EQ(y, (std::vector<float>{0, 0, 2.5f, 0, 0, 1e-30f}));
  std::vector<float> dy = {1, 2, 3, 4, 5, 6};
  ASSERT_TRUE(be.ReluBackward(6, y.data(), dy.data()).ok());
  EXPECT_EQ(dy, (std::vector<float>{0, 0, 3, 0, 0, 6}));
  std::vector<float> inplace = z;
  ASSERT_TRUE(be.Relu(6, inplace.data(), inplace.data()).ok());
  EXPECT_EQ(inplace, y);
}

// Dropout with a fixed seed: the mask is DropoutKeeps(seed, i, threshold),
// about 1 − rate of the elements kept, each scaled by 1 / (1 − rate); a
// second call with the same seed (the backward pass) keeps the same ones.
TEST(CpuBackendTest, DropoutMaskWithAFixedSeed) {
  CpuBackend be(1);
  constexpr int64_t kN = 100000;
  std::vector<float> x(kN, 1.0f);
  ASSERT_TRUE(be.Dropout(kN, 0.5f, 42, x.data()).ok());
  int64_t kept = 0;
  for (int64_t i = 0; i < kN; ++i) {
    const bool keeps = DropoutKeeps(42, static_cast<uint64_t>(i), DropoutThreshold(0.5f));
    ASSERT_EQ(x[i], keeps ? 2.0f : 0.0f) << i;
    kept += keeps ? 1 : 0;
  }
  EXPECT_EQ(kept, 49936);  // this hash's draw for seed 42: within 0.2 % of half
  EXPECT_EQ(DropoutThreshold(0.5f), 1u << 23);
  EXPECT_EQ(DropoutThreshold(0.0f), 0u);
  // The same seed again on a gradient: the same mask and scale.
  std::vector<float> dy(kN, 3.0f);
  ASSERT_TRUE(be.Dropout(kN, 0.5f, 42, dy.data()).ok());
  for (int64_t i = 0; i < kN; ++i) ASSERT_EQ(dy[i], x[i] * 3.0f) << i;
  // Another seed, another mask; rate 0 touches nothing.
  std::vector<float> other(kN, 1.0f);
  ASSERT_TRUE(be.Dropout(kN, 0.5f, 43, other.data()).ok());
  EXPECT_NE(other, x);
  std::vector<float> same(kN, 1.0f);
  ASSERT_TRUE(be.Dropout(kN, 0.0f, 42, same.data()).ok());
  EXPECT_EQ(same, std::vector<float>(kN, 1.0f));
  // A quarter dropped: kept values scaled by 1/0.75.
  std::vector<float> q(8, 3.0f);
  ASSERT_TRUE(be.Dropout(8, 0.25f, 7, q.data()).ok());
  for (int i = 0; i < 8; ++i)
    EXPECT_EQ(q[i], DropoutKeeps(7, static_cast<uint64_t>(i), DropoutThreshold(0.25f)) ? 3.0f * (1.0f / 0.75f) : 0.0f);
  EXPECT_EQ(be.Dropout(1, 1.0f, 1, q.data()).message(), "Dropout: rate 1.000000 outside [0, 1)");
}

// Labels as CSR: row r holds the listed columns.
CsrMatrix Labels(int64_t cols, const std::vector<std::vector<uint32_t>>& rows) {
  CsrMatrix y;
  y.rows = static_cast<int64_t>(rows.size());
  y.cols = cols;
  for (const auto& r : rows) {
    y.col_idx.insert(y.col_idx.end(), r.begin(), r.end());
    y.row_ptr.push_back(static_cast<int64_t>(y.col_idx.size()));
  }
  return y;  // values empty: the losses ignore them
}

TEST(CpuBackendTest, SoftmaxCrossEntropyHandComputed) {
  CpuBackend be(1);
  // Row 0: s = [1, 2, 3], Y = {2}.  logsumexp = 3 + log(e^-2 + e^-1 + 1)
  //   = 3 + log(1.5032147) = 3.4076059; loss = 3.4076059 − 3 = 0.4076059.
  //   p = [e^1, e^2, e^3] / (e^1 + e^2 + e^3) = [0.0900306, 0.2447285, 0.6652410];
  //   d = p − [0, 0, 1] = [0.0900306, 0.2447285, −0.3347590].
  // Row 1: s = [0, 0, 0], Y = {0, 2}: target [1/2, 0, 1/2]; loss = log 3 − 0
  //   = 1.0986123; d = [1/3 − 1/2, 1/3, 1/3 − 1/2] = [−1/6, 1/3, −1/6].
  // Row 2: s = [5, −1, 2], Y = {}: loss 0, d = 0.
  // Total loss = 0.4076059 + 1.0986123 = 1.5062182. grad_scale 0.5 halves d.
  const std::vector<float> s = {1, 2, 3, 0, 0, 0, 5, -1, 2};
  const CsrMatrix y = Labels(3, {{2}, {0, 2}, {}});
  std::vector<float> d(9, kNaN);
  double loss = -1;
  ASSERT_TRUE(be.SoftmaxCrossEntropy(3, 3, s.data(), ViewOf(y), 0.5f, d.data(), &loss).ok());
  EXPECT_NEAR(loss, 1.5062182, 1e-6);
  const double want[] = {0.0900306, 0.2447285, -0.3347590, -1.0 / 6, 1.0 / 3, -1.0 / 6, 0, 0, 0};
  for (int i = 0; i < 9; ++i) EXPECT_NEAR(d[i], 0.5 * want[i], 1e-6) << i;

  // In place and loss-only give the same numbers.
  std::vector<float> inplace = s;
  double loss2 = -1, loss3 = -1;
  ASSERT_TRUE(
      be.SoftmaxCrossEntropy(3, 3, inplace.data(), ViewOf(y), 0.5f, inplace.data(), &loss2).ok());
  EXPECT_EQ(0, std::memcmp(inplace.data(), d.data(), 9 * sizeof(float)));
  ASSERT_TRUE(be.SoftmaxCrossEntropy(3, 3, s.data(), ViewOf(y), 0.5f, nullptr, &loss3).ok());
  EXPECT_EQ(loss, loss2);
  EXPECT_EQ(loss, loss3);

  // Large scores must not overflow: s = [1000, 0], Y = {0} → loss ≈ e^-1000 ≈ 0.
  const std::vector<float> big = {1000, 0};
  const CsrMatrix y1 = Labels(2, {{0}});
  ASSERT_TRUE(be.SoftmaxCrossEntropy(1, 2, big.data(), ViewOf(y1), 1.0f, nullptr, &loss).ok());
  EXPECT_NEAR(loss, 0.0, 1e-12);
}

// Label smoothing ε = 0.3 on the rows above: t' = 0.7·t + 0.1.
// Row 0: t' = [0.1, 0.1, 0.8]; loss = 3.4076059 − (0.1 + 0.2 + 2.4) = 0.7076059;
//   d = p − t' = [−0.0099694, 0.1447285, −0.1347590].
// Row 1: t' = [0.45, 0.1, 0.45]; loss = log 3 = 1.0986123;
//   d = [1/3 − 0.45, 1/3 − 0.1, 1/3 − 0.45]. Row 2 (no labels): 0, as before.
TEST(CpuBackendTest, SmoothedSoftmaxCrossEntropyHandComputed) {
  CpuBackend be(1);
  const std::vector<float> s = {1, 2, 3, 0, 0, 0, 5, -1, 2};
  const CsrMatrix y = Labels(3, {{2}, {0, 2}, {}});
  std::vector<float> d(9, kNaN);
  double loss = -1;
  ASSERT_TRUE(be.SoftmaxCrossEntropy(3, 3, s.data(), ViewOf(y), 1.0f, d.data(), &loss, 0.3f).ok());
  EXPECT_NEAR(loss, 0.7076059 + 1.0986123, 1e-6);
  const double want[] = {-0.0099694, 0.1447285, -0.1347590, 1.0 / 3 - 0.45, 1.0 / 3 - 0.1, 1.0 / 3 - 0.45, 0, 0, 0};
  for (int i = 0; i < 9; ++i) EXPECT_NEAR(d[i], want[i], 1e-6) << i;
  // ε = 0 is the unsmoothed loss, bit for bit.
  std::vector<float> d0(9), d1(9);
  double l0 = 0, l1 = 0;
  ASSERT_TRUE(be.SoftmaxCrossEntropy(3, 3, s.data(), ViewOf(y), 0.5f, d0.data(), &l0, 0.0f).ok());
  ASSERT_TRUE(be.SoftmaxCrossEntropy(3, 3, s.data(), ViewOf(y), 0.5f, d1.data(), &l1).ok());
  EXPECT_EQ(l0, l1);
  EXPECT_EQ(0, std::memcmp(d0.data(), d1.data(), 9 * sizeof(float)));
}

// ε = 0.2: targets y' = 0.8·y + 0.1. s = [0, 2], Y = {1}: y' = [0.1, 0.9];
// loss = softplus(0) + softplus(2) − 0.9·2 = 0.6931472 + 2.1269280 − 1.8;
// d = [0.5 − 0.1, sigmoid(2) − 0.9] = [0.4, −0.0192029].
TEST(CpuBackendTest, SmoothedSigmoidCrossEntropyHandComputed) {
  CpuBackend be(1);
  const std::vector<float> s = {0, 2};
  const CsrMatrix y = Labels(2, {{1}});
  std::vector<float> d(2, kNaN);
  double loss = -1;
  ASSERT_TRUE(be.SigmoidCrossEntropy(1, 2, s.data(), ViewOf(y), 1.0f, d.data(), &loss, 0.2f).ok());
  EXPECT_NEAR(loss, 0.6931472 + 2.1269280 - 1.8, 1e-6);
  EXPECT_NEAR(d[0], 0.4, 1e-6);
  EXPECT_NEAR(d[1], -0.0192029, 1e-6);
}

TEST(CpuBackendTest, SigmoidCrossEntropyHandComputed) {
  CpuBackend be(1);
  // Row 0: s = [0, 2, −1], Y = {1}:
  //   loss = softplus(0) + (softplus(2) − 2) + softplus(−1)
  //        = log 2 + log(1 + e^-2) + log(1 + e^-1)
  //        = 0.6931472 + 0.1269280 + 0.3132617 = 1.1333369;
  //   d = [σ(0), σ(2) − 1, σ(−1)] = [0.5, −0.1192029, 0.2689414].
  // Row 1: s = [100, −100, 0], Y = {} (all negative):
  //   loss = softplus(100) + softplus(−100) + log 2 = 100 + 3.7e-44 + 0.6931472;
  //   d = [σ(100), σ(−100), σ(0)] = [1, 3.7e-44, 0.5].
  const std::vector<float> s = {0, 2, -1, 100, -100, 0};
  const CsrMatrix y = Labels(3, {{1}, {}});
  std::vector<float> d(6, kNaN);
  double loss = -1;
  ASSERT_TRUE(be.SigmoidCrossEntropy(2, 3, s.data(), ViewOf(y), 1.0f, d.data(), &loss).ok());
  EXPECT_NEAR(loss, 1.1333369 + 100.6931472, 1e-5);
  const double want[] = {0.5, -0.1192029, 0.2689414, 1.0, 0.0, 0.5};
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(d[i], want[i], 1e-6) << i;

  std::vector<float> inplace = s;
  double loss2 = -1;
  ASSERT_TRUE(
      be.SigmoidCrossEntropy(2, 3, inplace.data(), ViewOf(y), 1.0f, inplace.data(), &loss2).ok());
  EXPECT_EQ(0, std::memcmp(inplace.data(), d.data(), 6 * sizeof(float)));
  EXPECT_EQ(loss, loss2);
}

TEST(CpuBackendTest, LossesMatchNaiveOnRandomInputs) {
  CpuBackend be(1);
  std::mt19937 rng(5);
  const int64_t rows = 37, cols = 159;
  const std::vector<float> s = RandomVector(rows * cols, &rng, -8.0f, 8.0f);
  CsrMatrix y = RandomCsr(rows, cols, 0.03, &rng);
  const float scale = 1.0f / rows;
  std::vector<float> d(rows * cols);
  double loss = 0;
  ASSERT_TRUE(be.SoftmaxCrossEntropy(rows, cols, s.data(), ViewOf(y), scale, d.data(), &loss).ok());
  double want_loss = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t ny = y.row_ptr[r + 1] - y.row_ptr[r];
    std::vector<double> t(cols, 0.0);
    for (int64_t p = y.row_ptr[r]; p < y.row_ptr[r + 1]; ++p) t[y.col_idx[p]] = 1.0 / ny;
    double z = 0;
    for (int64_t j = 0; j < cols; ++j) z += std::exp(static_cast<double>(s[r * cols + j]));
    for (int64_t j = 0; j < cols; ++j) {
      const double p = std::exp(static_cast<double>(s[r * cols + j])) / z;
      if (ny > 0) want_loss -= t[j] * std::log(p);
      const double want_d = ny > 0 ? scale * (p - t[j]) : 0.0;
      ASSERT_NEAR(d[r * cols + j], want_d, 1e-7) << r << "," << j;
    }
  }
  EXPECT_NEAR(loss, want_loss, 1e-9 * rows * cols * 8);

  ASSERT_TRUE(be.SigmoidCrossEntropy(rows, cols, s.data(), ViewOf(y), scale, d.data(), &loss).ok());
  want_loss = 0;
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<double> t(cols, 0.0);
    for (int64_t p = y.row_ptr[r]; p < y.row_ptr[r + 1]; ++p) t[y.col_idx[p]] = 1.0;
    for (int64_t j = 0; j < cols; ++j) {
      const double x = s[r * cols + j];
      const double p = 1.0 / (1.0 + std::exp(-x));
      want_loss -= t[j] * std::log(p) + (1 - t[j]) * std::log(1 - p);
      ASSERT_NEAR(d[r * cols + j], scale * (p - t[j]), 1e-7) << r << "," << j;
    }
  }
  EXPECT_NEAR(loss, want_loss, 1e-6 * want_loss);
}

// Reference top-k: stable sort of all indices by the documented order.
std::vector<uint32_t> NaiveTopK(const float* s, int64_t cols, int k) {
  std::vector<uint32_t> idx(cols);
  std::iota(idx.begin(), idx.end(), 0u);
  auto key = [s](uint32_t i) {
    return std::isnan(s[i]) ? -std::numeric_limits<double>::infinity() : double{s[i]};
  };
  std::stable_sort(idx.begin(), idx.end(), [&](uint32_t a, uint32_t b) {
    const bool an = std::isnan(s[a]), bn = std::isnan(s[b]);
    if (an != bn) return bn;
    return key(a) > key(b);
  });
  idx.resize(k);
  return idx;
}

TEST(CpuBackendTest, TopKExactIncludingTiesAndNaN) {
  CpuBackend be(1);
  std::mt19937 rng(6);
  std::uniform_int_distribution<int> few(0, 4);  // many ties
  for (int64_t cols : {1, 2, 5, 159, 1000}) {
    for (int k : {1, 3, 5, 159}) {
      if (k > cols) continue;
      const int64_t rows = 11;
      std::vector<float> s = RandomVector(rows * cols, &rng);
      for (int64_t i = 0; i < rows * cols; i += 3) s[i] = static_cast<float>(few(rng));
      for (int64_t i = 5; i < rows * cols; i += 17) s[i] = kNaN;
      std::vector<uint32_t> got(rows * k);
      ASSERT_TRUE(be.TopK(rows, cols, s.data(), k, got.data()).ok());
      for (int64_t r = 0; r < rows; ++r) {
        const std::vector<uint32_t> want = NaiveTopK(s.data() + r * cols, cols, k);
        ASSERT_EQ(std::vector<uint32_t>(got.begin() + r * k, got.begin() + (r + 1) * k), want)
            << "cols " << cols << " k " << k << " row " << r;
      }
    }
  }
  // Hand example: ties go to the smaller index.
  const std::vector<float> s = {1, 3, 3, 2, 3};
  std::vector<uint32_t> got(4);
  ASSERT_TRUE(be.TopK(1, 5, s.data(), 4, got.data()).ok());
  EXPECT_EQ(got, (std::vector<uint32_t>{1, 2, 4, 3}));
}

TEST(CpuBackendTest, BitIdenticalAcrossCalls) {
  CpuBackend be(1);
  std::mt19937 rng(7);
  const CsrMatrix a = RandomCsr(64, 500, 0.1, &rng);
  const std::vector<float> b = RandomVector(500 * 64, &rng);
  const std::vector<float> w = RandomVector(64 * 159, &rng);
  std::vector<float> c1(64 * 64), c2(64 * 64), g1(500 * 64), g2(500 * 64), z1(64 * 159),
      z2(64 * 159);
  for (auto* out : {&c1, &c2}) {
    ASSERT_TRUE(be.SpMM(ViewOf(a), b.data(), 64, 1.0f, 0.0f, out->data()).ok());
  }
  for (auto* out : {&g1, &g2}) {
    ASSERT_TRUE(be.SpMMTransposed(ViewOf(a), c1.data(), 64, 1.0f, 0.0f, out->data()).ok());
  }
  for (auto* out : {&z1, &z2}) {
    ASSERT_TRUE(be.Gemm(Transpose::kNo, Transpose::kNo, 64, 159, 64, 1.0f, c1.data(), 64, w.data(),
                        159, 0.0f, out->data(), 159)
                    .ok());
  }
  EXPECT_EQ(0, std::memcmp(c1.data(), c2.data(), c1.size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(g1.data(), g2.data(), g1.size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(z1.data(), z2.data(), z1.size() * sizeof(float)));
}

TEST(CpuBackendTest, RejectsBadArguments) {
  CpuBackend be(1);
  CsrMatrix a;
  a.rows = 1;
  a.cols = 3;
  a.row_ptr = {0, 1};
  a.col_idx = {3};  // out of range
  a.values = {1.0f};
  std::vector<float> b(3 * 2), c(2);
  Status st = be.SpMM(ViewOf(a), b.data(), 2, 1.0f, 0.0f, c.data());
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(st.message().find("column index 3"), std::string::npos) << st.ToString();
  EXPECT_EQ(be.SpMMTransposed(ViewOf(a), c.data(), 2, 1.0f, 0.0f, b.data()).code(),
            Status::Code::kInvalidArgument);
  a.col_idx = {0};
  a.values.clear();  // SpMM needs values
  EXPECT_EQ(be.SpMM(ViewOf(a), b.data(), 2, 1.0f, 0.0f, c.data()).code(),
            Status::Code::kInvalidArgument);
  EXPECT_EQ(be.Gemm(Transpose::kNo, Transpose::kNo, 2, 2, 3, 1.0f, b.data(), 2, b.data(), 2, 0.0f,
                    c.data(), 2)
                .code(),
            Status::Code::kInvalidArgument);  // lda 2 < k 3
  const std::vector<float> s(6);
  std::vector<uint32_t> idx(6);
  EXPECT_EQ(be.TopK(2, 3, s.data(), 4, idx.data()).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(be.TopK(2, 3, s.data(), 0, idx.data()).code(), Status::Code::kInvalidArgument);
  const CsrMatrix y = Labels(3, {{0}});  // 1 row, scores have 2
  double loss;
  EXPECT_EQ(be.SoftmaxCrossEntropy(2, 3, s.data(), ViewOf(y), 1.0f, nullptr, &loss).code(),
            Status::Code::kInvalidArgument);
  const CsrMatrix y_bad = Labels(3, {{0}, {7}});
  EXPECT_EQ(be.SigmoidCrossEntropy(2, 3, s.data(), ViewOf(y_bad), 1.0f, nullptr, &loss).code(),
            Status::Code::kInvalidArgument);
}

TEST(CreateBackendTest, DeviceFlagValues) {
  StatusOr<std::unique_ptr<Backend>> cpu = CreateBackend("cpu");
  ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
  EXPECT_EQ(cpu.value()->name(), "cpu");

  StatusOr<std::unique_ptr<Backend>> bad = CreateBackend("gpu");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("--device"), std::string::npos);

  StatusOr<std::unique_ptr<Backend>> cuda = CreateBackend("cuda");
  StatusOr<std::unique_ptr<Backend>> autod = CreateBackend("auto");
  ASSERT_TRUE(autod.ok()) << autod.status().ToString();
  if (cuda.ok()) {
    EXPECT_EQ(autod.value()->name().rfind("cuda", 0), 0u);
  } else {
    // No CUDA build or no device: a clear Unavailable, and auto falls back.
    EXPECT_EQ(cuda.status().code(), Status::Code::kUnavailable);
    EXPECT_NE(cuda.status().message().find("--device=cuda"), std::string::npos)
        << cuda.status().ToString();
    EXPECT_EQ(autod.value()->name(), "cpu");
  }
}

}  // namespace
}  // namespace tether
