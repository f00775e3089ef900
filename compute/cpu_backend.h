// CpuBackend: the Backend on the host CPU. Dense products go to OpenBLAS
// (cblas_sgemm); sparse products, losses and top-k are plain single-threaded
// loops over CSR rows, written so the inner loop runs over a contiguous
// dense row (vectorisable, cache-friendly).
//
// Determinism: outputs are bit-identical for identical inputs and the same
// OpenBLAS thread count (the CSR loops have a fixed summation order; OpenBLAS
// partitions GEMM deterministically for a given thread count and shape).
//
// Allocation: no op allocates once warm. SpMMTransposed builds Aᵀ (O(nnz +
// cols)) in per-thread scratch that grows to the largest operand seen and is
// then reused; everything else works in the caller's buffers.
//
// Thread-safety: the object holds no mutable state (SpMMTransposed's
// scratch is per thread), so concurrent calls on one object are safe
// (stricter than the Backend contract). BUT the
// OpenBLAS thread count is a process-wide setting: constructing a
// CpuBackend changes it for every BLAS call in the process. Workers that
// run several compute threads should construct their backends with
// threads = 1 (parallelism across minibatches, not inside one GEMM).
#pragma once

#include <cstdint>
#include <string>

#include "compute/backend.h"

namespace tether {

class CpuBackend final : public Backend {
 public:
  /// threads: OpenBLAS thread count (>= 1; values < 1 are treated as 1).
  /// Default 1: at the Bibtex sizes (B ≈ 128, H = 256, L = 159) one GEMM is
  /// ~5 MFLOP, too small for threads to pay off.
  explicit CpuBackend(int threads = 1);

  std::string name() const override { return "cpu"; }
  // The BackendCsr forms (Backend's defaults: buffers are host memory here).
  using Backend::SigmoidCrossEntropy;
  using Backend::SoftmaxCrossEntropy;
  using Backend::SpMM;
  using Backend::SpMMTransposed;
  int threads() const { return threads_; }

  Status SpMM(const CsrView& a, const float* b, int64_t n, float alpha, float beta,
              float* c) override;
  Status SpMMTransposed(const CsrView& a, const float* d, int64_t n, float alpha, float beta,
                        float* c) override;
  Status Gemm(Transpose trans_a, Transpose trans_b, int64_t m, int64_t n, int64_t k, float alpha,
              const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
              int64_t ldc) override;
  Status AddBias(int64_t rows, int64_t cols, const float* bias, float* x) override;
  Status ColumnSum(int64_t rows, int64_t cols, const float* x, float beta, float* out) override;
  Status Relu(int64_t n, const float* x, float* y) override;
  Status ReluBackward(int64_t n, const float* y, float* dy) override;
  Status Dropout(int64_t n, float rate, uint64_t seed, float* x) override;
  Status SoftmaxCrossEntropy(int64_t rows, int64_t cols, const float* scores, const CsrView& labels,
                             float grad_scale, float* dscores, double* loss_sum,
                             float label_smoothing = 0.0f) override;
  Status SigmoidCrossEntropy(int64_t rows, int64_t cols, const float* scores, const CsrView& labels,
                             float grad_scale, float* dscores, double* loss_sum,
                             float label_smoothing = 0.0f) override;
  Status TopK(int64_t rows, int64_t cols, const float* scores, int k, uint32_t* indices) override;

 private:
  int threads_;
};

}  // namespace tether
