// SparseLr: binary logistic regression on sparse input, the classic
// parameter-server workload (Li et al., OSDI 2014, §5.1):
//
//   s = x · w + b         x: B × F sparse; only the U entries of w named by
//                            the batch's features are pulled (LocalizeBatch)
//   p = sigmoid(s),  loss = mean over rows of softplus(s) − y·s,  y ∈ {0, 1}
//
// The weights live on the parameter server (table "w": key = feature id,
// dim 1; table "b": dense, 1 float). A worker pulls them into buffers it owns
// and passes them in as SparseLrParams (borrowed for the call); the model
// writes mean gradients into a SparseLrGrads the caller owns. Regularisation
// (L2) is the servers' business (OptimizerConfig::l2). All compute goes
// through a Backend: SpMM with n = 1 for the scores, SpMMTransposed for dw,
// SigmoidCrossEntropy for the loss, ColumnSum for db.
//
// Ownership: borrows the Backend (must outlive the model); owns its scratch,
// grown to the largest batch and reused (no allocation after warm-up when
// the grads / scores vectors passed in are reused too).
// Thread-safety: not thread-safe; one per compute thread.
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "compute/backend.h"
#include "input/csr.h"

namespace tether {

/// Borrowed parameters, valid for the call.
struct SparseLrParams {
  const float* w = nullptr;  // U floats: w[j] = weight of the j-th pulled feature
  int64_t num_rows_w = 0;    // U (= x_local.cols)
  const float* b = nullptr;  // 1 float: the bias
};

/// Mean gradients over the minibatch: w has U entries (one per pulled
/// feature, same order as SparseLrParams::w), b one. Resized by the call.
struct SparseLrGrads {
  std::vector<float> w;
  std::vector<float> b;
};

/// Where the BackendCsr form writes the gradients: host memory or the
/// backend's buffers (w: U floats, b: 1).
struct SparseLrGradPtrs {
  float* w = nullptr;
  float* b = nullptr;
};

class SparseLr {
 public:
  /// num_features: F, the input width (pulled feature ids are < F).
  /// backend: not owned, must outlive this object. CHECK-fails on F <= 0 or
  /// a null backend (programming errors).
  SparseLr(int64_t num_features, Backend* backend);

  /// One forward + backward pass.
  ///   x_local: B × U CSR, columns remapped to 0..U-1 (see LocalizeBatch).
  ///   y:       B × 1 label view (values ignored): row r is positive iff it
  ///            holds the entry 0; rows with no entry are negative.
  /// Fills *grads (dw: U, db: 1; means over the B rows) and returns the mean
  /// logistic loss (natural log). Errors: InvalidArgument for B == 0,
  /// x_local.cols != p.num_rows_w, U > F, y.rows != B, y.cols != 1, null
  /// buffers; a backend error otherwise.
  StatusOr<float> ComputeGradients(const CsrMatrix& x_local, const CsrView& y, const SparseLrParams& p,
                                   SparseLrGrads* grads);

  /// Forward only: *scores = B logits (s, not sigmoid(s)), resized.
  /// Errors as ComputeGradients (B == 0 allowed).
  Status Predict(const CsrMatrix& x_local, const SparseLrParams& p, std::vector<float>* scores);

  /// ComputeGradients on uploaded operands (Backend::UploadCsr by the same
  /// backend): x with CsrUse::kSpMMAndTransposed, y (B × 1) with kLabels;
  /// p and g in host memory or the backend's buffers (in buffers: no
  /// host↔device transfer but the loss's readback). Semantics and errors as
  /// the CsrMatrix form.
  StatusOr<float> ComputeGradients(const BackendCsr& x, const BackendCsr& y, const SparseLrParams& p,
                                   const SparseLrGradPtrs& g);
  /// Predict on an uploaded x (kSpMM or more); one download on a device.
  Status Predict(const BackendCsr& x, const SparseLrParams& p, std::vector<float>* scores);

 private:
  Status Forward(const BackendCsr& x, const SparseLrParams& p, float* scores);

  int64_t num_features_;
  Backend* backend_;
  BackendArray<float> scores_;  // B: logits, then dL/ds in place (backend memory)
  BackendCsr x_up_, y_up_;      // the CsrMatrix forms' uploads
};

}  // namespace tether
