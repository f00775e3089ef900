#include "worker/sampling.h"

#include <algorithm>
#include <numeric>
#include <string>

namespace tether {

void EpochOrder(uint64_t seed, int rank, int epoch, int64_t num_rows, std::vector<int64_t>* order) {
  order->resize(static_cast<size_t>(num_rows));
  std::iota(order->begin(), order->end(), 0);
  std::mt19937_64 rng(seed * 1000003ull + static_cast<uint64_t>(rank) * 7919ull + static_cast<uint64_t>(epoch));
  std::shuffle(order->begin(), order->end(), rng);
}

Status SampleOutputLabels(const CsrMatrix& y, int64_t num_labels, int64_t k, std::mt19937_64* rng,
                          std::vector<uint64_t>* keys, CsrMatrix* y_local) {
  if (k <= 0) return Status::InvalidArgument("sampled softmax: model.sampled_labels must be > 0, got " + std::to_string(k));
  keys->clear();
  for (int64_t p = 0; p < y.nnz(); ++p) {
    if (y.col_idx[p] >= num_labels)
      return Status::InvalidArgument("sampled softmax: label " + std::to_string(y.col_idx[p]) + " >= num_labels " +
                                     std::to_string(num_labels));
    keys->push_back(y.col_idx[p]);
  }
  std::sort(keys->begin(), keys->end());
  keys->erase(std::unique(keys->begin(), keys->end()), keys->end());
  const size_t want = static_cast<size_t>(std::min(k, num_labels));
  if (want == static_cast<size_t>(num_labels)) {
    keys->resize(static_cast<size_t>(num_labels));
    std::iota(keys->begin(), keys->end(), 0);
  } else {
    // Rejection by sort-and-dedupe: with k ≪ L (the reason to sample at all)
    // almost every draw is new, so this loop runs once or twice.
    std::uniform_int_distribution<uint64_t> pick(0, static_cast<uint64_t>(num_labels) - 1);
    while (keys->size() < want) {
      const size_t missing = want - keys->size();
      for (size_t i = 0; i < missing; ++i) keys->push_back(pick(*rng));
      std::sort(keys->begin(), keys->end());
      keys->erase(std::unique(keys->begin(), keys->end()), keys->end());
    }
  }
  y_local->rows = y.rows;
  y_local->cols = static_cast<int64_t>(keys->size());
  y_local->row_ptr.assign(y.row_ptr.begin(), y.row_ptr.end());
  y_local->col_idx.resize(static_cast<size_t>(y.nnz()));
  y_local->values.assign(y.values.begin(), y.values.end());
  for (int64_t p = 0; p < y.nnz(); ++p) {
    // Positives are all keys, and positions are monotone in the id, so each
    // row's ids stay sorted.
    y_local->col_idx[p] = static_cast<uint32_t>(
        std::lower_bound(keys->begin(), keys->end(), static_cast<uint64_t>(y.col_idx[p])) - keys->begin());
  }
  return Status::OK();
}

uint64_t NegativeSamplingSeed(uint64_t seed, int rank) {
  return seed * 0x9E3779B97F4A7C15ull + 17 + static_cast<uint64_t>(rank) * 0xBF58476D1CE4E5B9ull;
}

}  // namespace tether
