// XmcMlp: the extreme multi-label classification (XMC) model trained by the
// workers: sparse input (F features) → hidden layer of width H (ReLU) → L
// label scores, with a softmax cross-entropy or a sigmoid BCE loss.
//
//   z1 = x · W1 + b1      x: B × F sparse; only the U rows of W1 named by the
//   a1 = relu(z1)            batch's features are pulled (see LocalizeBatch)
//   s  = a1 · W2ᵀ + b2    W2: L × H (row l = label l), s: B × L
//
// Parameters live on the parameter server; a worker pulls them into host
// buffers it owns and passes them in as XmcParams (borrowed for the call).
// The model computes mean gradients into an XmcGrads the caller owns and
// pushes back. All compute goes through a Backend (compute/backend.h).
//
// Residency: activations (a1, scores, da1) live in the backend's buffers
// between ops, so on a GPU one minibatch moves nothing but what the caller
// uploads (the BackendCsr forms below take inputs, labels, parameters and
// gradient outputs already in backend memory) and the loss. The CsrMatrix
// forms upload x and y themselves and take host parameters / gradients (on a
// GPU each op then stages those: convenient, not fast).
//
// Ownership: XmcMlp borrows the Backend (which must outlive it) and owns
// only its scratch buffers, which grow to the largest minibatch seen and are
// then reused: after warm-up, ComputeGradients and Predict allocate nothing
// (as long as the grads/scores vectors passed in are reused too).
//
// Thread-safety: an XmcMlp is not thread-safe (scratch buffers, and the
// Backend it uses); use one per compute thread.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/status.h"
#include "compute/backend.h"
#include "input/csr.h"

namespace tether {

enum class XmcLoss {
  kSoftmax,  // softmax cross-entropy against the label set normalised to sum 1
  kBce,      // independent sigmoid binary cross-entropy per label
};

struct XmcMlpShape {
  int64_t num_features = 0;  // F: input dimension (feature ids are < F)
  int64_t hidden = 0;        // H: hidden width
  int64_t num_labels = 0;    // L: output dimension
  XmcLoss loss = XmcLoss::kSoftmax;
  // Training only (model.dropout, model.label_smoothing); 0 is the pass
  // without them, bit for bit. dropout in [0, 1): the hidden activations'
  // (Backend::Dropout, seeded by XmcMlp::set_dropout_seed); label_smoothing
  // in [0, 1): the loss's (Backend::SoftmaxCrossEntropy, SigmoidCrossEntropy).
  float dropout = 0.0f;
  float label_smoothing = 0.0f;
};

/// Borrowed parameter buffers, row-major floats, valid for the call.
struct XmcParams {
  const float* w1 = nullptr;  // num_rows_w1 × H: row j = W1 row of the j-th pulled feature
  int64_t num_rows_w1 = 0;    // U: number of pulled feature rows (= x_local.cols)
  const float* b1 = nullptr;  // H
  const float* w2 = nullptr;  // L rows of H floats, w2_stride floats apart
  const float* b2 = nullptr;  // L
  /// Floats from one row of w2 to the next (>= H; 0 means H, packed). The
  /// parameter server's w2 rows are [weights(H), bias], so a model passes
  /// them as pulled with stride H + 1 instead of copying the weights out.
  int64_t w2_stride = 0;
};

/// Gradients, same shapes as XmcParams (w1: U × H, b1: H, w2: L × H, b2: L),
/// the MEAN over the minibatch's rows. Resized by ComputeGradients; reuse one
/// object across calls to avoid reallocation.
///
/// w2 has the row stride of the XmcParams it was computed with: L ×
/// w2_stride floats, row l's gradient in its first H floats. The floats
/// after them in each row are not written (they keep what the caller put
/// there, zero after a growing resize), so a caller that pushes [weights,
/// bias] rows writes b2[l] at w2[l · (H + 1) + H] and pushes w2 as it is.
struct XmcGrads {
  std::vector<float> w1, b1, w2, b2;
};

/// Where the BackendCsr form of ComputeGradients writes the gradients: host
/// memory or the backend's buffers, shapes and w2 row layout as XmcGrads.
struct XmcGradPtrs {
  float* w1 = nullptr;  // U × H
  float* b1 = nullptr;  // H
  float* w2 = nullptr;  // L rows, w2_stride apart (padding not written)
  float* b2 = nullptr;  // L
};

class XmcMlp {
 public:
  /// backend: not owned, must outlive this object. CHECK-fails on
  /// non-positive dimensions or a null backend (programming errors).
  XmcMlp(XmcMlpShape shape, Backend* backend);

  const XmcMlpShape& shape() const { return shape_; }

  /// The seed of the next ComputeGradients' dropout mask (shape.dropout > 0).
  void set_dropout_seed(uint64_t seed) { dropout_seed_ = seed; }

  /// One forward + backward pass.
  ///   x_local: B × U CSR, col_idx already remapped to 0..U-1 (positions in
  ///            p.w1; see LocalizeBatch); values are the feature values.
  ///   y:       B × L' CSR of labels, L' <= L; values ignored. Softmax target
  ///            = uniform over the row's labels; rows with no labels give 0
  ///            loss and 0 gradient under softmax, are all-negative under BCE.
  /// Fills *grads with the mean gradients (dW1 for the U pulled rows only)
  /// and returns the mean loss over the B rows (natural log): softmax,
  /// (1/B) Σ_r CE_r with empty rows counting 0 but included in B; BCE,
  /// (1/B) Σ_r Σ_l BCE_rl. Backprop as in any MLP (Rumelhart et al. 1986).
  /// Errors: InvalidArgument for B == 0, mismatched shapes (x_local.cols !=
  /// p.num_rows_w1, y.rows != B, y.cols > L, U > F, 0 < p.w2_stride < H),
  /// null parameter buffers, out-of-range column indices; a backend error
  /// otherwise.
  StatusOr<float> ComputeGradients(const CsrMatrix& x_local, const CsrMatrix& y, const XmcParams& p,
                                   XmcGrads* grads);

  /// Forward pass only: *scores = B × L label scores (logits), row-major,
  /// resized as needed. Errors as ComputeGradients (B == 0 is allowed).
  Status Predict(const CsrMatrix& x_local, const XmcParams& p, std::vector<float>* scores);

  /// ComputeGradients on uploaded operands (Backend::UploadCsr by the same
  /// backend): x with CsrUse::kSpMMAndTransposed, y with kLabels (or more);
  /// p and g point into host memory or the backend's buffers (in buffers, the
  /// pass makes no host↔device transfer but the loss's readback). Same
  /// semantics and errors as the CsrMatrix form.
  ///
  /// `output_done`, when set, is called once in the middle of the pass, when
  /// g.w2, g.b2 and g.b1 hold their final values and before g.w1 is
  /// computed (the x_localᵀ SpMM, the pass's last op; on a device backend
  /// the ops writing them are queued, so a Download then reads them): a pipelined worker
  /// pushes the output layer then, so the shard applies it while this pass
  /// computes dW1 (train.pipeline). The values are those of a pass without
  /// it, bit for bit. An error it returns ends the pass with that error.
  StatusOr<float> ComputeGradients(const BackendCsr& x, const BackendCsr& y, const XmcParams& p,
                                   const XmcGradPtrs& g, const std::function<Status()>& output_done = nullptr);

  /// Predict on an uploaded x (kSpMM or more): one download of the scores
  /// on a device backend, none on the CPU.
  Status Predict(const BackendCsr& x, const XmcParams& p, std::vector<float>* scores);

 private:
  // p.w2_stride, or H when it is 0.
  int64_t W2Stride(const XmcParams& p) const;
  // Validates shapes and computes a1_ (B × H) and scores (B × L; host or
  // backend memory).
  // train: with dropout on the hidden activations.
  Status Forward(const BackendCsr& x, const XmcParams& p, float* scores, bool train = false);

  XmcMlpShape shape_;
  Backend* backend_;
  uint64_t dropout_seed_ = 0;
  // Scratch in backend memory, grown to the largest batch seen and reused.
  BackendArray<float> a1_;      // B × H: z1, then relu(z1) in place
  BackendArray<float> scores_;  // B × L: scores, then dscores in place
  BackendArray<float> da1_;     // B × H: dL/da1, then dL/dz1 in place
  BackendCsr x_up_, y_up_;      // the CsrMatrix forms' uploads
};

/// Builds the local view of rows [row_begin, row_end) of x (global feature
/// ids as col_idx): *keys = the sorted, unique feature ids present (the keys
/// to pull; uint64 as everywhere in Tether; for hashed features, x.col_keys
/// set, the 64-bit ids its columns stand for), and *x_local = the same rows
/// with col_idx remapped so that column j ↔ keys[j] (rows = row_end −
/// row_begin, cols = keys->size(), row_ptr starting at 0, values copied;
/// duplicate ids within a row stay duplicate entries; sorted rows stay
/// sorted; no col_keys). Deterministic. Both outputs are overwritten, reusing their
/// capacity. CHECK-fails on an invalid row range (a programming error).
/// Errors: InvalidArgument naming the rows when they hold ≥ 2^32 non-zeros
/// (positions and local indices are 32-bit); the outputs are then unchanged.
/// Cost: when the largest id is < max(65536, 16 · nnz), a dense per-thread
/// marker table (thread_local, grows to that size, O(nnz + max id));
/// otherwise a sort of the batch's (id, position) pairs, O(nnz log nnz).
/// Measured: 14 µs for 128 rows × 70 ids (one core).
Status LocalizeBatch(const CsrMatrix& x, int64_t row_begin, int64_t row_end,
                     std::vector<uint64_t>* keys, CsrMatrix* x_local);

}  // namespace tether
