// Every Backend op of every backend against the CPU backend (house style:
// ggml's test-backend-ops), on fresh random inputs of several shapes:
// norm-wise relative error ||got − cpu||₂ / ||cpu||₂ ≤ 1e-5 for float
// outputs (fp32; summation orders differ between backends), exact for top-k
// on distinct scores and for the element-wise ops.
//
// The buffer API (AllocBuffer, Upload, Download, UploadCsr) is checked the
// same way: ops on operands resident in the backend's buffers, alone and
// mixed with host operands, against the CPU backend on host memory.
//
// Instantiated for "cpu" (a second CpuBackend: exact, and it keeps this
// harness honest on machines without a GPU), "counting" (CountingBackend:
// device-like buffers over the CPU kernels, exact) and "cuda" (created
// through CreateBackend, as --device=cuda does). Without a usable CUDA
// device, or in a build without CUDA, every "cuda" case is reported SKIPPED
// with the reason, never silently absent.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iostream>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "compute/backend.h"
#include "compute/counting_backend.h"
#include "compute/cpu_backend.h"
#include "input/reader.h"

namespace tether {
namespace {

constexpr double kTol = 1e-5;

class BackendOpsTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    StatusOr<std::unique_ptr<Backend>> b =
        GetParam() == "counting" ? StatusOr<std::unique_ptr<Backend>>(std::make_unique<CountingBackend>(1))
                                 : CreateBackend(GetParam(), 1);
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

  // A buffer of dev_ holding `v` (uploaded), and a download of n elements.
  template <typename T>
  std::unique_ptr<BackendBuffer> Up(const std::vector<T>& v) {
    StatusOr<std::unique_ptr<BackendBuffer>> b = dev_->AllocBuffer(v.size() * sizeof(T));
    EXPECT_TRUE(b.ok()) << b.status().ToString();
    if (!b.ok()) return nullptr;
    EXPECT_TRUE(dev_->Upload(v.data(), b->get(), 0, v.size() * sizeof(T)).ok());
    return std::move(b).value();
  }
  std::unique_ptr<BackendBuffer> Alloc(size_t floats) {
    StatusOr<std::unique_ptr<BackendBuffer>> b = dev_->AllocBuffer(floats * sizeof(float));
    EXPECT_TRUE(b.ok()) << b.status().ToString();
    return b.ok() ? std::move(b).value() : nullptr;
  }
  template <typename T = float>
  std::vector<T> Down(const BackendBuffer& b, size_t n) {
    std::vector<T> v(n);
    const Status st = dev_->Download(b, 0, v.data(), n * sizeof(T));
    EXPECT_TRUE(st.ok()) << st.ToString();
    return v;
  }
  // Exact on the CPU-kernel backends, kTol elsewhere.
  bool exact() const { return GetParam() != "cuda"; }

  std::unique_ptr<Backend> dev_;
  CpuBackend cpu_{1};
  std::mt19937 rng_;
};

float* F(const std::unique_ptr<BackendBuffer>& b) { return static_cast<float*>(b->data()); }

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

// Dropout's mask is a hash of (seed, index) on every backend: the same bits
// as the CPU backend, in place, on host memory and on a resident buffer.
TEST_P(BackendOpsTest, DropoutIsTheCpuMaskBitForBit) {
  for (int64_t n : {int64_t{1}, int64_t{37 * 159}, int64_t{128 * 256}}) {
    for (float rate : {0.0f, 0.1f, 0.5f, 0.9f}) {
      SCOPED_TRACE("n=" + std::to_string(n) + " rate=" + std::to_string(rate));
      const std::vector<float> x = Random(n);
      std::vector<float> g = x, c = x;
      ASSERT_TRUE(dev_->Dropout(n, rate, 12345, g.data()).ok());
      ASSERT_TRUE(cpu_.Dropout(n, rate, 12345, c.data()).ok());
      EXPECT_EQ(g, c);
      BackendArray<float> resident(dev_.get());
      ASSERT_TRUE(resident.Resize(n).ok());
      ASSERT_TRUE(dev_->Upload(x.data(), resident.buffer(), 0, n * sizeof(float)).ok());
      ASSERT_TRUE(dev_->Dropout(n, rate, 12345, resident.data()).ok());
      std::vector<float> back(n);
      ASSERT_TRUE(dev_->Download(*resident.buffer(), 0, back.data(), n * sizeof(float)).ok());
      EXPECT_EQ(back, c);
    }
  }
  float x = 1.0f;
  EXPECT_FALSE(dev_->Dropout(1, 1.0f, 1, &x).ok());
  EXPECT_FALSE(dev_->Dropout(1, -0.1f, 1, &x).ok());
  EXPECT_FALSE(dev_->Dropout(1, std::nanf(""), 1, &x).ok());
}

TEST_P(BackendOpsTest, SmoothedLossesMatchCpu) {
  for (auto [rows, cols, density] : {std::tuple<int64_t, int64_t, double>{64, 159, 0.02}, {3, 1000, 0.01}}) {
    SCOPED_TRACE("rows=" + std::to_string(rows) + " cols=" + std::to_string(cols));
    const std::vector<float> s = Random(rows * cols, -6, 6);
    const CsrMatrix y = RandomCsr(rows, cols, density);
    for (bool softmax : {true, false}) {
      auto run = [&](Backend* be, float* d, double* loss) {
        return softmax ? be->SoftmaxCrossEntropy(rows, cols, s.data(), ViewOf(y), 0.5f, d, loss, 0.1f)
                       : be->SigmoidCrossEntropy(rows, cols, s.data(), ViewOf(y), 0.5f, d, loss, 0.1f);
      };
      std::vector<float> dg(rows * cols), dc(rows * cols);
      double lg = 0, lc = 0;
      ASSERT_TRUE(run(dev_.get(), dg.data(), &lg).ok());
      ASSERT_TRUE(run(&cpu_, dc.data(), &lc).ok());
      EXPECT_LE(std::fabs(lg - lc), kTol * std::max(1.0, std::fabs(lc))) << (softmax ? "softmax" : "sigmoid");
      EXPECT_LE(RelErr(dg, dc), kTol) << (softmax ? "softmax" : "sigmoid");
    }
  }
  double loss = 0;
  const std::vector<float> s = Random(4);
  const CsrMatrix y = RandomCsr(1, 4, 0.5);
  EXPECT_FALSE(dev_->SoftmaxCrossEntropy(1, 4, s.data(), ViewOf(y), 1.0f, nullptr, &loss, 1.0f).ok());
  EXPECT_FALSE(dev_->SigmoidCrossEntropy(1, 4, s.data(), ViewOf(y), 1.0f, nullptr, &loss, -0.5f).ok());
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

TEST_P(BackendOpsTest, BuffersUploadAndDownloadExactly) {
  EXPECT_EQ(dev_->buffers_host_visible(), GetParam() == "cpu");
  const std::vector<float> v = Random(10);
  std::unique_ptr<BackendBuffer> b = Up(v);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->bytes(), 40u);
  EXPECT_EQ(b->owner(), dev_.get());
  EXPECT_EQ(Down(*b, 10), v);
  // Offsets: floats 3..6 replaced, then read back from offset 2.
  const std::vector<float> part = {7, 8, 9, 10};
  ASSERT_TRUE(dev_->Upload(part.data(), b.get(), 3 * sizeof(float), 4 * sizeof(float)).ok());
  std::vector<float> got(5);
  ASSERT_TRUE(dev_->Download(*b, 2 * sizeof(float), got.data(), 5 * sizeof(float)).ok());
  EXPECT_EQ(got, (std::vector<float>{v[2], 7, 8, 9, 10}));
  ASSERT_TRUE(dev_->Synchronize().ok());
  // Errors: a range beyond the buffer, a null host pointer, a buffer of
  // another backend.
  EXPECT_EQ(dev_->Upload(part.data(), b.get(), 8 * sizeof(float), 4 * sizeof(float)).code(),
            Status::Code::kInvalidArgument);
  EXPECT_EQ(dev_->Download(*b, 0, nullptr, 4).code(), Status::Code::kInvalidArgument);
  StatusOr<std::unique_ptr<BackendBuffer>> other = cpu_.AllocBuffer(64);
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(dev_->Upload(part.data(), other->get(), 0, 16).code(), Status::Code::kInvalidArgument);
  StatusOr<std::unique_ptr<BackendBuffer>> empty = dev_->AllocBuffer(0);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ((*empty)->data(), nullptr);
  EXPECT_TRUE(dev_->Upload(nullptr, empty->get(), 0, 0).ok());
}

// One XMC-MLP step (forward, loss, backward) with every operand resident in
// the backend's buffers, against the CPU backend on host memory.
TEST_P(BackendOpsTest, ResidentMinibatchMatchesCpu) {
  const int64_t b = 64, f = 300, h = 32, l = 20;
  const CsrMatrix x = RandomCsr(b, f, 0.05), y = RandomCsr(b, l, 0.1);
  const std::vector<float> w1 = Random(f * h), b1 = Random(h), w2 = Random(l * h), b2 = Random(l);
  // CPU reference on host memory.
  std::vector<float> a1(b * h), s(b * l), da1(b * h), gw1(f * h), gb1(h), gw2(l * h), gb2(l);
  double loss = 0;
  ASSERT_TRUE(cpu_.SpMM(ViewOf(x), w1.data(), h, 1.0f, 0.0f, a1.data()).ok());
  ASSERT_TRUE(cpu_.AddBias(b, h, b1.data(), a1.data()).ok());
  ASSERT_TRUE(cpu_.Relu(b * h, a1.data(), a1.data()).ok());
  ASSERT_TRUE(cpu_.Gemm(Transpose::kNo, Transpose::kYes, b, l, h, 1.0f, a1.data(), h, w2.data(), h, 0.0f, s.data(), l)
                  .ok());
  ASSERT_TRUE(cpu_.AddBias(b, l, b2.data(), s.data()).ok());
  ASSERT_TRUE(cpu_.SoftmaxCrossEntropy(b, l, s.data(), ViewOf(y), 0.5f, s.data(), &loss).ok());
  ASSERT_TRUE(cpu_.Gemm(Transpose::kYes, Transpose::kNo, l, h, b, 1.0f, s.data(), l, a1.data(), h, 0.0f, gw2.data(), h)
                  .ok());
  ASSERT_TRUE(cpu_.ColumnSum(b, l, s.data(), 0.0f, gb2.data()).ok());
  ASSERT_TRUE(cpu_.Gemm(Transpose::kNo, Transpose::kNo, b, h, l, 1.0f, s.data(), l, w2.data(), h, 0.0f, da1.data(), h)
                  .ok());
  ASSERT_TRUE(cpu_.ReluBackward(b * h, a1.data(), da1.data()).ok());
  ASSERT_TRUE(cpu_.SpMMTransposed(ViewOf(x), da1.data(), h, 1.0f, 0.0f, gw1.data()).ok());
  ASSERT_TRUE(cpu_.ColumnSum(b, h, da1.data(), 0.0f, gb1.data()).ok());

  // The same on dev_ with resident operands: inputs up once, results down once.
  BackendCsr xd, yd;
  ASSERT_TRUE(dev_->UploadCsr(ViewOf(x), CsrUse::kSpMMAndTransposed, &xd).ok());
  ASSERT_TRUE(dev_->UploadCsr(ViewOf(y), CsrUse::kLabels, &yd).ok());
  auto dw1 = Up(w1), db1 = Up(b1), dw2 = Up(w2), db2 = Up(b2);
  auto d_a1 = Alloc(b * h), d_s = Alloc(b * l), d_da1 = Alloc(b * h), d_gw1 = Alloc(f * h), d_gb1 = Alloc(h),
       d_gw2 = Alloc(l * h), d_gb2 = Alloc(l);
  StatusOr<std::unique_ptr<BackendBuffer>> d_top = dev_->AllocBuffer(b * 3 * sizeof(uint32_t));
  ASSERT_TRUE(d_top.ok());
  auto* counting = dynamic_cast<CountingBackend*>(dev_.get());
  if (counting != nullptr) counting->Reset();
  double dloss = 0;
  ASSERT_TRUE(dev_->SpMM(xd, F(dw1), h, 1.0f, 0.0f, F(d_a1)).ok());
  ASSERT_TRUE(dev_->AddBias(b, h, F(db1), F(d_a1)).ok());
  ASSERT_TRUE(dev_->Relu(b * h, F(d_a1), F(d_a1)).ok());
  ASSERT_TRUE(
      dev_->Gemm(Transpose::kNo, Transpose::kYes, b, l, h, 1.0f, F(d_a1), h, F(dw2), h, 0.0f, F(d_s), l).ok());
  ASSERT_TRUE(dev_->AddBias(b, l, F(db2), F(d_s)).ok());
  ASSERT_TRUE(dev_->TopK(b, l, F(d_s), 3, static_cast<uint32_t*>((*d_top)->data())).ok());
  double sig_loss = 0;  // loss only (null dscores), on the resident scores
  ASSERT_TRUE(dev_->SigmoidCrossEntropy(b, l, F(d_s), yd, 1.0f, nullptr, &sig_loss).ok());
  const std::vector<float> scores = Down(*d_s, b * l);  // before the loss overwrites them
  ASSERT_TRUE(dev_->SoftmaxCrossEntropy(b, l, F(d_s), yd, 0.5f, F(d_s), &dloss).ok());
  ASSERT_TRUE(
      dev_->Gemm(Transpose::kYes, Transpose::kNo, l, h, b, 1.0f, F(d_s), l, F(d_a1), h, 0.0f, F(d_gw2), h).ok());
  ASSERT_TRUE(dev_->ColumnSum(b, l, F(d_s), 0.0f, F(d_gb2)).ok());
  ASSERT_TRUE(
      dev_->Gemm(Transpose::kNo, Transpose::kNo, b, h, l, 1.0f, F(d_s), l, F(dw2), h, 0.0f, F(d_da1), h).ok());
  ASSERT_TRUE(dev_->ReluBackward(b * h, F(d_a1), F(d_da1)).ok());
  ASSERT_TRUE(dev_->SpMMTransposed(xd, F(d_da1), h, 1.0f, 0.0f, F(d_gw1)).ok());
  ASSERT_TRUE(dev_->ColumnSum(b, h, F(d_da1), 0.0f, F(d_gb1)).ok());
  if (counting != nullptr) {
    EXPECT_EQ(counting->counts().host_operands, 0);
    EXPECT_EQ(counting->counts().ops, 14);
    EXPECT_EQ(counting->counts().readbacks, 2);
    EXPECT_EQ(counting->counts().downloads, 1);  // the scores, for the checks below
  }
  const double tol = exact() ? 0.0 : kTol;
  EXPECT_LE(std::fabs(dloss - loss), tol * std::max(1.0, std::fabs(loss)));
  for (auto [got, want, what] : {std::tuple{Down(*d_gw1, f * h), gw1, "gw1"}, {Down(*d_gb1, h), gb1, "gb1"},
                                 {Down(*d_gw2, l * h), gw2, "gw2"}, {Down(*d_gb2, l), gb2, "gb2"},
                                 {Down(*d_a1, b * h), a1, "a1"}}) {
    EXPECT_LE(RelErr(got, want), tol) << what;
  }
  // Top-k and the sigmoid loss of the device's own scores, exactly as the
  // CPU ranks / scores them.
  std::vector<uint32_t> top_cpu(b * 3);
  ASSERT_TRUE(cpu_.TopK(b, l, scores.data(), 3, top_cpu.data()).ok());
  EXPECT_EQ(Down<uint32_t>(**d_top, b * 3), top_cpu);
  double sig_cpu = 0;
  ASSERT_TRUE(cpu_.SigmoidCrossEntropy(b, l, scores.data(), ViewOf(y), 1.0f, nullptr, &sig_cpu).ok());
  EXPECT_LE(std::fabs(sig_loss - sig_cpu), std::max(tol, 1e-12) * std::max(1.0, std::fabs(sig_cpu)));
}

// Host and buffer operands mixed in one call: what a caller gets when only
// part of its data is resident.
TEST_P(BackendOpsTest, MixedHostAndBufferOperandsMatchCpu) {
  const int64_t m = 17, k = 40, n = 9;
  const CsrMatrix a = RandomCsr(m, k, 0.2);
  const std::vector<float> bh = Random(k * n), c0 = Random(m * n);
  std::vector<float> want = c0;
  ASSERT_TRUE(cpu_.SpMM(ViewOf(a), bh.data(), n, 1.0f, 0.5f, want.data()).ok());
  // Host b, resident c (read, beta != 0).
  auto dc = Up(c0);
  ASSERT_TRUE(dev_->SpMM(ViewOf(a), bh.data(), n, 1.0f, 0.5f, F(dc)).ok());
  EXPECT_LE(RelErr(Down(*dc, m * n), want), exact() ? 0.0 : kTol);
  // Resident b, host c.
  auto db = Up(bh);
  std::vector<float> c = c0;
  ASSERT_TRUE(dev_->SpMM(ViewOf(a), F(db), n, 1.0f, 0.5f, c.data()).ok());
  EXPECT_LE(RelErr(c, want), exact() ? 0.0 : kTol);
  // Gemm with a resident, b host, c resident and padded (ldc > n): the
  // padding is untouched.
  const std::vector<float> ga = Random(m * k), gb = Random(k * n), gc0 = Random(m * (n + 2));
  std::vector<float> gwant = gc0;
  ASSERT_TRUE(cpu_.Gemm(Transpose::kNo, Transpose::kNo, m, n, k, 1.0f, ga.data(), k, gb.data(), n, 1.0f,
                        gwant.data(), n + 2)
                  .ok());
  auto dga = Up(ga), dgc = Up(gc0);
  ASSERT_TRUE(dev_->Gemm(Transpose::kNo, Transpose::kNo, m, n, k, 1.0f, F(dga), k, gb.data(), n, 1.0f, F(dgc), n + 2)
                  .ok());
  const std::vector<float> ggot = Down(*dgc, m * (n + 2));
  EXPECT_LE(RelErr(ggot, gwant), exact() ? 0.0 : kTol);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = n; j < n + 2; ++j) EXPECT_EQ(ggot[i * (n + 2) + j], gc0[i * (n + 2) + j]);
  // Relu from a buffer into host memory, and in place on host memory.
  const std::vector<float> r = Random(100);
  auto dr = Up(r);
  std::vector<float> rg(100), rc(100);
  ASSERT_TRUE(dev_->Relu(100, F(dr), rg.data()).ok());
  ASSERT_TRUE(cpu_.Relu(100, r.data(), rc.data()).ok());
  EXPECT_EQ(rg, rc);
}

// Operands at offsets inside one packed buffer, as the models pass their
// packed parameters and gradients: the backend must see them as resident.
TEST_P(BackendOpsTest, OperandsAtOffsetsInsidePackedBuffers) {
  const int64_t m = 12, k = 30, n = 5;
  const CsrMatrix a = RandomCsr(m, k, 0.3);
  const std::vector<float> w = Random(k * n), bias = Random(n);
  std::vector<float> packed(w);
  packed.insert(packed.end(), bias.begin(), bias.end());  // [w | bias]
  auto params = Up(packed);
  auto out = Alloc(3 + m * n + n);  // [3 spare | c | column sums]
  BackendCsr ad;
  ASSERT_TRUE(dev_->UploadCsr(ViewOf(a), CsrUse::kSpMM, &ad).ok());
  auto* counting = dynamic_cast<CountingBackend*>(dev_.get());
  if (counting != nullptr) counting->Reset();
  float* c = F(out) + 3;
  ASSERT_TRUE(dev_->SpMM(ad, F(params), n, 1.0f, 0.0f, c).ok());
  ASSERT_TRUE(dev_->AddBias(m, n, F(params) + k * n, c).ok());
  ASSERT_TRUE(dev_->ColumnSum(m, n, c, 0.0f, c + m * n).ok());
  if (counting != nullptr) {
    EXPECT_EQ(counting->counts().host_operands, 0);
  }
  std::vector<float> want(m * n + n);
  ASSERT_TRUE(cpu_.SpMM(ViewOf(a), w.data(), n, 1.0f, 0.0f, want.data()).ok());
  ASSERT_TRUE(cpu_.AddBias(m, n, bias.data(), want.data()).ok());
  ASSERT_TRUE(cpu_.ColumnSum(m, n, want.data(), 0.0f, want.data() + m * n).ok());
  std::vector<float> got(m * n + n);
  ASSERT_TRUE(dev_->Download(*out, 3 * sizeof(float), got.data(), got.size() * sizeof(float)).ok());
  EXPECT_LE(RelErr(got, want), exact() ? 0.0 : kTol);
}

TEST_P(BackendOpsTest, UploadedCsrIsCheckedAndTiedToItsBackend) {
  const CsrMatrix a = RandomCsr(40, 30, 0.2);
  const std::vector<float> bh = Random(30 * 8), dh = Random(10 * 8);
  // A row slice (row_ptr[0] != 0), both products.
  BackendCsr slice;
  ASSERT_TRUE(dev_->UploadCsr(RowSliceOf(a, 20, 30), CsrUse::kSpMMAndTransposed, &slice).ok());
  EXPECT_EQ(slice.rows, 10);
  EXPECT_EQ(slice.cols, 30);
  EXPECT_EQ(slice.nnz, a.row_ptr[30] - a.row_ptr[20]);
  std::vector<float> got(10 * 8), want(10 * 8), tgot(30 * 8), twant(30 * 8);
  ASSERT_TRUE(dev_->SpMM(slice, bh.data(), 8, 1.0f, 0.0f, got.data()).ok());
  ASSERT_TRUE(cpu_.SpMM(RowSliceOf(a, 20, 30), bh.data(), 8, 1.0f, 0.0f, want.data()).ok());
  EXPECT_LE(RelErr(got, want), exact() ? 0.0 : kTol);
  ASSERT_TRUE(dev_->SpMMTransposed(slice, dh.data(), 8, 1.0f, 0.0f, tgot.data()).ok());
  ASSERT_TRUE(cpu_.SpMMTransposed(RowSliceOf(a, 20, 30), dh.data(), 8, 1.0f, 0.0f, twant.data()).ok());
  EXPECT_LE(RelErr(tgot, twant), exact() ? 0.0 : kTol);
  // Reuse of one BackendCsr for a larger matrix (storage grows).
  ASSERT_TRUE(dev_->UploadCsr(ViewOf(a), CsrUse::kSpMM, &slice).ok());
  std::vector<float> all(40 * 8), all_want(40 * 8);
  ASSERT_TRUE(dev_->SpMM(slice, bh.data(), 8, 1.0f, 0.0f, all.data()).ok());
  ASSERT_TRUE(cpu_.SpMM(ViewOf(a), bh.data(), 8, 1.0f, 0.0f, all_want.data()).ok());
  EXPECT_LE(RelErr(all, all_want), exact() ? 0.0 : kTol);
  // Wrong use: no transpose stored; labels carry no values.
  EXPECT_EQ(dev_->SpMMTransposed(slice, dh.data(), 8, 1.0f, 0.0f, tgot.data()).code(),
            Status::Code::kInvalidArgument);
  BackendCsr labels;
  ASSERT_TRUE(dev_->UploadCsr(ViewOf(a), CsrUse::kLabels, &labels).ok());
  EXPECT_EQ(dev_->SpMM(labels, bh.data(), 8, 1.0f, 0.0f, all.data()).code(), Status::Code::kInvalidArgument);
  // Another backend's upload, and a never-uploaded one.
  BackendCsr theirs, none;
  ASSERT_TRUE(cpu_.UploadCsr(ViewOf(a), CsrUse::kSpMM, &theirs).ok());
  EXPECT_EQ(dev_->SpMM(theirs, bh.data(), 8, 1.0f, 0.0f, all.data()).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(dev_->SpMM(none, bh.data(), 8, 1.0f, 0.0f, all.data()).code(), Status::Code::kInvalidArgument);
  // Validation at upload: a column index >= cols.
  ASSERT_TRUE(dev_->UploadCsr(ViewOf(a), CsrUse::kSpMM, &labels).ok());
  CsrMatrix bad = a;
  bad.col_idx[0] = 30;
  const Status st = dev_->UploadCsr(ViewOf(bad), CsrUse::kSpMM, &labels);
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(st.message().find("column index 30"), std::string::npos) << st.message();
  // A failed upload leaves the matrix unusable, not half-written.
  EXPECT_EQ(dev_->SpMM(labels, bh.data(), 8, 1.0f, 0.0f, all.data()).code(), Status::Code::kInvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(Backends, BackendOpsTest, ::testing::Values("cpu", "counting", "cuda"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

// ---------------------------------------------------------------- C04 margins

// Margins x·w of line 1 ("7:0.5 2:1.0 4:0.25", unsorted) and of its sorted
// twin "2:1.0 4:0.25 7:0.5" through the compute backends: equal, and equal
// to the hand-computed value. Runs on the CPU backend always and on the CUDA
// backend where one is built and visible (the GPU half is skipped, with a
// message, elsewhere; compute/cuda/cuda_backend_test.cc checks every op).
TEST(BackendMarginsTest, C04UnsortedRowGivesTheSortedRowsMarginsOnEveryBackend) {
  ReadOptions o;
  o.format = DataFormat::kLibsvm;
  o.index_base = 1;
  o.duplicates = DuplicatePolicy::kKeepLast;  // line 2's repeat would stop the read
  auto file = ReadDataset(std::string("tests/data/cases/") + "C04_unsorted_duplicate_indices.txt", o);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  auto sorted = ParseDataset("+1 2:1.0 4:0.25 7:0.5\n", "sorted", o);
  ASSERT_TRUE(sorted.ok()) << sorted.status().ToString();
  const CsrMatrix row = SliceRows(file->features, 0, 1);
  CsrMatrix twin = sorted->features;
  twin.cols = row.cols;
  // Two output columns: w[:,0] = feature id (1..7), w[:,1] = 8 - id.
  const int64_t k = row.cols, n = 2;
  std::vector<float> w(k * n);
  for (int64_t f = 0; f < k; ++f) {
    w[f * n] = static_cast<float>(f + 1);
    w[f * n + 1] = static_cast<float>(7 - f);
  }
  const std::vector<float> want = {1.0f * 2 + 0.25f * 4 + 0.5f * 7, 1.0f * 6 + 0.25f * 4 + 0.5f * 1};
  for (const std::string device : {"cpu", "cuda"}) {
    auto backend = CreateBackend(device);
    if (!backend.ok()) {
      ASSERT_EQ(device, "cuda") << backend.status().ToString();
      // Not GTEST_SKIP: the CPU half ran and must count as a pass.
      std::cout << "C04 margins checked on cpu only; cuda: " << backend.status().message() << "\n";
      continue;
    }
    float got_file[2] = {-1, -1}, got_sorted[2] = {-1, -1};
    ASSERT_TRUE((*backend)->SpMM(ViewOf(row), w.data(), n, 1.0f, 0.0f, got_file).ok());
    ASSERT_TRUE((*backend)->SpMM(ViewOf(twin), w.data(), n, 1.0f, 0.0f, got_sorted).ok());
    EXPECT_EQ(got_file[0], want[0]) << device;
    EXPECT_EQ(got_file[1], want[1]) << device;
    EXPECT_EQ(got_sorted[0], got_file[0]) << device;
    EXPECT_EQ(got_sorted[1], got_file[1]) << device;
  }
}

}  // namespace
}  // namespace tether
