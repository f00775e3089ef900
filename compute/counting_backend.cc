#include "compute/counting_backend.h"

#include <sys/mman.h>

#include <cerrno>

#include <cstring>

namespace tether {

// Page-granular memory, protected whenever no call of the backend runs.
class CountingBackend::Buffer final : public BackendBuffer {
 public:
  Buffer(CountingBackend* owner, void* data, size_t bytes) : BackendBuffer(owner, data, bytes), owner_(owner) {}
  ~Buffer() override {
    if (data() == nullptr) return;
    owner_->registry_.Remove(data());
    munmap(data(), bytes());
  }

 private:
  CountingBackend* owner_;
};

class CountingBackend::Unlocked {
 public:
  explicit Unlocked(CountingBackend* b) : b_(b) {
    if (b_->unlock_depth_++ == 0) b_->Protect(false);
  }
  ~Unlocked() {
    if (--b_->unlock_depth_ == 0) b_->Protect(true);
  }

 private:
  CountingBackend* b_;
};

CountingBackend::CountingBackend(int threads) : cpu_(threads) {}

CountingBackend::~CountingBackend() {
  // Buffers must not outlive the backend; unprotect so a late one can still
  // be unmapped safely by its destructor.
  Protect(false);
}

void CountingBackend::Protect(bool locked) {
  registry_.ForEach([locked](void* p, size_t bytes) {
    // A failure here would only weaken the check, never the results.
    (void)mprotect(p, bytes, locked ? PROT_NONE : PROT_READ | PROT_WRITE);
  });
}

StatusOr<std::unique_ptr<BackendBuffer>> CountingBackend::AllocBuffer(size_t bytes) {
  void* p = nullptr;
  if (bytes > 0) {
    p = mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      return Status::Internal("CountingBackend::AllocBuffer: mmap of " + std::to_string(bytes) + " bytes failed: " +
                              std::strerror(errno));
    }
    registry_.Add(p, bytes);
    if (unlock_depth_ > 0) (void)mprotect(p, bytes, PROT_READ | PROT_WRITE);
  }
  return std::unique_ptr<BackendBuffer>(std::make_unique<Buffer>(this, p, bytes));
}

Status CountingBackend::Upload(const void* src, BackendBuffer* dst, size_t offset, size_t bytes) {
  TETHER_RETURN_IF_ERROR(CheckTransfer(dst, offset, bytes, src, "Upload"));
  Unlocked u(this);
  ++counts_.uploads;
  counts_.upload_bytes += static_cast<int64_t>(bytes);
  if (bytes > 0) std::memcpy(static_cast<char*>(dst->data()) + offset, src, bytes);
  return Status::OK();
}

Status CountingBackend::Download(const BackendBuffer& src, size_t offset, void* dst, size_t bytes) {
  TETHER_RETURN_IF_ERROR(CheckTransfer(&src, offset, bytes, dst, "Download"));
  Unlocked u(this);
  ++counts_.downloads;
  counts_.download_bytes += static_cast<int64_t>(bytes);
  if (bytes > 0) std::memcpy(dst, static_cast<const char*>(src.data()) + offset, bytes);
  return Status::OK();
}

// Storage: row_ptr as int64 rebased to 0 (rows + 1), col_idx (nnz uint32),
// then values (nnz floats) unless use == kLabels.
Status CountingBackend::UploadCsr(const CsrView& a, CsrUse use, BackendCsr* dst) {
  TETHER_RETURN_IF_ERROR(CheckUploadCsr(a, use, dst));
  CsrUploadGuard guard(dst);
  const bool values = use != CsrUse::kLabels;
  const size_t rp = (a.rows + 1) * sizeof(int64_t), ci = dst->nnz * sizeof(uint32_t);
  const size_t bytes = rp + ci + (values ? dst->nnz * sizeof(float) : 0);
  if (dst->storage == nullptr || dst->storage->owner() != this || dst->storage->bytes() < bytes) {
    dst->storage.reset();
    TETHER_ASSIGN_OR_RETURN(dst->storage, AllocBuffer(bytes));
  }
  Unlocked u(this);
  ++counts_.uploads;
  ++counts_.csr_uploads;
  counts_.upload_bytes += static_cast<int64_t>(bytes);
  char* base = static_cast<char*>(dst->storage->data());
  auto* row_ptr = reinterpret_cast<int64_t*>(base);
  for (int64_t r = 0; r <= a.rows; ++r) row_ptr[r] = a.row_ptr[r] - a.row_ptr[0];
  if (dst->nnz > 0) {
    std::memcpy(base + rp, a.col_idx + a.row_ptr[0], ci);
    if (values) std::memcpy(base + rp + ci, a.values + a.row_ptr[0], dst->nnz * sizeof(float));
  }
  guard.Done();
  return Status::OK();
}

StatusOr<CsrView> CountingBackend::StoredView(const BackendCsr& a, CsrUse need, const char* op) const {
  TETHER_RETURN_IF_ERROR(CheckUsable(a, need, op));
  if (a.storage == nullptr) return Status::InvalidArgument(std::string(op) + ": the BackendCsr has no storage");
  const char* base = static_cast<const char*>(a.storage->data());
  const size_t rp = (a.rows + 1) * sizeof(int64_t), ci = a.nnz * sizeof(uint32_t);
  return CsrView{a.rows, a.cols, reinterpret_cast<const int64_t*>(base),
                 reinterpret_cast<const uint32_t*>(base + rp),
                 a.use == CsrUse::kLabels ? nullptr : reinterpret_cast<const float*>(base + rp + ci)};
}

void CountingBackend::Operand(const void* p, int64_t count, size_t elem) {
  if (p == nullptr || count <= 0) return;
  if (!registry_.Contains(p, static_cast<size_t>(count) * elem)) ++counts_.host_operands;
}

Status CountingBackend::SpMM(const CsrView& a, const float* b, int64_t n, float alpha, float beta, float* c) {
  Unlocked u(this);
  ++counts_.ops;
  ++counts_.host_operands;  // the CSR arrays
  Operand(b, a.cols * n, sizeof(float));
  Operand(c, a.rows * n, sizeof(float));
  return cpu_.SpMM(a, b, n, alpha, beta, c);
}

Status CountingBackend::SpMMTransposed(const CsrView& a, const float* d, int64_t n, float alpha, float beta,
                                       float* c) {
  Unlocked u(this);
  ++counts_.ops;
  ++counts_.host_operands;
  Operand(d, a.rows * n, sizeof(float));
  Operand(c, a.cols * n, sizeof(float));
  return cpu_.SpMMTransposed(a, d, n, alpha, beta, c);
}

Status CountingBackend::SpMM(const BackendCsr& a, const float* b, int64_t n, float alpha, float beta, float* c) {
  Unlocked u(this);
  TETHER_ASSIGN_OR_RETURN(const CsrView v, StoredView(a, CsrUse::kSpMM, "SpMM"));
  ++counts_.ops;
  Operand(b, a.cols * n, sizeof(float));
  Operand(c, a.rows * n, sizeof(float));
  return cpu_.SpMM(v, b, n, alpha, beta, c);
}

Status CountingBackend::SpMMTransposed(const BackendCsr& a, const float* d, int64_t n, float alpha, float beta,
                                       float* c) {
  Unlocked u(this);
  TETHER_ASSIGN_OR_RETURN(const CsrView v, StoredView(a, CsrUse::kSpMMAndTransposed, "SpMMTransposed"));
  ++counts_.ops;
  Operand(d, a.rows * n, sizeof(float));
  Operand(c, a.cols * n, sizeof(float));
  return cpu_.SpMMTransposed(v, d, n, alpha, beta, c);
}

Status CountingBackend::Gemm(Transpose trans_a, Transpose trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                             const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                             int64_t ldc) {
  Unlocked u(this);
  ++counts_.ops;
  StatusOr<backend_internal::GemmSpans> spans =
      backend_internal::CheckGemm(trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc, "BLAS");
  if (spans.ok()) {
    Operand(a, spans->a, sizeof(float));
    Operand(b, spans->b, sizeof(float));
    Operand(c, spans->c, sizeof(float));
  }
  return cpu_.Gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

Status CountingBackend::AddBias(int64_t rows, int64_t cols, const float* bias, float* x) {
  Unlocked u(this);
  ++counts_.ops;
  Operand(bias, rows > 0 ? cols : 0, sizeof(float));
  Operand(x, rows * cols, sizeof(float));
  return cpu_.AddBias(rows, cols, bias, x);
}

Status CountingBackend::ColumnSum(int64_t rows, int64_t cols, const float* x, float beta, float* out) {
  Unlocked u(this);
  ++counts_.ops;
  Operand(x, rows * cols, sizeof(float));
  Operand(out, cols, sizeof(float));
  return cpu_.ColumnSum(rows, cols, x, beta, out);
}

Status CountingBackend::Relu(int64_t n, const float* x, float* y) {
  Unlocked u(this);
  ++counts_.ops;
  Operand(x, n, sizeof(float));
  if (y != x) Operand(y, n, sizeof(float));
  return cpu_.Relu(n, x, y);
}

Status CountingBackend::ReluBackward(int64_t n, const float* y, float* dy) {
  Unlocked u(this);
  ++counts_.ops;
  Operand(y, n, sizeof(float));
  Operand(dy, n, sizeof(float));
  return cpu_.ReluBackward(n, y, dy);
}

// The mask is a hash of (seed, index): nothing crosses, as on the CUDA
// backend, where the kernel draws it on the device.
Status CountingBackend::Dropout(int64_t n, float rate, uint64_t seed, float* x) {
  Unlocked u(this);
  ++counts_.ops;
  Operand(x, n, sizeof(float));
  return cpu_.Dropout(n, rate, seed, x);
}

Status CountingBackend::SoftmaxCrossEntropy(int64_t rows, int64_t cols, const float* scores, const CsrView& labels,
                                            float grad_scale, float* dscores, double* loss_sum, float label_smoothing) {
  Unlocked u(this);
  ++counts_.ops;
  ++counts_.host_operands;  // the label arrays
  ++counts_.readbacks;
  Operand(scores, rows * cols, sizeof(float));
  if (dscores != scores) Operand(dscores, rows * cols, sizeof(float));
  return cpu_.SoftmaxCrossEntropy(rows, cols, scores, labels, grad_scale, dscores, loss_sum, label_smoothing);
}

Status CountingBackend::SigmoidCrossEntropy(int64_t rows, int64_t cols, const float* scores, const CsrView& labels,
                                            float grad_scale, float* dscores, double* loss_sum, float label_smoothing) {
  Unlocked u(this);
  ++counts_.ops;
  ++counts_.host_operands;
  ++counts_.readbacks;
  Operand(scores, rows * cols, sizeof(float));
  if (dscores != scores) Operand(dscores, rows * cols, sizeof(float));
  return cpu_.SigmoidCrossEntropy(rows, cols, scores, labels, grad_scale, dscores, loss_sum, label_smoothing);
}

Status CountingBackend::SoftmaxCrossEntropy(int64_t rows, int64_t cols, const float* scores,
                                            const BackendCsr& labels, float grad_scale, float* dscores,
                                            double* loss_sum, float label_smoothing) {
  Unlocked u(this);
  TETHER_ASSIGN_OR_RETURN(const CsrView v, StoredView(labels, CsrUse::kLabels, "SoftmaxCrossEntropy"));
  ++counts_.ops;
  ++counts_.readbacks;
  Operand(scores, rows * cols, sizeof(float));
  if (dscores != scores) Operand(dscores, rows * cols, sizeof(float));
  return cpu_.SoftmaxCrossEntropy(rows, cols, scores, v, grad_scale, dscores, loss_sum, label_smoothing);
}

Status CountingBackend::SigmoidCrossEntropy(int64_t rows, int64_t cols, const float* scores,
                                            const BackendCsr& labels, float grad_scale, float* dscores,
                                            double* loss_sum, float label_smoothing) {
  Unlocked u(this);
  TETHER_ASSIGN_OR_RETURN(const CsrView v, StoredView(labels, CsrUse::kLabels, "SigmoidCrossEntropy"));
  ++counts_.ops;
  ++counts_.readbacks;
  Operand(scores, rows * cols, sizeof(float));
  if (dscores != scores) Operand(dscores, rows * cols, sizeof(float));
  return cpu_.SigmoidCrossEntropy(rows, cols, scores, v, grad_scale, dscores, loss_sum, label_smoothing);
}

Status CountingBackend::TopK(int64_t rows, int64_t cols, const float* scores, int k, uint32_t* indices) {
  Unlocked u(this);
  ++counts_.ops;
  Operand(scores, rows * cols, sizeof(float));
  Operand(indices, rows * static_cast<int64_t>(k), sizeof(uint32_t));
  return cpu_.TopK(rows, cols, scores, k, indices);
}

}  // namespace tether
