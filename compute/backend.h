// Backend: the compute operations the models need (sparse × dense products,
// dense GEMM, bias, ReLU, losses, top-k), behind one interface with a CPU
// implementation (compute/cpu_backend.h) and a CUDA one (compute/cuda/),
// chosen at run time by CreateBackend() (house style: ggml's backends).
//
// Memory: an op's dense operands (float* / uint32_t*) are row-major and
// borrowed for the call; each may lie in HOST memory or in a BUFFER of the
// same backend (AllocBuffer: device memory on CUDA, plain host memory on the
// CPU backend). The sparse operand of SpMM / the losses is either a CsrView
// of host arrays or a BackendCsr uploaded once (UploadCsr). Buffers are
// host-visible only through explicit Upload / Download (ggml's backend
// buffers), unless buffers_host_visible() says they are host memory. A
// device backend runs an op whose operands are all buffers without any
// host↔device copy and without waiting (ops queue on its stream); a host
// operand it copies in (and out, for outputs) around that op, which is
// correct but costs a transfer each time: the models keep a minibatch's
// activations in buffers, upload pulled rows once and download gradients
// once (MirroredArray, BackendArray below).
//
// Ordering: ops, Upload and Download of one backend run in call order.
// Download (and any op that returns a host result: the losses' loss_sum,
// an op with a host output) waits for everything queued before it, so host
// memory read after it is final. A host source given to Upload must stay
// unchanged until the next Download or Synchronize.
//
// Determinism: a backend gives bit-identical outputs for identical inputs on
// the same machine, thread count and build (the CPU backend does; see the
// CUDA backend's header for its exceptions).
//
// Errors: ops return InvalidArgument for inconsistent shapes, null buffers or
// out-of-range CSR column indices (checked: O(nnz), small next to the
// product), and a GPU backend returns Internal/Unavailable for runtime
// failures. An op that fails may have partly written its output.
//
// Thread-safety: a Backend object is NOT thread-safe (it may keep scratch
// space); use one per thread. Distinct objects may be used concurrently,
// except where an implementation documents process-wide settings
// (CpuBackend's OpenBLAS thread count).
#pragma once

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>

#include "core/status.h"
#include "input/csr.h"

namespace tether {

/// A borrowed, read-only view of a CSR matrix (rows × cols). Row r occupies
/// positions [row_ptr[r], row_ptr[r+1]) of col_idx/values. row_ptr[0] need
/// not be 0, so a view may cover a row slice of a larger matrix. `values`
/// may be null for ops that ignore values (the label arguments of the
/// losses). The viewed arrays must outlive every call that uses the view.
struct CsrView {
  int64_t rows = 0;
  int64_t cols = 0;
  const int64_t* row_ptr = nullptr;  // rows + 1 entries
  const uint32_t* col_idx = nullptr;
  const float* values = nullptr;

  int64_t nnz() const { return rows == 0 ? 0 : row_ptr[rows] - row_ptr[0]; }
};

/// Views all of `m` (which must outlive the view).
inline CsrView ViewOf(const CsrMatrix& m) {
  return CsrView{m.rows, m.cols, m.row_ptr.data(), m.col_idx.data(),
                 m.values.empty() ? nullptr : m.values.data()};
}

/// Views rows [begin, end) of `m`; CHECK-fails on an invalid range
/// (a programming error, not a data error).
inline CsrView RowSliceOf(const CsrMatrix& m, int64_t begin, int64_t end) {
  CHECK(0 <= begin && begin <= end && end <= m.rows)
      << "row slice [" << begin << ", " << end << ") of " << m.rows << " rows";
  return CsrView{end - begin, m.cols, m.row_ptr.data() + begin, m.col_idx.data(),
                 m.values.empty() ? nullptr : m.values.data()};
}

/// Dropout's mask (Backend::Dropout): element i of a call with `seed` is
/// kept when the top 24 bits of a SplitMix64 hash (Steele, Lea & Flood,
/// OOPSLA 2014) of (seed, i) are ≥ DropoutThreshold(rate), so a fraction
/// 1 − threshold / 2^24 of the elements is kept on average. The CUDA
/// backend's kernel computes the same bits (compute/cuda/cuda_backend.cu),
/// so every backend draws the same mask; pure and thread-safe.
inline uint64_t DropoutHash(uint64_t seed, uint64_t i) {
  uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
/// round(rate · 2^24) for a rate in [0, 1).
inline uint32_t DropoutThreshold(float rate) {
  return static_cast<uint32_t>(static_cast<double>(rate) * 16777216.0 + 0.5);
}
inline bool DropoutKeeps(uint64_t seed, uint64_t i, uint32_t threshold) {
  return static_cast<uint32_t>(DropoutHash(seed, i) >> 40) >= threshold;
}
/// The Status of a Dropout call's arguments (every backend's check).
inline Status CheckDropoutArgs(int64_t n, float rate, const float* x) {
  if (!(rate >= 0.0f && rate < 1.0f))
    return Status::InvalidArgument("Dropout: rate " + std::to_string(rate) + " outside [0, 1)");
  if (n < 0) return Status::InvalidArgument("Dropout: negative n");
  if (n > 0 && x == nullptr) return Status::InvalidArgument("Dropout: null x");
  return Status::OK();
}
/// The Status of a loss's label_smoothing (every backend's check).
inline Status CheckLabelSmoothing(float eps, const char* op) {
  if (eps >= 0.0f && eps < 1.0f) return Status::OK();
  return Status::InvalidArgument(std::string(op) + ": label_smoothing " + std::to_string(eps) + " outside [0, 1)");
}

/// Whether a dense operand of Gemm is used as stored or transposed.
enum class Transpose { kNo, kYes };

// Argument checks shared by the backend implementations (header-only so the
// CUDA target needs no link dependency on tether_compute). Not part of the
// public API.
namespace backend_internal {

/// Checks a CSR operand: non-negative sizes, cols within uint32 range,
/// non-decreasing row_ptr, non-null arrays where nnz > 0 (values only when
/// need_values), every column index < cols. O(rows + nnz).
inline Status CheckCsr(const CsrView& a, bool need_values, const char* op, const char* arg) {
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument(std::string(op) + ": CSR argument '" + arg + "' " + why);
  };
  if (a.rows < 0 || a.cols < 0) return bad("has negative shape");
  if (a.cols > int64_t{1} << 32) return bad("has more columns than uint32 indices can address");
  if (a.row_ptr == nullptr) return bad("has a null row_ptr");
  for (int64_t r = 0; r < a.rows; ++r) {
    if (a.row_ptr[r + 1] < a.row_ptr[r]) {
      return bad("has a decreasing row_ptr at row " + std::to_string(r));
    }
  }
  const int64_t begin = a.row_ptr[0];
  const int64_t end = a.row_ptr[a.rows];
  if (begin < 0) return bad("has a negative row_ptr[0]");
  if (end > begin && a.col_idx == nullptr) return bad("has a null col_idx");
  if (end > begin && need_values && a.values == nullptr) return bad("has null values");
  const uint64_t cols = static_cast<uint64_t>(a.cols);
  for (int64_t p = begin; p < end; ++p) {
    if (a.col_idx[p] >= cols) {
      return bad("has column index " + std::to_string(a.col_idx[p]) + " >= cols " +
                 std::to_string(a.cols));
    }
  }
  return Status::OK();
}

/// Checks a dense buffer argument of `count` floats (null allowed when empty).
inline Status CheckDense(const void* p, int64_t count, const char* op, const char* arg) {
  if (count < 0) {
    return Status::InvalidArgument(std::string(op) + ": '" + arg + "' has negative size");
  }
  if (count > 0 && p == nullptr) {
    return Status::InvalidArgument(std::string(op) + ": '" + arg + "' is null");
  }
  return Status::OK();
}

/// Floats each Gemm operand spans as stored, from the first element to the
/// last one read or written: what a backend copies or checks.
struct GemmSpans {
  int64_t a = 0, b = 0, c = 0;
};

/// Every backend's Gemm argument check (Backend::Gemm's contract): sizes and
/// strides in [0, INT_MAX] (`library` names the 32-bit interface for the
/// message: "BLAS", "CUDA library"), leading dimensions at least their row
/// length, and non-null buffers where elements are touched. c spans
/// (m - 1)·ldc + n floats when m, n > 0; a and b span nothing when any of
/// m, n, k is 0 (then c = beta·c, or nothing to do).
inline StatusOr<GemmSpans> CheckGemm(Transpose trans_a, Transpose trans_b, int64_t m, int64_t n, int64_t k,
                                     const float* a, int64_t lda, const float* b, int64_t ldb, const float* c,
                                     int64_t ldc, const char* library) {
  for (int64_t v : {m, n, k, lda, ldb, ldc}) {
    if (v < 0 || v > INT_MAX) {
      return Status::InvalidArgument("Gemm: size or stride " + std::to_string(v) + " outside [0, INT_MAX] (32-bit " +
                                     library + ")");
    }
  }
  const bool ta = trans_a == Transpose::kYes;
  const bool tb = trans_b == Transpose::kYes;
  // Stored shapes: a is m×k (k×m if transposed), b is k×n (n×k if transposed).
  const int64_t a_rows = ta ? k : m, a_cols = ta ? m : k;
  const int64_t b_rows = tb ? n : k, b_cols = tb ? k : n;
  if (lda < std::max<int64_t>(1, a_cols) || ldb < std::max<int64_t>(1, b_cols) || ldc < std::max<int64_t>(1, n)) {
    return Status::InvalidArgument("Gemm: a leading dimension is smaller than its row length");
  }
  GemmSpans spans;
  if (m == 0 || n == 0) return spans;
  spans.c = (m - 1) * ldc + n;
  TETHER_RETURN_IF_ERROR(CheckDense(c, spans.c, "Gemm", "c"));
  if (k == 0) return spans;
  spans.a = (a_rows - 1) * lda + a_cols;
  spans.b = (b_rows - 1) * ldb + b_cols;
  TETHER_RETURN_IF_ERROR(CheckDense(a, spans.a, "Gemm", "a"));
  TETHER_RETURN_IF_ERROR(CheckDense(b, spans.b, "Gemm", "b"));
  return spans;
}

/// Address ranges of a device backend's live buffers, so an op can tell a
/// buffer operand (used in place) from a host one (copied in and out).
/// O(log buffers) per lookup. Not thread-safe (one per backend object).
class BufferRegistry {
 public:
  void Add(const void* p, size_t bytes) {
    if (p != nullptr && bytes > 0) ranges_[reinterpret_cast<uintptr_t>(p)] = bytes;
  }
  void Remove(const void* p) { ranges_.erase(reinterpret_cast<uintptr_t>(p)); }
  /// Whether [p, p + bytes) lies inside one registered buffer (bytes 0: p
  /// itself does). Null is never inside.
  bool Contains(const void* p, size_t bytes) const {
    if (p == nullptr || ranges_.empty()) return false;
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    auto it = ranges_.upper_bound(a);
    if (it == ranges_.begin()) return false;
    --it;
    const uintptr_t end = it->first + it->second;
    return a < end && bytes <= end - a;
  }
  size_t size() const { return ranges_.size(); }
  /// Calls f(start, bytes) for every registered buffer.
  template <typename F>
  void ForEach(F f) const {
    for (const auto& [start, bytes] : ranges_) f(reinterpret_cast<void*>(start), bytes);
  }

 private:
  std::map<uintptr_t, size_t> ranges_;  // start → bytes
};

}  // namespace backend_internal

class Backend;

/// Memory allocated by a backend for op operands (Backend::AllocBuffer):
/// device memory on a GPU backend, 64-byte-aligned host memory on the CPU
/// backend. data() is the address ops take; the host may dereference it only
/// when the owner's buffers_host_visible() is true, otherwise only through
/// Upload / Download. Owned by the caller (unique_ptr); the backend that
/// made it must outlive it. Not thread-safe (as its backend).
class BackendBuffer {
 public:
  virtual ~BackendBuffer() = default;
  BackendBuffer(const BackendBuffer&) = delete;
  BackendBuffer& operator=(const BackendBuffer&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  const Backend* owner() const { return owner_; }

 protected:
  BackendBuffer(const Backend* owner, void* data, size_t bytes) : owner_(owner), data_(data), bytes_(bytes) {}

 private:
  const Backend* owner_;
  void* data_;
  size_t bytes_;
};

namespace backend_internal {
/// The default BackendBuffer: 64-byte-aligned host memory (std::free'd).
class HostMemoryBuffer final : public BackendBuffer {
 public:
  HostMemoryBuffer(const Backend* owner, void* data, size_t bytes) : BackendBuffer(owner, data, bytes) {}
  ~HostMemoryBuffer() override { std::free(data()); }
};
}  // namespace backend_internal

/// What an uploaded CSR matrix is used for (Backend::UploadCsr).
enum class CsrUse {
  kLabels,             // the losses' label argument: values ignored (may be null)
  kSpMM,               // SpMM: values required
  kSpMMAndTransposed,  // SpMM and SpMMTransposed (a device backend stores Aᵀ too)
};

/// A CSR matrix made ready once for several ops (a minibatch's inputs and
/// labels): UploadCsr validates it (as the ops do) and, on a device backend,
/// copies it up in one transfer into `storage` (layout: the backend's own).
/// On a backend with host-visible buffers it only keeps the view: the viewed
/// arrays must then outlive its uses. Reuse one object across minibatches
/// (storage only grows). Not thread-safe.
struct BackendCsr {
  const Backend* owner = nullptr;  // the backend that filled it; ops of any other refuse it
  int64_t rows = 0, cols = 0, nnz = 0;
  CsrUse use = CsrUse::kLabels;
  CsrView view;                            // host-visible backends: the borrowed arrays
  std::unique_ptr<BackendBuffer> storage;  // device backends: their copy
};

class Backend {
 public:
  virtual ~Backend() = default;

  /// Short stable name for logs: "cpu", "cuda:0".
  virtual std::string name() const = 0;

  /// Sparse × dense: c[m×n] = alpha · A[m×k] · b[k×n] + beta · c, where
  /// m = a.rows, k = a.cols. With beta == 0, c is not read (may hold NaN).
  /// a.values must be non-null. Errors: InvalidArgument (shapes, nulls,
  /// a column index >= a.cols).
  virtual Status SpMM(const CsrView& a, const float* b, int64_t n, float alpha, float beta,
                      float* c) = 0;

  /// Transposed sparse × dense: c[k×n] = alpha · Aᵀ · d[m×n] + beta · c,
  /// where m = a.rows, k = a.cols (the gradient of SpMM w.r.t. its dense
  /// operand). With beta == 0, c is not read. Errors: as SpMM.
  virtual Status SpMMTransposed(const CsrView& a, const float* d, int64_t n, float alpha,
                                float beta, float* c) = 0;

  /// Dense GEMM with the semantics of row-major cblas_sgemm:
  /// c[m×n] = alpha · op(a) · op(b) + beta · c, op(a) m×k, op(b) k×n; lda,
  /// ldb, ldc are row strides in floats (lda >= k when trans_a == kNo, else
  /// >= m; likewise ldb, and ldc >= n). With beta == 0, c is not read.
  /// Errors: InvalidArgument (negative sizes, strides too small, sizes
  /// beyond 32-bit BLAS limits, null buffers).
  virtual Status Gemm(Transpose trans_a, Transpose trans_b, int64_t m, int64_t n, int64_t k,
                      float alpha, const float* a, int64_t lda, const float* b, int64_t ldb,
                      float beta, float* c, int64_t ldc) = 0;

  /// Broadcast bias: x[r, j] += bias[j] for x: rows × cols.
  virtual Status AddBias(int64_t rows, int64_t cols, const float* bias, float* x) = 0;

  /// Column sums (the gradient of AddBias): out[j] = Σ_r x[r, j] + beta ·
  /// out[j], x: rows × cols, out: cols. With beta == 0, out is not read.
  /// Rows are summed in increasing order (deterministic).
  virtual Status ColumnSum(int64_t rows, int64_t cols, const float* x, float beta, float* out) = 0;

  /// y[i] = max(x[i], 0) for n elements; y may equal x (in place).
  virtual Status Relu(int64_t n, const float* x, float* y) = 0;

  /// Backward mask of Relu: dy[i] = (y[i] > 0) ? dy[i] : 0, where y is the
  /// Relu OUTPUT of the forward pass (n elements).
  virtual Status ReluBackward(int64_t n, const float* y, float* dy) = 0;

  /// Inverted dropout (Srivastava et al., "Dropout: A Simple Way to Prevent
  /// Neural Networks from Overfitting", JMLR 15, 2014), in place on n
  /// elements: x[i] = DropoutKeeps(seed, i, DropoutThreshold(rate)) ?
  /// x[i] · (1 / (1 − rate)) : 0 (the scale a float, 1.0f / (1.0f − rate)).
  /// The mask is a counter-based hash of (seed, i), so it is never stored or
  /// transferred: the backward pass calls Dropout again with the same seed
  /// on the gradient (the same mask and scale), and every backend computes
  /// the same mask. rate 0 leaves x untouched. Errors: InvalidArgument for
  /// a rate outside [0, 1) or not finite, a negative n or a null x.
  virtual Status Dropout(int64_t n, float rate, uint64_t seed, float* x) = 0;

  /// Row-wise softmax cross-entropy against a normalised multi-label target:
  /// for row r with label set Y_r (labels: rows × cols CSR, values ignored),
  /// target t_r = 1/|Y_r| on Y_r and 0 elsewhere, p_r = softmax(scores_r),
  ///   loss_r = −Σ_j t_rj · log p_rj = logsumexp(scores_r) − mean_{j∈Y_r} scores_rj,
  ///   dscores_r = grad_scale · (p_r − t_r).
  /// Rows with empty Y_r have loss 0 and dscores 0. Labels are assumed
  /// unique within a row (a repeated label counts twice in the target).
  /// scores, dscores: rows × cols row-major; dscores may equal scores (in
  /// place) or be null (loss only). *loss_sum = Σ_r loss_r (natural log,
  /// not scaled by grad_scale), accumulated in double.
  /// label_smoothing ε in [0, 1) (Szegedy et al., "Rethinking the Inception
  /// Architecture for Computer Vision", CVPR 2016): the target of a row with
  /// labels is t'_r = (1 − ε)·t_r + ε/cols, so loss_r = logsumexp(scores_r)
  /// − (1 − ε)·mean_{j∈Y_r} scores_rj − ε·mean_j scores_rj and dscores_r =
  /// grad_scale · (p_r − t'_r); ε = 0 is the loss above, bit for bit.
  /// Errors: InvalidArgument (shapes, nulls, a label index >= cols, ε
  /// outside [0, 1)).
  virtual Status SoftmaxCrossEntropy(int64_t rows, int64_t cols, const float* scores,
                                     const CsrView& labels, float grad_scale, float* dscores,
                                     double* loss_sum, float label_smoothing = 0.0f) = 0;

  /// Independent sigmoid binary cross-entropy per (row, label), target
  /// y_rj = 1 for j ∈ Y_r, else 0 (labels: rows × cols CSR, values ignored;
  /// rows with empty Y_r are all-negative):
  ///   loss_r = Σ_j [softplus(s_rj) − y_rj · s_rj]   (computed stably),
  ///   dscores_rj = grad_scale · (sigmoid(s_rj) − y_rj).
  /// label_smoothing ε: the targets become y'_rj = (1 − ε)·y_rj + ε/2 in
  /// both (ε = 0: bit for bit the above). In-place / null dscores, loss_sum
  /// and errors as SoftmaxCrossEntropy.
  virtual Status SigmoidCrossEntropy(int64_t rows, int64_t cols, const float* scores,
                                     const CsrView& labels, float grad_scale, float* dscores,
                                     double* loss_sum, float label_smoothing = 0.0f) = 0;

  /// Per row of scores (rows × cols), the column indices of the k largest
  /// scores in decreasing order of score; ties go to the smaller index; NaN
  /// ranks below every number. indices: rows × k. Errors: InvalidArgument
  /// unless 1 <= k <= cols, or for null buffers.
  virtual Status TopK(int64_t rows, int64_t cols, const float* scores, int k,
                      uint32_t* indices) = 0;

  // ---- Buffers and transfers (see the file comment). Defaults: host
  // memory, so a backend whose buffers are host memory (CPU) needs none.

  /// True when buffers are host memory (the CPU backend): their data() may
  /// be read and written directly, and Upload / Download are plain copies
  /// that a caller can skip by working in the buffer itself (MirroredArray
  /// does). False on a device backend.
  virtual bool buffers_host_visible() const { return true; }

  /// A buffer of `bytes` bytes (contents undefined; 0 gives an empty buffer
  /// with a null data()). Errors: Internal when the allocation fails.
  virtual StatusOr<std::unique_ptr<BackendBuffer>> AllocBuffer(size_t bytes) {
    void* p = nullptr;
    if (bytes > 0) {
      p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
      if (p == nullptr) return Status::Internal("AllocBuffer: cannot allocate " + std::to_string(bytes) + " bytes");
    }
    return std::unique_ptr<BackendBuffer>(std::make_unique<backend_internal::HostMemoryBuffer>(this, p, bytes));
  }

  /// Copies `bytes` bytes from host memory `src` to dst->data() + offset.
  /// May return before the copy is done (a device backend queues it on its
  /// stream; from AllocHost memory it is a DMA transfer): `src` must stay
  /// unchanged until the next Download or Synchronize. Errors:
  /// InvalidArgument (a buffer of another backend, a range beyond the
  /// buffer, null src with bytes > 0); Internal (runtime).
  virtual Status Upload(const void* src, BackendBuffer* dst, size_t offset, size_t bytes) {
    TETHER_RETURN_IF_ERROR(CheckTransfer(dst, offset, bytes, src, "Upload"));
    char* to = static_cast<char*>(dst->data()) + offset;
    if (bytes > 0 && to != src) std::memmove(to, src, bytes);
    return Status::OK();
  }

  /// Copies `bytes` bytes from src.data() + offset to host memory `dst`,
  /// after every op and Upload queued before it: `dst` is final on return.
  /// Errors as Upload.
  virtual Status Download(const BackendBuffer& src, size_t offset, void* dst, size_t bytes) {
    TETHER_RETURN_IF_ERROR(CheckTransfer(&src, offset, bytes, dst, "Download"));
    const char* from = static_cast<const char*>(src.data()) + offset;
    if (bytes > 0 && from != dst) std::memmove(dst, from, bytes);
    return Status::OK();
  }

  /// Waits for everything queued (a no-op where ops are synchronous).
  /// Errors: Internal (a device error, possibly from an earlier queued op).
  virtual Status Synchronize() { return Status::OK(); }

  /// Makes `a` ready for the ops named by `use` into *dst (reusing its
  /// storage): validates it as those ops would (sizes, row_ptr order, column
  /// indices < cols, values present unless use == kLabels) and, on a device
  /// backend, uploads it in one transfer. `a` may be a row slice (row_ptr[0]
  /// != 0). Host-visible backends keep the view: a's arrays must outlive
  /// *dst's uses. Errors: InvalidArgument (the checks), Internal (runtime);
  /// after an error *dst is unusable (ops refuse it) until an upload succeeds.
  virtual Status UploadCsr(const CsrView& a, CsrUse use, BackendCsr* dst) {
    TETHER_RETURN_IF_ERROR(CheckUploadCsr(a, use, dst));
    dst->view = a;
    return Status::OK();
  }

  /// SpMM, SpMMTransposed and the losses with an uploaded sparse operand
  /// (same semantics as the CsrView forms). Errors additionally:
  /// InvalidArgument when the BackendCsr came from another backend or was
  /// uploaded for another use (SpMMTransposed needs kSpMMAndTransposed; the
  /// products need values). The defaults serve host-visible backends.
  virtual Status SpMM(const BackendCsr& a, const float* b, int64_t n, float alpha, float beta, float* c) {
    TETHER_RETURN_IF_ERROR(CheckUsable(a, CsrUse::kSpMM, "SpMM"));
    return SpMM(a.view, b, n, alpha, beta, c);
  }
  virtual Status SpMMTransposed(const BackendCsr& a, const float* d, int64_t n, float alpha, float beta, float* c) {
    TETHER_RETURN_IF_ERROR(CheckUsable(a, CsrUse::kSpMMAndTransposed, "SpMMTransposed"));
    return SpMMTransposed(a.view, d, n, alpha, beta, c);
  }
  virtual Status SoftmaxCrossEntropy(int64_t rows, int64_t cols, const float* scores, const BackendCsr& labels,
                                     float grad_scale, float* dscores, double* loss_sum,
                                     float label_smoothing = 0.0f) {
    TETHER_RETURN_IF_ERROR(CheckUsable(labels, CsrUse::kLabels, "SoftmaxCrossEntropy"));
    return SoftmaxCrossEntropy(rows, cols, scores, labels.view, grad_scale, dscores, loss_sum, label_smoothing);
  }
  virtual Status SigmoidCrossEntropy(int64_t rows, int64_t cols, const float* scores, const BackendCsr& labels,
                                     float grad_scale, float* dscores, double* loss_sum,
                                     float label_smoothing = 0.0f) {
    TETHER_RETURN_IF_ERROR(CheckUsable(labels, CsrUse::kLabels, "SigmoidCrossEntropy"));
    return SigmoidCrossEntropy(rows, cols, scores, labels.view, grad_scale, dscores, loss_sum, label_smoothing);
  }

  /// Host memory for buffers that cross to the device every minibatch
  /// (pulled parameters, dense inputs): page-locked on the CUDA backend, so
  /// its copies are DMA transfers on its stream with no staging copy;
  /// ordinary 64-byte-aligned memory by default (the CPU backend). `bytes`
  /// 0 gives nullptr. Release with FreeHost of the same backend. Errors:
  /// Internal when the allocation fails. Prefer HostArray below.
  virtual StatusOr<void*> AllocHost(size_t bytes) {
    if (bytes == 0) return static_cast<void*>(nullptr);
    void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (p == nullptr) return Status::Internal("AllocHost: cannot allocate " + std::to_string(bytes) + " bytes");
    return p;
  }
  virtual void FreeHost(void* p) { std::free(p); }

 protected:
  // Upload / Download argument check shared by every backend.
  Status CheckTransfer(const BackendBuffer* buf, size_t offset, size_t bytes, const void* host, const char* op) const {
    if (buf == nullptr || buf->owner() != this) {
      return Status::InvalidArgument(std::string(op) + ": the buffer is null or belongs to another backend");
    }
    if (offset > buf->bytes() || bytes > buf->bytes() - offset) {
      return Status::InvalidArgument(std::string(op) + ": bytes [" + std::to_string(offset) + ", " +
                                     std::to_string(offset + bytes) + ") outside a buffer of " +
                                     std::to_string(buf->bytes()) + " bytes");
    }
    if (bytes > 0 && host == nullptr) return Status::InvalidArgument(std::string(op) + ": null host pointer");
    return Status::OK();
  }

  // UploadCsr's validation and bookkeeping, shared by every backend: checks
  // `a` for `use` and fills dst's owner, shape and use (not view / storage).
  Status CheckUploadCsr(const CsrView& a, CsrUse use, BackendCsr* dst) {
    if (dst == nullptr) return Status::InvalidArgument("UploadCsr: null destination");
    dst->owner = nullptr;  // unusable until this upload succeeds
    TETHER_RETURN_IF_ERROR(backend_internal::CheckCsr(a, use != CsrUse::kLabels, "UploadCsr", "a"));
    dst->owner = this;
    dst->rows = a.rows;
    dst->cols = a.cols;
    dst->nnz = a.nnz();
    dst->use = use;
    dst->view = CsrView{};
    return Status::OK();
  }

  // Marks a BackendCsr unusable unless disarmed: a device UploadCsr that
  // fails after CheckUploadCsr must not leave a half-written matrix usable.
  class CsrUploadGuard {
   public:
    explicit CsrUploadGuard(BackendCsr* dst) : dst_(dst) {}
    ~CsrUploadGuard() {
      if (dst_ != nullptr) dst_->owner = nullptr;
    }
    void Done() { dst_ = nullptr; }

   private:
    BackendCsr* dst_;
  };

  // Whether `a` was uploaded by this backend for (at least) `need`.
  Status CheckUsable(const BackendCsr& a, CsrUse need, const char* op) const {
    if (a.owner != this) {
      return Status::InvalidArgument(std::string(op) + ": the BackendCsr was not uploaded by this backend (" +
                                     (a.owner == nullptr ? std::string("never uploaded") : a.owner->name()) + ")");
    }
    const bool ok = need == CsrUse::kLabels || a.use == CsrUse::kSpMMAndTransposed ||
                    (need == CsrUse::kSpMM && a.use == CsrUse::kSpMM);
    if (!ok) {
      return Status::InvalidArgument(std::string(op) + ": the BackendCsr was uploaded for " +
                                     (a.use == CsrUse::kLabels ? "labels (no values)" : "SpMM only") +
                                     "; upload it with CsrUse::" +
                                     (need == CsrUse::kSpMM ? "kSpMM" : "kSpMMAndTransposed"));
    }
    return Status::OK();
  }
};

/// A grow-only array in a backend's host memory (Backend::AllocHost), for
/// buffers refilled every minibatch: Resize keeps the allocation while the
/// new size fits, so a warm loop allocates nothing. Contents are NOT kept
/// across a growing Resize. Not copyable; the backend must outlive it.
template <typename T>
class HostArray {
 public:
  explicit HostArray(Backend* backend) : backend_(backend) {}
  HostArray(const HostArray&) = delete;
  HostArray& operator=(const HostArray&) = delete;
  HostArray(HostArray&& o) noexcept : backend_(o.backend_), data_(o.data_), size_(o.size_), capacity_(o.capacity_) {
    o.data_ = nullptr;
    o.size_ = o.capacity_ = 0;
  }
  ~HostArray() {
    if (data_ != nullptr) backend_->FreeHost(data_);
  }

  /// Sets size() to n elements. Errors: AllocHost's (the array is then empty).
  Status Resize(size_t n) {
    if (n > capacity_) {
      const size_t want = std::max(n, capacity_ + capacity_ / 2);
      if (data_ != nullptr) backend_->FreeHost(data_);
      data_ = nullptr;
      size_ = capacity_ = 0;
      StatusOr<void*> p = backend_->AllocHost(want * sizeof(T));
      if (!p.ok()) return p.status();
      data_ = static_cast<T*>(p.value());
      capacity_ = want;
    }
    size_ = n;
    return Status::OK();
  }
  T* data() { return data_; }
  const T* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  Backend* backend_;
  T* data_ = nullptr;
  size_t size_ = 0, capacity_ = 0;
};

/// A grow-only array in a backend's buffer (Backend::AllocBuffer), for
/// operands that stay on the backend (activations, gradients): data() is a
/// backend address (see BackendBuffer). Resize keeps the buffer while the new
/// size fits; contents are NOT kept across a growing Resize. Not copyable;
/// the backend must outlive it.
template <typename T>
class BackendArray {
 public:
  explicit BackendArray(Backend* backend) : backend_(backend) {}
  BackendArray(const BackendArray&) = delete;
  BackendArray& operator=(const BackendArray&) = delete;
  BackendArray(BackendArray&&) noexcept = default;

  /// Sets size() to n elements. Errors: AllocBuffer's (the array is then empty).
  Status Resize(size_t n) {
    if (n > capacity_) {
      const size_t want = std::max(n, capacity_ + capacity_ / 2);
      buffer_.reset();
      size_ = capacity_ = 0;
      StatusOr<std::unique_ptr<BackendBuffer>> b = backend_->AllocBuffer(want * sizeof(T));
      if (!b.ok()) return b.status();
      buffer_ = std::move(b).value();
      capacity_ = want;
    }
    size_ = n;
    return Status::OK();
  }
  T* data() const { return buffer_ == nullptr ? nullptr : static_cast<T*>(buffer_->data()); }
  size_t size() const { return size_; }
  BackendBuffer* buffer() const { return buffer_.get(); }

 private:
  Backend* backend_;
  std::unique_ptr<BackendBuffer> buffer_;
  size_t size_ = 0, capacity_ = 0;
};

/// An array with a host side (what the client pulls into and pushes from)
/// and a backend side (what ops use). On a backend with host-visible buffers
/// (CPU) both sides are the same memory and Upload / Download do nothing, so
/// the CPU path copies nothing; on a device the host side is AllocHost
/// memory (page-locked: the copies are DMA on the backend's stream) and
/// Upload / Download move size() elements in ONE transfer. Grow-only, as
/// HostArray; contents not kept across a growing Resize. Not copyable; the
/// backend must outlive it.
template <typename T>
class MirroredArray {
 public:
  explicit MirroredArray(Backend* backend)
      : backend_(backend), shared_(backend->buffers_host_visible()), host_(backend), device_(backend) {}

  /// Sets size() to n elements on both sides. Errors: the allocations'.
  Status Resize(size_t n) {
    TETHER_RETURN_IF_ERROR(device_.Resize(n));
    return shared_ ? Status::OK() : host_.Resize(n);
  }
  T* host() { return shared_ ? device_.data() : host_.data(); }
  T* device() const { return device_.data(); }
  size_t size() const { return device_.size(); }
  /// Host side → backend side (asynchronous: see Backend::Upload).
  Status Upload() {
    if (shared_ || size() == 0) return Status::OK();
    return backend_->Upload(host_.data(), device_.buffer(), 0, size() * sizeof(T));
  }
  /// Backend side → host side, after every queued op.
  Status Download() {
    if (shared_ || size() == 0) return Status::OK();
    return backend_->Download(*device_.buffer(), 0, host_.data(), size() * sizeof(T));
  }

 private:
  Backend* backend_;
  bool shared_;
  HostArray<T> host_;
  BackendArray<T> device_;
};

/// Creates the backend named by the `--device` flag value:
///  - "cpu": CpuBackend(cpu_threads);
///  - "cuda": the CUDA backend on device 0; Unavailable when Tether was built
///    without CUDA (TETHER_WITH_CUDA=OFF) or no CUDA device is visible;
///  - "auto": CUDA when built and a device is visible, otherwise CPU; logs
///    its choice (INFO).
/// Any other value: InvalidArgument naming `--device`. cpu_threads (>= 1)
/// sets the OpenBLAS thread count, a process-wide setting (see CpuBackend).
StatusOr<std::unique_ptr<Backend>> CreateBackend(const std::string& device, int cpu_threads = 1);

}  // namespace tether
