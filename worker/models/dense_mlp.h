// DenseMlp: a multi-layer perceptron on dense input (Rumelhart, Hinton &
// Williams 1986): layer widths d0 (input) .. dn (classes),
//
//   a0 = x                              x: B × d0 dense, row-major
//   z_i = a_(i-1) · W_i + b_i           W_i: d(i-1) × d_i row-major, b_i: d_i
//   a_i = relu(z_i)   for i < n         (hidden layers)
//   s   = z_n                           class scores (logits), B × dn
//   loss = softmax cross-entropy of s against the row's class
//
// Every product is a dense GEMM on the Backend (cuBLAS on the CUDA backend);
// bias, ReLU, softmax and its gradient are the Backend's element-wise ops.
// Parameters live in dense tables on the parameter server ("w1", "b1", …,
// see TablesForJob); the worker pulls them whole into buffers it owns and
// passes them in as DenseMlpParams (borrowed for the call).
//
// Residency: activations and deltas live in the backend's buffers, so with
// x, parameters and gradients in buffers too a minibatch moves nothing
// between host and device but the loss (see the BackendCsr form).
//
// Ownership: borrows the Backend (must outlive the model); owns its
// activation scratch, grown to the largest batch and reused (no allocation
// after warm-up when the grads / scores passed in are reused too).
// Thread-safety: not thread-safe; one per compute thread.
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "compute/backend.h"
#include "input/csr.h"

namespace tether {

/// Borrowed parameters, one entry per layer i = 1..n (index i − 1).
struct DenseMlpParams {
  std::vector<const float*> w;  // w[i]: widths[i] × widths[i+1], row-major
  std::vector<const float*> b;  // b[i]: widths[i+1]
};

/// Mean gradients over the minibatch, shaped like DenseMlpParams. Resized by
/// ComputeGradients; reuse one object across calls.
struct DenseMlpGrads {
  std::vector<std::vector<float>> w, b;
};

/// Where the BackendCsr form writes the gradients, one pointer per layer
/// (host memory or the backend's buffers), shaped like DenseMlpParams.
struct DenseMlpGradPtrs {
  std::vector<float*> w, b;
};

class DenseMlp {
 public:
  /// widths: d0 (inputs), hidden widths…, dn (classes); at least 2 entries,
  /// all > 0, dn >= 2. backend: not owned, must outlive this object.
  /// CHECK-fails otherwise (programming errors; the config is validated).
  DenseMlp(std::vector<int64_t> widths, Backend* backend);

  const std::vector<int64_t>& widths() const { return widths_; }
  int num_layers() const { return static_cast<int>(widths_.size()) - 1; }

  /// Training-time regularisation (model.dropout, model.label_smoothing;
  /// both 0 by default, which is the pass without them, bit for bit):
  /// dropout in [0, 1) on every hidden layer's activations (Backend::Dropout,
  /// the mask drawn from the seed set by set_dropout_seed and the layer), and
  /// the loss's label smoothing in [0, 1). Prediction uses every unit.
  void set_regularization(float dropout, float label_smoothing) {
    dropout_ = dropout;
    label_smoothing_ = label_smoothing;
  }
  /// The seed of the next ComputeGradients' dropout masks.
  void set_dropout_seed(uint64_t seed) { dropout_seed_ = seed; }

  /// One forward + backward pass on `batch` rows.
  ///   x: batch × d0 dense row-major (borrowed).
  ///   y: batch × dn label view (values ignored); row r's entry names its
  ///      class. Softmax target = uniform over the row's entries, so a
  ///      one-hot row is the usual cross-entropy; rows with no entry give 0
  ///      loss and 0 gradient but count in the mean.
  /// Fills *grads with mean gradients and returns the mean loss (natural
  /// log). Errors: InvalidArgument for batch <= 0, a wrong number of layer
  /// buffers, null buffers, y not batch × (<= dn), a class index >= dn; a
  /// backend error otherwise.
  StatusOr<float> ComputeGradients(const float* x, int64_t batch, const CsrView& y, const DenseMlpParams& p,
                                   DenseMlpGrads* grads);

  /// Forward only: *scores = batch × dn logits, resized. batch 0 allowed.
  /// Errors as ComputeGradients.
  /// x and p may point into host memory or the backend's buffers; the
  /// scores come back in one download on a device backend (none on CPU).
  Status Predict(const float* x, int64_t batch, const DenseMlpParams& p, std::vector<float>* scores);

  /// ComputeGradients with labels uploaded by the same backend (UploadCsr,
  /// CsrUse::kLabels; batch = y.rows) and x, p, g in host memory or the
  /// backend's buffers (in buffers: no host↔device transfer but the loss's
  /// readback). Semantics and errors as above.
  StatusOr<float> ComputeGradients(const float* x, const BackendCsr& y, const DenseMlpParams& p,
                                   const DenseMlpGradPtrs& g);

 private:
  // Validates and computes every layer: act_[i] (i < n − 1, post-ReLU) and
  // scores (batch × dn).
  // train: with dropout on the hidden activations.
  Status Forward(const float* x, int64_t batch, const DenseMlpParams& p, float* scores, bool train = false);
  // Hidden layer i's dropout seed for the current pass.
  uint64_t LayerSeed(int i) const { return DropoutHash(dropout_seed_, static_cast<uint64_t>(i)); }

  std::vector<int64_t> widths_;
  Backend* backend_;
  float dropout_ = 0.0f, label_smoothing_ = 0.0f;
  uint64_t dropout_seed_ = 0;
  // Scratch in backend memory, grown to the largest batch and reused.
  std::vector<BackendArray<float>> act_;    // hidden activations a_1..a_(n-1), batch × d_i
  BackendArray<float> scores_;              // batch × dn: logits, then dL/ds in place
  BackendArray<float> delta_, delta_prev_;  // dL/dz of the current / next-lower layer
  BackendCsr y_up_;                         // the CsrView form's upload
};

/// Writes rows [begin, end) of the CSR matrix `x` densely into `out`
/// ((end − begin) × x.cols floats, row-major, zeros where x has no entry;
/// the caller sizes it). CHECK-fails on an invalid row range.
void DensifyRows(const CsrMatrix& x, int64_t begin, int64_t end, float* out);
/// Same into a vector, resized (capacity reused).
void DensifyRows(const CsrMatrix& x, int64_t begin, int64_t end, std::vector<float>* out);

}  // namespace tether
