// Every Backend op of every backend against the CPU backend (house style:
// ggml's test-backend-ops), on fresh random inputs of several shapes:
// norm-wise relative error ||got − cpu||₂ / ||cpu||₂ ≤ 1e-5 for float
// outputs (fp32; summation orders differ between backends), exact for top-k
// on distinct scores and for the element-wise ops.
//
// Instantiated for "cpu" (a second CpuBackend: exact, and it keeps this
// harness honest on machines without a GPU) and "cuda" (created through
// CreateBackend, as --device=cuda does). Without a usable CUDA device, or in
// a build without CUDA, every "cuda" case is reported SKIPPED with the
// reason, never silently absent.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "sparse/backend.h"
#include "sparse/cpu_backend.h"

namespace tether {
namespace {

constexpr double kTol = 1e-5;

class BackendOpsTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    StatusOr<std::unique_ptr<Backend>> b = CreateBackend(GetParam(), 1);
    if (!b.ok()) {
      ASSERT_NE(GetParam(), "cpu") << b.status().ToString();
      GTEST_SKIP() << "backend '" << GetParam() << "' not available here: " << b.status().message();
    }
    dev_ = std::move(b).value();
    rng_.seed(std::hash<std::string>()(::testing::UnitTest::GetInstance()->current_test_info()->name()));
  }

  std::vector<float> Random(int64_t n, float lo = -1.0f, float hi = 1.0f) {
    std::uniform_real_distribution<float> d(lo, hi);
    std::vector<float> v(n);
    for (float& x : v) x = d(rng_);
    return v;
  }

  CsrMatrix RandomCsr(int64_t rows, int64_t cols, double density) {
    std::bernoulli_distribution keep(density);
    std::uniform_real_distribution<float> val(-1.0f, 1.0f);
    CsrMatrix m;
    m.cols = cols;
    std::vector<uint32_t> idx;
    std::vector<float> v;
    for (int64_t r = 0; r < rows; ++r) {
      idx.clear();
      v.clear();
      for (int64_t c = 0; c < cols; ++c) {
        if (keep(rng_)) {
          idx.push_back(static_cast<uint32_t>(c));
          v.push_back(val(rng_));
        }
      }
      m.AppendRow(idx.data(), v.data(), idx.size());
    }
    return m;
  }

  std::unique_ptr<Backend> dev_;
  CpuBackend cpu_{1};
  std::mt19937 rng_;
};

// ||got − want||₂ / ||want||₂ (absolute when want is all zero).
double RelErr(const float* got, const float* want, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    num += (double{got[i]} - want[i]) * (double{got[i]} - want[i]);
    den += double{want[i]} * want[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}
double RelErr(const std::vector<float>& got, const std::vector<float>& want) {
  EXPECT_EQ(got.size(), want.size());
  return RelErr(got.data(), want.data(), std::min(got.size(), want.size()));
}

TEST_P(BackendOpsTest, SpMMAndTransposedMatchCpu) {
  // (m, k, n, density): single element, odd sizes, Bibtex-like batch, n = 1
  // (logistic regression), no non-zeros, n = 0.
  for (auto [m, k, n, density] : {std::tuple<int64_t, int64_t, int64_t, double>{1, 1, 1, 1.0},
                                  {7, 13, 5, 0.3},
                                  {64, 1836, 256, 0.04},
                                  {128, 1000, 1, 0.05},
                                  {33, 100, 17, 0.0},
                                  {5, 8, 0, 0.5}}) {
    SCOPED_TRACE("m=" + std::to_string(m) + " k=" + std::to_string(k) + " n=" + std::to_string(n));
    const CsrMatrix a = RandomCsr(m, k, density);
    const std::vector<float> b = Random(k * n), d = Random(m * n);
    for (float beta : {0.0f, 0.7f}) {
      std::vector<float> c_dev = Random(m * n), c_cpu = c_dev;
      ASSERT_TRUE(dev_->SpMM(ViewOf(a), b.data(), n, 1.5f, beta, c_dev.data()).ok());
      ASSERT_TRUE(cpu_.SpMM(ViewOf(a), b.data(), n, 1.5f, beta, c_cpu.data()).ok());
      EXPECT_LE(RelErr(c_dev, c_cpu), kTol);
      std::vector<float> t_dev = Random(k * n), t_cpu = t_dev;
      ASSERT_TRUE(dev_->SpMMTransposed(ViewOf(a), d.data(), n, -1.0f, beta, t_dev.data()).ok());
      ASSERT_TRUE(cpu_.SpMMTransposed(ViewOf(a), d.data(), n, -1.0f, beta, t_cpu.data()).ok());
      EXPECT_LE(RelErr(t_dev, t_cpu), kTol);
    }
  }
  // A row slice (row_ptr not starting at 0), as the trainer's minibatches.
  const CsrMatrix a = RandomCsr(40, 30, 0.2);
  const std::vector<float> b = Random(30 * 8), d = Random(10 * 8);
  std::vector<float> g(10 * 8), c(10 * 8), tg(30 * 8), tc(30 * 8);
  ASSERT_TRUE(dev_->SpMM(RowSliceOf(a, 20, 30), b.data(), 8, 1.0f, 0.0f, g.data()).ok());
  ASSERT_TRUE(cpu_.SpMM(RowSliceOf(a, 20, 30), b.data(), 8, 1.0f, 0.0f, c.data()).ok());
  EXPECT_LE(RelErr(g, c), kTol);
  ASSERT_TRUE(dev_->SpMMTransposed(RowSliceOf(a, 20, 30), d.data(), 8, 1.0f, 0.0f, tg.data()).ok());
  ASSERT_TRUE(cpu_.SpMMTransposed(RowSliceOf(a, 20, 30), d.data(), 8, 1.0f, 0.0f, tc.data()).ok());
  EXPECT_LE(RelErr(tg, tc), kTol);
}

TEST_P(BackendOpsTest, GemmMatchesCpu) {
  // (m, n, k): 1 × 1 × 1, odd, the XMC output layer, the MNIST input layer.
  for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{1, 1, 1},
                         {17, 33, 9},
                         {128, 159, 256},
                         {128, 512, 784},
                         {3, 4, 0}}) {
    for (Transpose ta : {Transpose::kNo, Transpose::kYes}) {
      for (Transpose tb : {Transpose::kNo, Transpose::kYes}) {
        SCOPED_TRACE("m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k) +
                     (ta == Transpose::kYes ? " Aᵀ" : "") + (tb == Transpose::kYes ? " Bᵀ" : ""));
        const bool tra = ta == Transpose::kYes, trb = tb == Transpose::kYes;
        // Padded strides: the ops must respect lda/ldb/ldc.
        const int64_t lda = std::max<int64_t>(1, tra ? m : k) + 1, ldb = std::max<int64_t>(1, trb ? k : n) + 2,
                      ldc = n + 3;
        const std::vector<float> a = Random((tra ? k : m) * lda), b = Random((trb ? n : k) * ldb);
        for (float beta : {0.0f, -1.0f}) {
          std::vector<float> c_dev = Random(m * ldc), c_cpu = c_dev;
          ASSERT_TRUE(
              dev_->Gemm(ta, tb, m, n, k, 0.5f, a.data(), lda, b.data(), ldb, beta, c_dev.data(), ldc).ok());
          ASSERT_TRUE(
              cpu_.Gemm(ta, tb, m, n, k, 0.5f, a.data(), lda, b.data(), ldb, beta, c_cpu.data(), ldc).ok());
          EXPECT_LE(RelErr(c_dev, c_cpu), kTol);
          for (int64_t i = 0; i < m; ++i)  // the padding between rows is untouched
            for (int64_t j = n; j < ldc && i * ldc + j < static_cast<int64_t>(c_dev.size()); ++j)
              ASSERT_EQ(c_dev[i * ldc + j], c_cpu[i * ldc + j]);
        }
      }
    }
  }
}

TEST_P(BackendOpsTest, ElementwiseOpsMatchCpu) {
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1, 1}, {37, 159}, {128, 512}, {1000, 3}}) {
    SCOPED_TRACE("rows=" + std::to_string(rows) + " cols=" + std::to_string(cols));
    const std::vector<float> x = Random(rows * cols), bias = Random(cols);
    std::vector<float> g = x, c = x;
    ASSERT_TRUE(dev_->AddBias(rows, cols, bias.data(), g.data()).ok());
    ASSERT_TRUE(cpu_.AddBias(rows, cols, bias.data(), c.data()).ok());
    EXPECT_EQ(g, c);  // one IEEE addition per element: exact everywhere
    for (float beta : {0.0f, 2.0f}) {
      std::vector<float> sg = Random(cols), sc = sg;
      ASSERT_TRUE(dev_->ColumnSum(rows, cols, x.data(), beta, sg.data()).ok());
      ASSERT_TRUE(cpu_.ColumnSum(rows, cols, x.data(), beta, sc.data()).ok());
      EXPECT_LE(RelErr(sg, sc), kTol);
    }
    ASSERT_TRUE(dev_->Relu(rows * cols, x.data(), g.data()).ok());
    ASSERT_TRUE(cpu_.Relu(rows * cols, x.data(), c.data()).ok());
    EXPECT_EQ(g, c);
    std::vector<float> in_place = x;
    ASSERT_TRUE(dev_->Relu(rows * cols, in_place.data(), in_place.data()).ok());
    EXPECT_EQ(in_place, c);
    const std::vector<float> dy = Random(rows * cols);
    std::vector<float> dg = dy, dc = dy;
    ASSERT_TRUE(dev_->ReluBackward(rows * cols, g.data(), dg.data()).ok());
    ASSERT_TRUE(cpu_.ReluBackward(rows * cols, c.data(), dc.data()).ok());
    EXPECT_EQ(dg, dc);
  }
}

TEST_P(BackendOpsTest, LossesMatchCpu) {
  // (rows, cols, label density): one row of two classes, the XMC output,
  // one-hot-like classes, wide rows.
  for (auto [rows, cols, density] : {std::tuple<int64_t, int64_t, double>{1, 2, 0.5},
                                     {64, 159, 0.02},
                                     {128, 10, 0.1},
                                     {3, 1000, 0.01}}) {
    SCOPED_TRACE("rows=" + std::to_string(rows) + " cols=" + std::to_string(cols));
    const std::vector<float> s = Random(rows * cols, -6, 6);
    const CsrMatrix y = RandomCsr(rows, cols, density);
    for (bool softmax : {true, false}) {
      auto run = [&](Backend* be, float* d, double* loss) {
        return softmax ? be->SoftmaxCrossEntropy(rows, cols, s.data(), ViewOf(y), 0.5f, d, loss)
                       : be->SigmoidCrossEntropy(rows, cols, s.data(), ViewOf(y), 0.5f, d, loss);
      };
      std::vector<float> dg(rows * cols), dc(rows * cols);
      double lg = 0, lc = 0;
      ASSERT_TRUE(run(dev_.get(), dg.data(), &lg).ok());
      ASSERT_TRUE(run(&cpu_, dc.data(), &lc).ok());
      EXPECT_LE(std::fabs(lg - lc), kTol * std::max(1.0, std::fabs(lc))) << (softmax ? "softmax" : "sigmoid");
      EXPECT_LE(RelErr(dg, dc), kTol) << (softmax ? "softmax" : "sigmoid");
      double loss_only = 0;  // dscores null: loss only
      ASSERT_TRUE(run(dev_.get(), nullptr, &loss_only).ok());
      EXPECT_LE(std::fabs(loss_only - lc), kTol * std::max(1.0, std::fabs(lc)));
    }
  }
}

TEST_P(BackendOpsTest, TopKIsExactOnDistinctScores) {
  for (auto [rows, cols, k] :
       {std::tuple<int64_t, int64_t, int>{1, 5, 1}, {64, 159, 5}, {10, 1000, 10}, {3, 7, 7}}) {
    SCOPED_TRACE("rows=" + std::to_string(rows) + " cols=" + std::to_string(cols) + " k=" + std::to_string(k));
    // Distinct scores: a random permutation of distinct values per row.
    std::vector<float> s(rows * cols);
    std::vector<int> perm(cols);
    for (int64_t r = 0; r < rows; ++r) {
      std::iota(perm.begin(), perm.end(), 0);
      std::shuffle(perm.begin(), perm.end(), rng_);
      for (int64_t j = 0; j < cols; ++j) s[r * cols + j] = 0.25f * static_cast<float>(perm[j]) - 3.0f;
    }
    std::vector<uint32_t> ig(rows * k), ic(rows * k);
    ASSERT_TRUE(dev_->TopK(rows, cols, s.data(), k, ig.data()).ok());
    ASSERT_TRUE(cpu_.TopK(rows, cols, s.data(), k, ic.data()).ok());
    EXPECT_EQ(ig, ic);
    for (int64_t r = 0; r < rows; ++r)  // and it is right, not just equal
      EXPECT_EQ(s[r * cols + ic[r * k]], 0.25f * static_cast<float>(cols - 1) - 3.0f);
  }
}

TEST_P(BackendOpsTest, HostBuffersFromTheBackendWorkAsOperands) {
  // The models keep pulled parameters in HostArray (pinned on CUDA).
  const int64_t m = 32, k = 200, n = 64;
  const CsrMatrix a = RandomCsr(m, k, 0.05);
  const std::vector<float> b = Random(k * n);
  HostArray<float> b_host(dev_.get()), c_host(dev_.get());
  ASSERT_TRUE(b_host.Resize(b.size()).ok());
  ASSERT_TRUE(c_host.Resize(m * n).ok());
  ASSERT_EQ(reinterpret_cast<uintptr_t>(b_host.data()) % 64, 0u);
  std::copy(b.begin(), b.end(), b_host.data());
  ASSERT_TRUE(dev_->SpMM(ViewOf(a), b_host.data(), n, 1.0f, 0.0f, c_host.data()).ok());
  std::vector<float> c(m * n);
  ASSERT_TRUE(cpu_.SpMM(ViewOf(a), b.data(), n, 1.0f, 0.0f, c.data()).ok());
  EXPECT_LE(RelErr(c_host.data(), c.data(), c.size()), kTol);
  // Shrinking keeps the allocation; growing replaces it.
  const float* before = b_host.data();
  ASSERT_TRUE(b_host.Resize(10).ok());
  EXPECT_EQ(b_host.data(), before);
  EXPECT_EQ(b_host.size(), 10u);
  ASSERT_TRUE(b_host.Resize(b.size() * 3).ok());
  EXPECT_EQ(b_host.size(), b.size() * 3);
  HostArray<float> empty(dev_.get());
  ASSERT_TRUE(empty.Resize(0).ok());
  EXPECT_EQ(empty.data(), nullptr);
}

INSTANTIATE_TEST_SUITE_P(Backends, BackendOpsTest, ::testing::Values("cpu", "cuda"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace tether
