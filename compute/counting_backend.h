// CountingBackend: a test backend that behaves like a discrete device for
// memory (its buffers are NOT host-visible, so callers take the same upload /
// download path as on the CUDA backend) while computing with a CpuBackend,
// and counts every host↔device transfer the CUDA backend would make:
//   - uploads / downloads: Upload, UploadCsr (one transfer each, as the CUDA
//     backend packs a CSR into one copy) and Download calls, with bytes;
//   - host_operands: dense op operands that are host memory instead of one
//     of its buffers (each is a copy in, or in and out, on a device);
//   - readbacks: ops that return a host scalar (the losses' loss_sum), one
//     small device→host copy each on a device.
// So a test can pin the exact transfers one minibatch makes, and compare the
// results bit for bit with the CPU backend (same kernels, same inputs).
//
// Strictness: between its calls the buffers' pages are protected (mprotect
// PROT_NONE), so host code that reads or writes a buffer directly, instead
// of through Upload / Download, crashes in a test here rather than only on a
// GPU machine. Buffers are therefore page-granular (mmap); fine for tests.
//
// Thread-safety: not thread-safe (as any Backend). Buffers must not outlive
// the backend.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "compute/backend.h"
#include "compute/cpu_backend.h"

namespace tether {

/// What a CountingBackend has seen since construction or Reset().
struct TransferCounts {
  int64_t uploads = 0, upload_bytes = 0;      // Upload + UploadCsr
  int64_t csr_uploads = 0;                    // of which UploadCsr
  int64_t downloads = 0, download_bytes = 0;  // Download
  int64_t host_operands = 0;                  // op operands in host memory
  int64_t readbacks = 0;                      // host scalars returned by ops
  int64_t ops = 0;                            // compute ops run
};

class CountingBackend final : public Backend {
 public:
  /// threads: the inner CpuBackend's OpenBLAS thread count.
  explicit CountingBackend(int threads = 1);
  ~CountingBackend() override;

  std::string name() const override { return "counting"; }
  const TransferCounts& counts() const { return counts_; }
  void Reset() { counts_ = TransferCounts{}; }
  /// Live buffers (for leak checks in tests).
  size_t live_buffers() const { return registry_.size(); }

  bool buffers_host_visible() const override { return false; }
  StatusOr<std::unique_ptr<BackendBuffer>> AllocBuffer(size_t bytes) override;
  Status Upload(const void* src, BackendBuffer* dst, size_t offset, size_t bytes) override;
  Status Download(const BackendBuffer& src, size_t offset, void* dst, size_t bytes) override;
  Status UploadCsr(const CsrView& a, CsrUse use, BackendCsr* dst) override;

  Status SpMM(const CsrView& a, const float* b, int64_t n, float alpha, float beta, float* c) override;
  Status SpMMTransposed(const CsrView& a, const float* d, int64_t n, float alpha, float beta, float* c) override;
  Status SpMM(const BackendCsr& a, const float* b, int64_t n, float alpha, float beta, float* c) override;
  Status SpMMTransposed(const BackendCsr& a, const float* d, int64_t n, float alpha, float beta,
                        float* c) override;
  Status Gemm(Transpose trans_a, Transpose trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
              int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) override;
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
  Status SoftmaxCrossEntropy(int64_t rows, int64_t cols, const float* scores, const BackendCsr& labels,
                             float grad_scale, float* dscores, double* loss_sum,
                             float label_smoothing = 0.0f) override;
  Status SigmoidCrossEntropy(int64_t rows, int64_t cols, const float* scores, const BackendCsr& labels,
                             float grad_scale, float* dscores, double* loss_sum,
                             float label_smoothing = 0.0f) override;
  Status TopK(int64_t rows, int64_t cols, const float* scores, int k, uint32_t* indices) override;

 private:
  class Buffer;
  class Unlocked;  // RAII: buffers readable/writable for the duration of a call
  friend class Buffer;

  // Counts `p` (count elements of `elem` bytes) as a host operand unless it
  // lies in one of this backend's buffers.
  void Operand(const void* p, int64_t count, size_t elem);
  // The CSR view of an uploaded matrix's storage (valid while unlocked).
  StatusOr<CsrView> StoredView(const BackendCsr& a, CsrUse need, const char* op) const;
  void Protect(bool locked);

  CpuBackend cpu_;
  backend_internal::BufferRegistry registry_;
  TransferCounts counts_;
  int unlock_depth_ = 0;
};

}  // namespace tether
