// CUDA implementation of the Backend interface (see cuda_backend.h).
// No gflags, no ZeroMQ here (house style): this file sees only the runtime,
// cuBLAS, cuSPARSE, Status and the Backend interface.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusparse.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <memory>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "compute/cuda/cuda_backend.h"
#include "compute/cuda/kernels.h"

namespace tether {
namespace {

using backend_internal::CheckCsr;
using backend_internal::CheckDense;

std::string Where(const char* file, int line) {
  return std::string(file) + ":" + std::to_string(line);
}

// Error macros in the style of nccl-tests: report file:line and the
// library's message, and return upward instead of aborting.
#define TETHER_CUDA_RETURN_IF_ERROR(expr)                                             \
  do {                                                                                \
    const cudaError_t _tether_e = (expr);                                             \
    if (_tether_e != cudaSuccess) {                                                   \
      return ::tether::Status::Internal(Where(__FILE__, __LINE__) + ": " #expr ": " + \
                                        cudaGetErrorString(_tether_e));               \
    }                                                                                 \
  } while (0)

#define TETHER_CUBLAS_RETURN_IF_ERROR(expr)                                           \
  do {                                                                                \
    const cublasStatus_t _tether_s = (expr);                                          \
    if (_tether_s != CUBLAS_STATUS_SUCCESS) {                                         \
      return ::tether::Status::Internal(Where(__FILE__, __LINE__) + ": " #expr ": " + \
                                        cublasGetStatusString(_tether_s));            \
    }                                                                                 \
  } while (0)

#define TETHER_CUSPARSE_RETURN_IF_ERROR(expr)                                         \
  do {                                                                                \
    const cusparseStatus_t _tether_s = (expr);                                        \
    if (_tether_s != CUSPARSE_STATUS_SUCCESS) {                                       \
      return ::tether::Status::Internal(Where(__FILE__, __LINE__) + ": " #expr ": " + \
                                        cusparseGetErrorString(_tether_s));           \
    }                                                                                 \
  } while (0)

// A device allocation that only grows (no cudaMalloc once warm).
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }

  Status Reserve(size_t bytes) {
    if (bytes <= capacity_) return Status::OK();
    if (ptr_ != nullptr) {
      TETHER_CUDA_RETURN_IF_ERROR(cudaFree(ptr_));
      ptr_ = nullptr;
      capacity_ = 0;
    }
    const size_t want = std::max(bytes, capacity_ + capacity_ / 2);
    TETHER_CUDA_RETURN_IF_ERROR(cudaMalloc(&ptr_, want));
    capacity_ = want;
    return Status::OK();
  }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }

 private:
  void* ptr_ = nullptr;
  size_t capacity_ = 0;
};

class CudaBackend;

// A BackendBuffer in device memory; registered with its backend so ops can
// tell it from host memory.
class CudaBuffer final : public BackendBuffer {
 public:
  CudaBuffer(const Backend* owner, backend_internal::BufferRegistry* registry, int device, void* data, size_t bytes)
      : BackendBuffer(owner, data, bytes), registry_(registry), device_(device) {
    registry_->Add(data, bytes);
  }
  ~CudaBuffer() override {
    if (data() == nullptr) return;
    registry_->Remove(data());
    cudaSetDevice(device_);
    cudaFree(data());
  }

 private:
  backend_internal::BufferRegistry* registry_;
  int device_;
};

// Page-locked host memory that only grows: the staging area UploadCsr packs
// a matrix into before its one copy.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  ~PinnedBuffer() {
    if (ptr_ != nullptr) cudaFreeHost(ptr_);
  }
  Status Reserve(size_t bytes) {
    if (bytes <= capacity_) return Status::OK();
    if (ptr_ != nullptr) cudaFreeHost(ptr_);
    ptr_ = nullptr;
    capacity_ = 0;
    const size_t want = std::max(bytes, capacity_ + capacity_ / 2);
    TETHER_CUDA_RETURN_IF_ERROR(cudaHostAlloc(&ptr_, want, cudaHostAllocPortable));
    capacity_ = want;
    return Status::OK();
  }
  char* data() const { return static_cast<char*>(ptr_); }

 private:
  void* ptr_ = nullptr;
  size_t capacity_ = 0;
};

// Offsets (in 4-byte words) of the parts of an uploaded CSR's storage: all
// int32 / uint32 / float, so every part is 4-byte aligned.
//   row_ptr (rows + 1, rebased to 0) | col_idx (nnz) | values (nnz; not for
//   labels) | [kSpMMAndTransposed: Aᵀ's row_ptr (cols + 1) | col | values]
struct CsrLayout {
  size_t row_ptr = 0, col = 0, val = 0, t_row_ptr = 0, t_col = 0, t_val = 0, words = 0;
  explicit CsrLayout(const BackendCsr& a) {
    const size_t rows = static_cast<size_t>(a.rows), cols = static_cast<size_t>(a.cols),
                 nnz = static_cast<size_t>(a.nnz);
    col = rows + 1;
    val = col + nnz;
    words = a.use == CsrUse::kLabels ? val : val + nnz;
    if (a.use == CsrUse::kSpMMAndTransposed) {
      t_row_ptr = words;
      t_col = t_row_ptr + cols + 1;
      t_val = t_col + nnz;
      words = t_val + nnz;
    }
  }
};

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int device) : device_(device) {}
  ~CudaBackend() override {
    cudaSetDevice(device_);
    if (stream_ != nullptr) cudaStreamSynchronize(stream_);
    if (pack_done_ != nullptr) cudaEventDestroy(pack_done_);
    if (cusparse_ != nullptr) cusparseDestroy(cusparse_);
    if (cublas_ != nullptr) cublasDestroy(cublas_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  Status Init() {
    TETHER_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    TETHER_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    TETHER_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&pack_done_, cudaEventDisableTiming));
    TETHER_CUBLAS_RETURN_IF_ERROR(cublasCreate(&cublas_));
    TETHER_CUBLAS_RETURN_IF_ERROR(cublasSetStream(cublas_, stream_));
    // Plain FP32 (no TF32 tensor-op shortcuts): results comparable to the CPU.
    TETHER_CUBLAS_RETURN_IF_ERROR(cublasSetMathMode(cublas_, CUBLAS_PEDANTIC_MATH));
    TETHER_CUSPARSE_RETURN_IF_ERROR(cusparseCreate(&cusparse_));
    TETHER_CUSPARSE_RETURN_IF_ERROR(cusparseSetStream(cusparse_, stream_));
    return Status::OK();
  }

  std::string name() const override { return "cuda:" + std::to_string(device_); }

  // ---- Buffers and transfers.

  bool buffers_host_visible() const override { return false; }

  StatusOr<std::unique_ptr<BackendBuffer>> AllocBuffer(size_t bytes) override {
    void* p = nullptr;
    if (bytes > 0) {
      TETHER_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
      TETHER_CUDA_RETURN_IF_ERROR(cudaMalloc(&p, bytes));
    }
    return std::unique_ptr<BackendBuffer>(std::make_unique<CudaBuffer>(this, &registry_, device_, p, bytes));
  }

  Status Upload(const void* src, BackendBuffer* dst, size_t offset, size_t bytes) override {
    TETHER_RETURN_IF_ERROR(CheckTransfer(dst, offset, bytes, src, "Upload"));
    if (bytes == 0) return Status::OK();
    TETHER_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    TETHER_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(static_cast<char*>(dst->data()) + offset, src, bytes,
                                                cudaMemcpyHostToDevice, stream_));
    return Status::OK();
  }

  Status Download(const BackendBuffer& src, size_t offset, void* dst, size_t bytes) override {
    TETHER_RETURN_IF_ERROR(CheckTransfer(&src, offset, bytes, dst, "Download"));
    TETHER_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    if (bytes > 0) {
      TETHER_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, static_cast<const char*>(src.data()) + offset, bytes,
                                                  cudaMemcpyDeviceToHost, stream_));
    }
    TETHER_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
    return Status::OK();
  }

  Status Synchronize() override {
    TETHER_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    TETHER_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
    return Status::OK();
  }

  // Packs the matrix (and Aᵀ for kSpMMAndTransposed, by the same counting
  // sort as SpMMTransposed) into pinned staging on the host, then ONE copy.
  Status UploadCsr(const CsrView& a, CsrUse use, BackendCsr* dst) override {
    TETHER_RETURN_IF_ERROR(CheckUploadCsr(a, use, dst));
    CsrUploadGuard guard(dst);
    TETHER_RETURN_IF_ERROR(Check32("UploadCsr", {a.rows, a.cols, a.nnz()}));
    const CsrLayout lay(*dst);
    const size_t bytes = lay.words * 4;
    TETHER_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    if (dst->storage == nullptr || dst->storage->owner() != this || dst->storage->bytes() < bytes) {
      dst->storage.reset();
      TETHER_ASSIGN_OR_RETURN(dst->storage, AllocBuffer(std::max<size_t>(bytes, 4)));
    }
    // The previous pack's copy may still be reading the staging area.
    if (pack_pending_) TETHER_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(pack_done_));
    pack_pending_ = false;
    TETHER_RETURN_IF_ERROR(pack_.Reserve(bytes));
    int32_t* w = reinterpret_cast<int32_t*>(pack_.data());
    const int64_t base = a.row_ptr[0], nnz = dst->nnz;
    for (int64_t r = 0; r <= a.rows; ++r) w[r] = static_cast<int32_t>(a.row_ptr[r] - base);
    if (nnz > 0) {
      std::memcpy(w + lay.col, a.col_idx + base, nnz * sizeof(uint32_t));
      if (use != CsrUse::kLabels) std::memcpy(w + lay.val, a.values + base, nnz * sizeof(float));
    }
    if (use == CsrUse::kSpMMAndTransposed) {
      int32_t* t_ptr = w + lay.t_row_ptr;
      int32_t* t_col = w + lay.t_col;
      float* t_val = reinterpret_cast<float*>(w + lay.t_val);
      std::fill(t_ptr, t_ptr + a.cols + 1, 0);
      for (int64_t p = base; p < base + nnz; ++p) ++t_ptr[a.col_idx[p] + 1];
      for (int64_t j = 0; j < a.cols; ++j) t_ptr[j + 1] += t_ptr[j];
      h_fill_.assign(t_ptr, t_ptr + a.cols);
      for (int64_t i = 0; i < a.rows; ++i) {
        for (int64_t p = a.row_ptr[i]; p < a.row_ptr[i + 1]; ++p) {
          const int32_t at = h_fill_[a.col_idx[p]]++;
          t_col[at] = static_cast<int32_t>(i);
          t_val[at] = a.values[p];
        }
      }
    }
    TETHER_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(dst->storage->data(), pack_.data(), bytes, cudaMemcpyHostToDevice, stream_));
    TETHER_CUDA_RETURN_IF_ERROR(cudaEventRecord(pack_done_, stream_));
    pack_pending_ = true;
    guard.Done();
    return Status::OK();
  }

  // ---- Ops. Each operand is used in place when it lies in one of this
  // backend's buffers, else staged (copied in, and out for outputs, with a
  // wait): see In / Out / Finish.

  Status SpMM(const CsrView& a, const float* b, int64_t n, float alpha, float beta, float* c) override {
    TETHER_RETURN_IF_ERROR(CheckCsr(a, /*need_values=*/true, "SpMM", "a"));
    if (n < 0) return Status::InvalidArgument("SpMM: negative n");
    TETHER_RETURN_IF_ERROR(CheckDense(b, a.cols * n, "SpMM", "b"));
    TETHER_RETURN_IF_ERROR(CheckDense(c, a.rows * n, "SpMM", "c"));
    TETHER_RETURN_IF_ERROR(Check32("SpMM", {a.rows, a.cols, a.nnz(), n}));
    if (a.rows == 0 || n == 0) return Status::OK();
    TETHER_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    // cuSPARSE wants offsets from 0 in one index type: rebase into int32.
    const int64_t base = a.row_ptr[0];
    h_rowptr32_.resize(a.rows + 1);
    for (int64_t r = 0; r <= a.rows; ++r) h_rowptr32_[r] = static_cast<int32_t>(a.row_ptr[r] - base);
    TETHER_RETURN_IF_ERROR(Stage(&d_rowptr_, h_rowptr32_.data(), (a.rows + 1) * sizeof(int32_t)));
    // col_idx < cols <= INT32_MAX, so the uint32 array reads as int32.
    TETHER_RETURN_IF_ERROR(Stage(&d_col_, a.col_idx + base, a.nnz() * sizeof(uint32_t)));
    TETHER_RETURN_IF_ERROR(Stage(&d_val_, a.values + base, a.nnz() * sizeof(float)));
    return SpMMOperands(a.rows, a.cols, a.nnz(), d_rowptr_.as<int32_t>(), d_col_.as<int32_t>(),
                        d_val_.as<float>(), b, n, alpha, beta, c);
  }

  Status SpMMTransposed(const CsrView& a, const float* d, int64_t n, float alpha, float beta, float* c) override {
    TETHER_RETURN_IF_ERROR(CheckCsr(a, /*need_values=*/true, "SpMMTransposed", "a"));
    if (n < 0) return Status::InvalidArgument("SpMMTransposed: negative n");
    TETHER_RETURN_IF_ERROR(CheckDense(d, a.rows * n, "SpMMTransposed", "d"));
    TETHER_RETURN_IF_ERROR(CheckDense(c, a.cols * n, "SpMMTransposed", "c"));
    TETHER_RETURN_IF_ERROR(Check32("SpMMTransposed", {a.rows, a.cols, a.nnz(), n}));
    if (a.cols == 0 || n == 0) return Status::OK();
    TETHER_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    // Aᵀ in CSR by counting sort on the host: entries of each new row keep
    // increasing original-row order, so the product is deterministic.
    const int64_t nnz = a.nnz();
    h_rowptr32_.assign(a.cols + 1, 0);
    for (int64_t p = a.row_ptr[0]; p < a.row_ptr[a.rows]; ++p) ++h_rowptr32_[a.col_idx[p] + 1];
    for (int64_t j = 0; j < a.cols; ++j) h_rowptr32_[j + 1] += h_rowptr32_[j];
    h_col32_.resize(nnz);
    h_val_.resize(nnz);
    h_fill_.assign(h_rowptr32_.begin(), h_rowptr32_.end() - 1);
    for (int64_t i = 0; i < a.rows; ++i) {
      for (int64_t p = a.row_ptr[i]; p < a.row_ptr[i + 1]; ++p) {
        const int32_t dst = h_fill_[a.col_idx[p]]++;
        h_col32_[dst] = static_cast<int32_t>(i);
        h_val_[dst] = a.values[p];
      }
    }
    TETHER_RETURN_IF_ERROR(Stage(&d_rowptr_, h_rowptr32_.data(), (a.cols + 1) * sizeof(int32_t)));
    TETHER_RETURN_IF_ERROR(Stage(&d_col_, h_col32_.data(), nnz * sizeof(int32_t)));
    TETHER_RETURN_IF_ERROR(Stage(&d_val_, h_val_.data(), nnz * sizeof(float)));
    return SpMMOperands(a.cols, a.rows, nnz, d_rowptr_.as<int32_t>(), d_col_.as<int32_t>(), d_val_.as<float>(), d,
                        n, alpha, beta, c);
  }

  Status SpMM(const BackendCsr& a, const float* b, int64_t n, float alpha, float beta, float* c) override {
    TETHER_RETURN_IF_ERROR(CheckUsable(a, CsrUse::kSpMM, "SpMM"));
    if (n < 0) return Status::InvalidArgument("SpMM: negative n");
    TETHER_RETURN_IF_ERROR(CheckDense(b, a.cols * n, "SpMM", "b"));
    TETHER_RETURN_IF_ERROR(CheckDense(c, a.rows * n, "SpMM", "c"));
    TETHER_RETURN_IF_ERROR(Check32("SpMM", {n}));
    if (a.rows == 0 || n == 0) return Status::OK();
    TETHER_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    const CsrLayout lay(a);
    const int32_t* w = static_cast<const int32_t*>(a.storage->data());
    return SpMMOperands(a.rows, a.cols, a.nnz, w + lay.row_ptr, w + lay.col,
                        reinterpret_cast<const float*>(w + lay.val), b, n, alpha, beta, c);
  }

  Status SpMMTransposed(const BackendCsr& a, const float* d, int64_t n, float alpha, float beta,
                        float* c) override {
    TETHER_RETURN_IF_ERROR(CheckUsable(a, CsrUse::kSpMMAndTransposed, "SpMMTransposed"));
    if (n < 0) return Status::InvalidArgument("SpMMTransposed: negative n");
    TETHER_RETURN_IF_ERROR(CheckDense(d, a.rows * n, "SpMMTransposed", "d"));
    TETHER_RETURN_IF_ERROR(CheckDense(c, a.cols * n, "SpMMTransposed", "c"));
    TETHER_RETURN_IF_ERROR(Check32("SpMMTransposed", {n}));
    if (a.cols == 0 || n == 0) return Status::OK();
    TETHER_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    const CsrLayout lay(a);
    const int32_t* w = static_cast<const int32_t*>(a.storage->data());
    return SpMMOperands(a.cols, a.rows, a.nnz, w + lay.t_row_ptr, w + lay.t_col,
                        reinterpret_cast<const float*>(w + lay.t_val), d, n, alpha, beta, c);
  }

  Status Gemm(Transpose trans_a, Transpose trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
              int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) override {
    TETHER_ASSIGN_OR_RETURN(const backend_internal::GemmSpans spans,
                            backend_internal::CheckGemm(trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc,
                                                        "CUDA library indices"));
    if (m == 0 || n == 0) return Status::OK();
    const bool ta = trans_a == Transpose::kYes, tb = trans_b == Transpose::kYes;
    TETHER_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    TETHER_ASSIGN_OR_RETURN(const float* da, In(a, spans.a, &d_a_));
    TETHER_ASSIGN_OR_RETURN(const float* db, In(b, spans.b, &d_b_));
    // Read c in even when beta == 0: the padding between rows (ldc > n)
    // must come back unchanged.
    TETHER_ASSIGN_OR_RETURN(float* dc, Out(c, spans.c, &d_c_, /*read=*/true));
    if (k == 0) {
      for (int64_t i = 0; i < m; ++i) {
        cuda_kernels::Scale(stream_, n, beta, dc + i * ldc);
      }
      TETHER_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    } else {
      // Row-major C = op(A)·op(B) is column-major Cᵀ = op(B)ᵀ·op(A)ᵀ, and a
      // row-major array read column-major is its transpose: swap operands.
      TETHER_CUBLAS_RETURN_IF_ERROR(cublasSgemm(cublas_, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                                                static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), &alpha,
                                                db, static_cast<int>(ldb), da, static_cast<int>(lda), &beta, dc,
                                                static_cast<int>(ldc)));
    }
    return Finish(c, dc, spans.c * sizeof(float));
  }

  Status AddBias(int64_t rows, int64_t cols, const float* bias, float* x) override {
    if (rows < 0 || cols < 0) return Status::InvalidArgument("AddBias: negative shape");
    TETHER_RETURN_IF_ERROR(CheckDense(bias, rows > 0 ? cols : 0, "AddBias", "bias"));
    TETHER_RETURN_IF_ERROR(CheckDense(x, rows * cols, "AddBias", "x"));
    if (rows * cols == 0) return Status::OK();
    TETHER_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    TETHER_ASSIGN_OR_RETURN(const float* db, In(bias, cols, &d_a_));
    TETHER_ASSIGN_OR_RETURN(float* dx, Out(x, rows * cols, &d_c_, /*read=*/true));
    cuda_kernels::AddBias(stream_, rows, cols, db, dx);
    TETHER_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    return Finish(x, dx, rows * cols * sizeof(float));
  }

  Status ColumnSum(int64_t rows, int64_t cols, const float* x, float beta, float* out) override {
    if (rows < 0 || cols < 0) return Status::InvalidArgument("ColumnSum: negative shape");
    TETHER_RETURN_IF_ERROR(CheckDense(x, rows * cols, "ColumnSum", "x"));
    TETHER_RETURN_IF_ERROR(CheckDense(out, cols, "ColumnSum", "out"));
    if (cols == 0) return Status::OK();
    TETHER_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    TETHER_ASSIGN_OR_RETURN(const float* dx, In(x, rows * cols, &d_a_));
    TETHER_ASSIGN_OR_RETURN(float* dout, Out(out, cols, &d_c_, /*read=*/beta != 0.0f));
    cuda_kernels::ColumnSum(stream_, rows, cols, dx, beta, dout);
    TETHER_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    return Finish(out, dout, cols * sizeof(float));
  }

  Status Relu(int64_t n, const float* x, float* y) override {
    TETHER_RETURN_IF_ERROR(CheckDense(x, n, "Relu", "x"));
    TETHER_RETURN_IF_ERROR(CheckDense(y, n, "Relu", "y"));
    if (n == 0) return Status::OK();
    TETHER_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    TETHER_ASSIGN_OR_RETURN(const float* dx, In(x, n, &d_a_));
    // In place on the staged copy when x == y is host memory.
    float* dy = nullptr;
    if (y == x && dx != x) {
      dy = const_cast<float*>(dx);
    } else {
      TETHER_ASSIGN_OR_RETURN(dy, Out(y, n, &d_c_, /*read=*/false));
    }
    cuda_kernels::Relu(stream_, n, dx, dy);
    TETHER_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    return Finish(y, dy, n * sizeof(float));
  }

  Status ReluBackward(int64_t n, const float* y, float* dy) override {
    TETHER_RETURN_IF_ERROR(CheckDense(y, n, "ReluBackward", "y"));
    TETHER_RETURN_IF_ERROR(CheckDense(dy, n, "ReluBackward", "dy"));
    if (n == 0) return Status::OK();
    TETHER_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    TETHER_ASSIGN_OR_RETURN(const float* d_y, In(y, n, &d_a_));
    TETHER_ASSIGN_OR_RETURN(float* d_dy, Out(dy, n, &d_c_, /*read=*/true));
    cuda_kernels::ReluBackward(stream_, n, d_y, d_dy);
    TETHER_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    return Finish(dy, d_dy, n * sizeof(float));
  }

  Status Dropout(int64_t n, float rate, uint64_t seed, float* x) override {
    TETHER_RETURN_IF_ERROR(CheckDropoutArgs(n, rate, x));
    if (rate == 0.0f || n == 0) return Status::OK();
    TETHER_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    TETHER_ASSIGN_OR_RETURN(const float* staged, In(x, n, &d_a_));
    float* dx = const_cast<float*>(staged);  // in place, on the staged copy for host memory
    cuda_kernels::Dropout(stream_, n, seed, DropoutThreshold(rate), 1.0f / (1.0f - rate), dx);
    TETHER_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    return Finish(x, dx, n * sizeof(float));
  }

  Status SoftmaxCrossEntropy(int64_t rows, int64_t cols, const float* scores, const CsrView& labels,
                             float grad_scale, float* dscores, double* loss_sum,
                             float label_smoothing = 0.0f) override {
    return HostLabelsLoss(/*softmax=*/true, rows, cols, scores, labels, grad_scale, dscores, loss_sum,
                          label_smoothing);
  }
  Status SigmoidCrossEntropy(int64_t rows, int64_t cols, const float* scores, const CsrView& labels,
                             float grad_scale, float* dscores, double* loss_sum,
                             float label_smoothing = 0.0f) override {
    return HostLabelsLoss(/*softmax=*/false, rows, cols, scores, labels, grad_scale, dscores, loss_sum,
                          label_smoothing);
  }
  Status SoftmaxCrossEntropy(int64_t rows, int64_t cols, const float* scores, const BackendCsr& labels,
                             float grad_scale, float* dscores, double* loss_sum,
                             float label_smoothing = 0.0f) override {
    return UploadedLabelsLoss(/*softmax=*/true, rows, cols, scores, labels, grad_scale, dscores, loss_sum,
                              label_smoothing);
  }
  Status SigmoidCrossEntropy(int64_t rows, int64_t cols, const float* scores, const BackendCsr& labels,
                             float grad_scale, float* dscores, double* loss_sum,
                             float label_smoothing = 0.0f) override {
    return UploadedLabelsLoss(/*softmax=*/false, rows, cols, scores, labels, grad_scale, dscores, loss_sum,
                              label_smoothing);
  }

  Status TopK(int64_t rows, int64_t cols, const float* scores, int k, uint32_t* indices) override {
    if (rows < 0 || cols < 0) return Status::InvalidArgument("TopK: negative shape");
    if (k < 1 || k > cols) {
      return Status::InvalidArgument("TopK: k = " + std::to_string(k) + " outside [1, cols = " +
                                     std::to_string(cols) + "]");
    }
    TETHER_RETURN_IF_ERROR(CheckDense(scores, rows * cols, "TopK", "scores"));
    TETHER_RETURN_IF_ERROR(CheckDense(indices, rows * k, "TopK", "indices"));
    if (rows == 0) return Status::OK();
    TETHER_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    TETHER_ASSIGN_OR_RETURN(const float* ds, In(scores, rows * cols, &d_a_));
    TETHER_ASSIGN_OR_RETURN(uint32_t* di, Out(indices, rows * k, &d_c_, /*read=*/false));
    cuda_kernels::TopK(stream_, rows, cols, ds, k, di);
    TETHER_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    return Finish(indices, di, rows * k * sizeof(uint32_t));
  }

  // Page-locked, so Upload/Download from these buffers are DMA transfers
  // on stream_ (no driver staging copy); portable across devices.
  StatusOr<void*> AllocHost(size_t bytes) override {
    if (bytes == 0) return static_cast<void*>(nullptr);
    TETHER_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    void* p = nullptr;
    TETHER_CUDA_RETURN_IF_ERROR(cudaHostAlloc(&p, bytes, cudaHostAllocPortable));
    return p;
  }

  void FreeHost(void* p) override {
    if (p != nullptr) cudaFreeHost(p);
  }

 private:
  static Status Check32(const char* op, std::initializer_list<int64_t> sizes) {
    for (int64_t v : sizes) {
      if (v < 0 || v > INT_MAX) {
        return Status::InvalidArgument(std::string(op) + ": size " + std::to_string(v) +
                                       " outside [0, INT_MAX] (32-bit CUDA library indices)");
      }
    }
    return Status::OK();
  }

  // Copies host memory into a staging buffer (asynchronously, on stream_).
  Status Stage(DeviceBuffer* dst, const void* src, size_t bytes) {
    TETHER_RETURN_IF_ERROR(dst->Reserve(bytes));
    if (bytes > 0) {
      TETHER_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst->as<void>(), src, bytes, cudaMemcpyHostToDevice, stream_));
    }
    return Status::OK();
  }

  // An input operand of `count` elements: itself when it lies in one of our
  // buffers, else a copy in `staging`.
  template <typename T>
  StatusOr<const T*> In(const T* p, int64_t count, DeviceBuffer* staging) {
    const size_t bytes = static_cast<size_t>(count) * sizeof(T);
    if (count <= 0 || registry_.Contains(p, bytes)) return p;
    TETHER_RETURN_IF_ERROR(Stage(staging, p, bytes));
    return static_cast<const T*>(staging->as<T>());
  }

  // An output operand: itself when it lies in one of our buffers, else
  // `staging` (filled with the host contents first when the op reads them).
  template <typename T>
  StatusOr<T*> Out(T* p, int64_t count, DeviceBuffer* staging, bool read) {
    const size_t bytes = static_cast<size_t>(count) * sizeof(T);
    if (count <= 0 || registry_.Contains(p, bytes)) return p;
    if (read) {
      TETHER_RETURN_IF_ERROR(Stage(staging, p, bytes));
    } else {
      TETHER_RETURN_IF_ERROR(staging->Reserve(bytes));
    }
    return staging->as<T>();
  }

  // After an op: a staged output is copied back to `host` and waited for;
  // a resident one needs nothing (the op stays queued: no wait).
  Status Finish(void* host, const void* device, size_t bytes) {
    if (host == device) return Status::OK();
    if (bytes > 0) {
      TETHER_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, stream_));
    }
    TETHER_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
    return Status::OK();
  }

  // c[m×n] = alpha · A · b + beta · c, A = m × k CSR with 0-based int32
  // offsets already on the device; b and c host or buffer memory.
  Status SpMMOperands(int64_t m, int64_t k, int64_t nnz, const int32_t* row_ptr, const int32_t* col_idx,
                      const float* values, const float* b, int64_t n, float alpha, float beta, float* c) {
    const int64_t c_count = m * n;
    TETHER_ASSIGN_OR_RETURN(float* dc, Out(c, c_count, &d_c_, /*read=*/beta != 0.0f));
    if (beta == 0.0f) {
      // beta == 0 must not read c (it may hold NaN): start from zeros.
      TETHER_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(dc, 0, c_count * sizeof(float), stream_));
    }
    if (nnz == 0 || k == 0) {  // A·b = 0: c = beta · c
      cuda_kernels::Scale(stream_, c_count, beta, dc);
      TETHER_CUDA_RETURN_IF_ERROR(cudaGetLastError());
      return Finish(c, dc, c_count * sizeof(float));
    }
    TETHER_ASSIGN_OR_RETURN(const float* db, In(b, k * n, &d_b_));
    cusparseSpMatDescr_t mat_a = nullptr;
    cusparseDnMatDescr_t mat_b = nullptr, mat_c = nullptr;
    Status st = [&]() -> Status {
      // cuSPARSE's descriptors take non-const pointers; it only reads A and b.
      TETHER_CUSPARSE_RETURN_IF_ERROR(cusparseCreateCsr(&mat_a, m, k, nnz, const_cast<int32_t*>(row_ptr),
                                                        const_cast<int32_t*>(col_idx), const_cast<float*>(values),
                                                        CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I,
                                                        CUSPARSE_INDEX_BASE_ZERO, CUDA_R_32F));
      TETHER_CUSPARSE_RETURN_IF_ERROR(
          cusparseCreateDnMat(&mat_b, k, n, n, const_cast<float*>(db), CUDA_R_32F, CUSPARSE_ORDER_ROW));
      TETHER_CUSPARSE_RETURN_IF_ERROR(cusparseCreateDnMat(&mat_c, m, n, n, dc, CUDA_R_32F, CUSPARSE_ORDER_ROW));
      // CSR_ALG2 is documented as deterministic and suited to row-major
      // dense operands; fall back to the default where it is not supported.
      cusparseSpMMAlg_t alg = CUSPARSE_SPMM_CSR_ALG2;
      size_t work_bytes = 0;
      cusparseStatus_t s = cusparseSpMM_bufferSize(cusparse_, CUSPARSE_OPERATION_NON_TRANSPOSE,
                                                   CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha, mat_a, mat_b, &beta,
                                                   mat_c, CUDA_R_32F, alg, &work_bytes);
      if (s == CUSPARSE_STATUS_NOT_SUPPORTED) {
        alg = CUSPARSE_SPMM_ALG_DEFAULT;
        s = cusparseSpMM_bufferSize(cusparse_, CUSPARSE_OPERATION_NON_TRANSPOSE, CUSPARSE_OPERATION_NON_TRANSPOSE,
                                    &alpha, mat_a, mat_b, &beta, mat_c, CUDA_R_32F, alg, &work_bytes);
      }
      TETHER_CUSPARSE_RETURN_IF_ERROR(s);
      TETHER_RETURN_IF_ERROR(d_work_.Reserve(std::max<size_t>(work_bytes, 1)));
      TETHER_CUSPARSE_RETURN_IF_ERROR(cusparseSpMM(cusparse_, CUSPARSE_OPERATION_NON_TRANSPOSE,
                                                   CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha, mat_a, mat_b, &beta,
                                                   mat_c, CUDA_R_32F, alg, d_work_.as<void>()));
      return Status::OK();
    }();
    if (mat_a != nullptr) cusparseDestroySpMat(mat_a);
    if (mat_b != nullptr) cusparseDestroyDnMat(mat_b);
    if (mat_c != nullptr) cusparseDestroyDnMat(mat_c);
    TETHER_RETURN_IF_ERROR(st);
    return Finish(c, dc, c_count * sizeof(float));
  }

  Status CheckLossArgs(const char* op, int64_t rows, int64_t cols, const float* scores, int64_t label_rows,
                       int64_t label_cols, const double* loss_sum) {
    if (rows < 0 || cols < 0) return Status::InvalidArgument(std::string(op) + ": negative shape");
    TETHER_RETURN_IF_ERROR(CheckDense(scores, rows * cols, op, "scores"));
    if (label_rows != rows || label_cols > cols) {
      return Status::InvalidArgument(std::string(op) + ": labels shape differs from scores");
    }
    if (loss_sum == nullptr) return Status::InvalidArgument(std::string(op) + ": null loss_sum");
    return Status::OK();
  }

  Status HostLabelsLoss(bool softmax, int64_t rows, int64_t cols, const float* scores, const CsrView& labels,
                        float grad_scale, float* dscores, double* loss_sum, float eps) {
    const char* op = softmax ? "SoftmaxCrossEntropy" : "SigmoidCrossEntropy";
    TETHER_RETURN_IF_ERROR(CheckLossArgs(op, rows, cols, scores, labels.rows, labels.cols, loss_sum));
    TETHER_RETURN_IF_ERROR(CheckLabelSmoothing(eps, op));
    TETHER_RETURN_IF_ERROR(CheckCsr(labels, /*need_values=*/false, op, "labels"));
    *loss_sum = 0.0;
    if (rows == 0) return Status::OK();
    TETHER_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    const int64_t base = labels.row_ptr[0], nnz = labels.nnz();
    h_rowptr64_.resize(rows + 1);
    for (int64_t r = 0; r <= rows; ++r) h_rowptr64_[r] = labels.row_ptr[r] - base;
    TETHER_RETURN_IF_ERROR(Stage(&d_rowptr_, h_rowptr64_.data(), (rows + 1) * sizeof(int64_t)));
    TETHER_RETURN_IF_ERROR(Stage(&d_col_, labels.col_idx + base, nnz * sizeof(uint32_t)));
    return RunLoss(softmax, rows, cols, scores, d_rowptr_.as<int64_t>(), d_col_.as<uint32_t>(), grad_scale, dscores,
                   loss_sum, eps);
  }

  Status UploadedLabelsLoss(bool softmax, int64_t rows, int64_t cols, const float* scores, const BackendCsr& labels,
                            float grad_scale, float* dscores, double* loss_sum, float eps) {
    const char* op = softmax ? "SoftmaxCrossEntropy" : "SigmoidCrossEntropy";
    TETHER_RETURN_IF_ERROR(CheckUsable(labels, CsrUse::kLabels, op));
    TETHER_RETURN_IF_ERROR(CheckLossArgs(op, rows, cols, scores, labels.rows, labels.cols, loss_sum));
    TETHER_RETURN_IF_ERROR(CheckLabelSmoothing(eps, op));
    *loss_sum = 0.0;
    if (rows == 0) return Status::OK();
    TETHER_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    const CsrLayout lay(labels);
    const int32_t* w = static_cast<const int32_t*>(labels.storage->data());
    return RunLoss(softmax, rows, cols, scores, w + lay.row_ptr, reinterpret_cast<const uint32_t*>(w + lay.col),
                   grad_scale, dscores, loss_sum, eps);
  }

  // The loss kernels on device labels (row_ptr from 0); scores / dscores
  // host or buffer memory; the per-row losses come back and are summed on
  // the host in row order (deterministic): this op always waits.
  template <typename I>
  Status RunLoss(bool softmax, int64_t rows, int64_t cols, const float* scores, const I* row_ptr,
                 const uint32_t* col_idx, float grad_scale, float* dscores, double* loss_sum, float eps) {
    TETHER_ASSIGN_OR_RETURN(const float* ds, In(scores, rows * cols, &d_a_));
    float* dd = nullptr;
    if (dscores != nullptr) {
      if (dscores == scores && ds != scores) {
        dd = const_cast<float*>(ds);  // in place on the staged copy
      } else {
        TETHER_ASSIGN_OR_RETURN(dd, Out(dscores, rows * cols, &d_c_, /*read=*/false));
      }
    }
    TETHER_RETURN_IF_ERROR(d_loss_.Reserve(rows * sizeof(double)));
    cuda_kernels::CrossEntropy<I>(stream_, softmax, rows, cols, ds, row_ptr, col_idx, grad_scale, dd,
                                  d_loss_.as<double>(), static_cast<double>(eps));
    TETHER_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    if (dscores != nullptr && dd != dscores) {
      TETHER_CUDA_RETURN_IF_ERROR(
          cudaMemcpyAsync(dscores, dd, rows * cols * sizeof(float), cudaMemcpyDeviceToHost, stream_));
    }
    h_loss_.resize(rows);
    TETHER_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(h_loss_.data(), d_loss_.as<double>(), rows * sizeof(double),
                                                cudaMemcpyDeviceToHost, stream_));
    TETHER_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
    double total = 0.0;
    for (double v : h_loss_) total += v;
    *loss_sum = total;
    return Status::OK();
  }

  const int device_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  cusparseHandle_t cusparse_ = nullptr;
  backend_internal::BufferRegistry registry_;  // live CudaBuffers
  // UploadCsr's pinned staging, and the event its last copy records.
  PinnedBuffer pack_;
  cudaEvent_t pack_done_ = nullptr;
  bool pack_pending_ = false;
  // Device staging for host operands, reused across calls.
  DeviceBuffer d_rowptr_, d_col_, d_val_, d_a_, d_b_, d_c_, d_work_, d_loss_;
  // Host staging for index conversion.
  std::vector<int32_t> h_rowptr32_, h_col32_, h_fill_;
  std::vector<int64_t> h_rowptr64_;
  std::vector<float> h_val_;
  std::vector<double> h_loss_;
};

}  // namespace

int CudaDeviceCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error so later calls see a clean state
    return 0;
  }
  return count;
}

StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(int device) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return Status::Unavailable(std::string("no usable CUDA device (cudaGetDeviceCount: ") +
                               cudaGetErrorString(e) + ")");
  }
  if (count == 0) return Status::Unavailable("no CUDA device visible");
  if (device < 0 || device >= count) {
    return Status::Unavailable("CUDA device " + std::to_string(device) + " requested but only " +
                               std::to_string(count) + " visible");
  }
  auto backend = std::make_unique<CudaBackend>(device);
  TETHER_RETURN_IF_ERROR(backend->Init());
  return std::unique_ptr<Backend>(std::move(backend));
}

}  // namespace tether
