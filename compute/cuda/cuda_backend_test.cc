// The CUDA backend against the CPU backend, op by op, on random inputs
// (house style: ggml's test-backend-ops). Skips when no GPU is visible.
#include "compute/cuda/cuda_backend.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <tuple>
#include <vector>

#include "compute/cpu_backend.h"

namespace tether {
namespace {

class CudaBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device visible";
    StatusOr<std::unique_ptr<Backend>> b = CreateCudaBackend(0);
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    gpu_ = std::move(b).value();
  }
  std::unique_ptr<Backend> gpu_;
  CpuBackend cpu_{1};
  std::mt19937 rng_{42};

  std::vector<float> Random(int64_t n, float lo = -1, float hi = 1) {
    std::uniform_real_distribution<float> d(lo, hi);
    std::vector<float> v(n);
    for (float& x : v) x = d(rng_);
    return v;
  }
  CsrMatrix RandomCsr(int64_t rows, int64_t cols, double density) {
    std::bernoulli_distribution keep(density);
    CsrMatrix m;
    m.rows = rows;
    m.cols = cols;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) {
        if (keep(rng_)) {
          m.col_idx.push_back(static_cast<uint32_t>(c));
          m.values.push_back(Random(1)[0]);
        }
      }
      m.row_ptr.push_back(static_cast<int64_t>(m.col_idx.size()));
    }
    return m;
  }
};

void ExpectClose(const std::vector<float>& a, const std::vector<float>& b, float tol) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], tol * (1 + std::fabs(b[i]))) << i;
}

TEST_F(CudaBackendTest, NameAndFactory) { EXPECT_EQ(gpu_->name(), "cuda:0"); }

TEST_F(CudaBackendTest, SparseProductsMatchCpu) {
  for (auto [m, k, n] : {std::tuple<int64_t, int64_t, int64_t>{1, 1, 1},
                         {33, 100, 17},
                         {128, 1000, 256},
                         {5, 8, 0}}) {
    const CsrMatrix a = RandomCsr(m, k, 0.07);
    const std::vector<float> b = Random(k * n), d = Random(m * n);
    for (float beta : {0.0f, 0.5f}) {
      std::vector<float> c_gpu = Random(m * n), c_cpu = c_gpu;
      ASSERT_TRUE(gpu_->SpMM(ViewOf(a), b.data(), n, 1.5f, beta, c_gpu.data()).ok());
      ASSERT_TRUE(cpu_.SpMM(ViewOf(a), b.data(), n, 1.5f, beta, c_cpu.data()).ok());
      ExpectClose(c_gpu, c_cpu, 1e-5f);
      std::vector<float> t_gpu = Random(k * n), t_cpu = t_gpu;
      ASSERT_TRUE(gpu_->SpMMTransposed(ViewOf(a), d.data(), n, -1.0f, beta, t_gpu.data()).ok());
      ASSERT_TRUE(cpu_.SpMMTransposed(ViewOf(a), d.data(), n, -1.0f, beta, t_cpu.data()).ok());
      ExpectClose(t_gpu, t_cpu, 1e-5f);
      std::vector<float> again = Random(k * n);
      if (beta == 0.0f) {  // deterministic from run to run
        ASSERT_TRUE(gpu_->SpMMTransposed(ViewOf(a), d.data(), n, -1.0f, 0.0f, again.data()).ok());
        EXPECT_EQ(0, std::memcmp(again.data(), t_gpu.data(), again.size() * sizeof(float)));
      }
    }
  }
  // A row slice (row_ptr not starting at 0).
  const CsrMatrix a = RandomCsr(10, 20, 0.3);
  const std::vector<float> b = Random(20 * 4);
  std::vector<float> g(4 * 4), c(4 * 4);
  ASSERT_TRUE(gpu_->SpMM(RowSliceOf(a, 3, 7), b.data(), 4, 1.0f, 0.0f, g.data()).ok());
  ASSERT_TRUE(cpu_.SpMM(RowSliceOf(a, 3, 7), b.data(), 4, 1.0f, 0.0f, c.data()).ok());
  ExpectClose(g, c, 1e-5f);
}

TEST_F(CudaBackendTest, GemmMatchesCpu) {
  for (Transpose ta : {Transpose::kNo, Transpose::kYes}) {
    for (Transpose tb : {Transpose::kNo, Transpose::kYes}) {
      const int64_t m = 128, n = 159, k = 256;
      const bool tra = ta == Transpose::kYes, trb = tb == Transpose::kYes;
      const int64_t lda = (tra ? m : k) + 1, ldb = (trb ? k : n) + 2, ldc = n + 3;
      const std::vector<float> a = Random((tra ? k : m) * lda), b = Random((trb ? n : k) * ldb);
      std::vector<float> c_gpu = Random(m * ldc), c_cpu = c_gpu;
      ASSERT_TRUE(
          gpu_->Gemm(ta, tb, m, n, k, 0.5f, a.data(), lda, b.data(), ldb, -1.0f, c_gpu.data(), ldc)
              .ok());
      ASSERT_TRUE(
          cpu_.Gemm(ta, tb, m, n, k, 0.5f, a.data(), lda, b.data(), ldb, -1.0f, c_cpu.data(), ldc)
              .ok());
      ExpectClose(c_gpu, c_cpu, 1e-4f);
    }
  }
}

TEST_F(CudaBackendTest, ElementwiseOpsMatchCpuExactly) {
  const int64_t rows = 37, cols = 159;
  const std::vector<float> x = Random(rows * cols), bias = Random(cols);
  std::vector<float> g = x, c = x;
  ASSERT_TRUE(gpu_->AddBias(rows, cols, bias.data(), g.data()).ok());
  ASSERT_TRUE(cpu_.AddBias(rows, cols, bias.data(), c.data()).ok());
  EXPECT_EQ(g, c);
  std::vector<float> sg(cols, 1.0f), sc(cols, 1.0f);
  ASSERT_TRUE(gpu_->ColumnSum(rows, cols, x.data(), 2.0f, sg.data()).ok());
  ASSERT_TRUE(cpu_.ColumnSum(rows, cols, x.data(), 2.0f, sc.data()).ok());
  EXPECT_EQ(sg, sc);  // same summation order
  ASSERT_TRUE(gpu_->Relu(rows * cols, x.data(), g.data()).ok());
  ASSERT_TRUE(cpu_.Relu(rows * cols, x.data(), c.data()).ok());
  EXPECT_EQ(g, c);
  std::vector<float> dg = bias, dc = bias;
  ASSERT_TRUE(gpu_->ReluBackward(cols, g.data(), dg.data()).ok());
  ASSERT_TRUE(cpu_.ReluBackward(cols, c.data(), dc.data()).ok());
  EXPECT_EQ(dg, dc);
}

TEST_F(CudaBackendTest, LossesAndTopKMatchCpu) {
  const int64_t rows = 64, cols = 159;
  const std::vector<float> s = Random(rows * cols, -6, 6);
  const CsrMatrix y = RandomCsr(rows, cols, 0.02);
  for (bool softmax : {true, false}) {
    std::vector<float> dg(rows * cols), dc(rows * cols);
    double lg = 0, lc = 0;
    if (softmax) {
      ASSERT_TRUE(
          gpu_->SoftmaxCrossEntropy(rows, cols, s.data(), ViewOf(y), 0.5f, dg.data(), &lg).ok());
      ASSERT_TRUE(
          cpu_.SoftmaxCrossEntropy(rows, cols, s.data(), ViewOf(y), 0.5f, dc.data(), &lc).ok());
    } else {
      ASSERT_TRUE(
          gpu_->SigmoidCrossEntropy(rows, cols, s.data(), ViewOf(y), 0.5f, dg.data(), &lg).ok());
      ASSERT_TRUE(
          cpu_.SigmoidCrossEntropy(rows, cols, s.data(), ViewOf(y), 0.5f, dc.data(), &lc).ok());
    }
    EXPECT_NEAR(lg, lc, 1e-5 * std::fabs(lc) + 1e-6);
    ExpectClose(dg, dc, 1e-5f);
  }
  std::vector<float> ties = s;
  for (size_t i = 0; i < ties.size(); i += 3) ties[i] = 1.0f;
  ties[7] = std::numeric_limits<float>::quiet_NaN();
  std::vector<uint32_t> ig(rows * 5), ic(rows * 5);
  ASSERT_TRUE(gpu_->TopK(rows, cols, ties.data(), 5, ig.data()).ok());
  ASSERT_TRUE(cpu_.TopK(rows, cols, ties.data(), 5, ic.data()).ok());
  EXPECT_EQ(ig, ic);
}

}  // namespace
}  // namespace tether
