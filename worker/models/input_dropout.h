// InputDropout: dropout on a minibatch's input features (Srivastava et al.,
// "Dropout: A Simple Way to Prevent Neural Networks from Overfitting",
// JMLR 15, 2014: dropout applied to the input layer as well as the hidden
// ones). Each stored (non-zero) entry of a training minibatch's sparse rows
// is zeroed with probability `rate`, and the kept ones are scaled by
// 1 / (1 − rate), so a row's expected input is unchanged and evaluation uses
// the rows as they are (model.input_dropout, proto/config.proto).
//
// The mask is the one Backend::Dropout draws (compute/backend.h): entry e,
// counted from the first stored entry of the view, is kept when
// DropoutKeeps(seed, e, DropoutThreshold(rate)); pure in (seed, e), so a
// caller that derives the seed from train.seed and its minibatch count
// repeats a run exactly, and every backend trains on the same masked rows
// (the masking is done on the host, before the rows are uploaded).
//
// Ownership: an InputDropout owns the masked values; the view Apply returns
// borrows the input's row_ptr and col_idx and those values, and is valid
// until the next Apply, the input's change or this object's destruction.
//
// Thread-safety: not thread-safe (the values buffer); one per model.
#pragma once

#include <cstdint>
#include <vector>

#include "compute/backend.h"

namespace tether {

class InputDropout {
 public:
  /// rate: in [0, 1) (CHECK-fails otherwise: the config check refuses
  /// other values before a model is built). 0 keeps every entry as it is.
  explicit InputDropout(float rate);

  float rate() const { return rate_; }

  /// The seed of the masks of a minibatch whose hidden-layer dropout seed
  /// is `minibatch_seed` (model.cc's DropoutSeeds): a stream of its own, so
  /// the input mask and the hidden mask of one minibatch are independent.
  static uint64_t SeedFor(uint64_t minibatch_seed);

  /// x with each stored entry dropped or scaled as above: rows, cols,
  /// row_ptr and col_idx are x's (a dropped feature stays in the row with
  /// the value 0, so the rows to pull do not change); values are this
  /// object's. x.values == nullptr reads as every value 1 (binary rows).
  /// With rate 0, x itself.
  CsrView Apply(const CsrView& x, uint64_t seed);

  /// Entries the last Apply dropped (set to 0), of its x.nnz().
  int64_t dropped() const { return dropped_; }

 private:
  float rate_;
  uint32_t threshold_;
  float scale_;  // 1 / (1 − rate)
  std::vector<float> values_;
  int64_t dropped_ = 0;
};

}  // namespace tether
