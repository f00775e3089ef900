#include "worker/models/input_dropout.h"

#include <glog/logging.h>

namespace tether {

InputDropout::InputDropout(float rate)
    : rate_(rate), threshold_(DropoutThreshold(rate)), scale_(1.0f / (1.0f - rate)) {
  CHECK(rate >= 0.0f && rate < 1.0f) << "InputDropout: rate " << rate << " outside [0, 1)";
}

uint64_t InputDropout::SeedFor(uint64_t minibatch_seed) {
  // The hash at index 2^64 − 1, an index no hidden-layer mask reaches (they
  // count elements from 0), so the two masks come from different streams.
  return DropoutHash(minibatch_seed, ~uint64_t{0});
}

CsrView InputDropout::Apply(const CsrView& x, uint64_t seed) {
  dropped_ = 0;
  if (rate_ == 0.0f || x.rows == 0) return x;
  const int64_t first = x.row_ptr[0], end = x.row_ptr[x.rows];
  // Indexed as x.values is (from position 0), so the view's row_ptr holds.
  values_.resize(static_cast<size_t>(end));
  for (int64_t p = first; p < end; ++p) {
    const float v = x.values == nullptr ? 1.0f : x.values[p];
    if (DropoutKeeps(seed, static_cast<uint64_t>(p - first), threshold_)) {
      values_[p] = v * scale_;
    } else {
      values_[p] = 0.0f;
      ++dropped_;
    }
  }
  CsrView out = x;
  out.values = values_.data();
  return out;
}

}  // namespace tether
