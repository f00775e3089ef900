// The random choices a worker makes, in one place so that tools and tests
// can reproduce them exactly:
//  - EpochOrder: the order in which a worker visits its rows in an epoch
//    (`tether-bench order` prints it, so a PyTorch baseline can train on the
//    very same minibatches);
//  - SampleOutputLabels: the output-layer rows of one minibatch under a
//    sampled softmax (model.sampled_labels > 0).
//
// Pure functions of their arguments; thread-safe.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "core/status.h"
#include "input/csr.h"

namespace tether {

/// The permutation of a worker's `num_rows` rows (0-based, within its own
/// partition) for `epoch` (0-based): std::shuffle of 0..n−1 with a
/// std::mt19937_64 seeded by seed·1000003 + rank·7919 + epoch. Reproducible
/// on one standard library (libstdc++); *order is overwritten.
void EpochOrder(uint64_t seed, int rank, int epoch, int64_t num_rows, std::vector<int64_t>* order);

/// Output rows of a sampled softmax for one minibatch (Jean et al., ACL
/// 2015: the softmax runs over the batch's targets plus sampled others).
///   y:          B × L labels of the minibatch (global label ids, values ignored).
///   num_labels: L.
///   k:          rows wanted (model.sampled_labels, > 0).
/// *keys = the sorted unique positive labels of the batch, plus negatives
/// drawn uniformly from the other labels until there are min(k, L) keys
/// (more than k only when the batch itself has more than k positives).
/// *y_local = y with every label id replaced by its position in *keys
/// (cols = keys->size()). With k >= L every label is a key, and training is
/// exactly the full softmax. Negatives are uniform, so the logit correction
/// log Q(j) is the same constant for every negative and is left out.
/// Cost: O(nnz(y) + k log k). Errors: InvalidArgument for k <= 0 or a label
/// id >= L.
/// Seed of the negative-sampling generator of worker `rank`: distinct per
/// rank, so that workers draw different negatives for their minibatches
/// (with one shared seed every worker would sample the same label ids at
/// the same step, and the output layer would see fewer distinct negatives
/// per clock). Rank 0 keeps seed · φ + 17, the single-worker value.
uint64_t NegativeSamplingSeed(uint64_t seed, int rank);

Status SampleOutputLabels(const CsrMatrix& y, int64_t num_labels, int64_t k, std::mt19937_64* rng,
                          std::vector<uint64_t>* keys, CsrMatrix* y_local);

}  // namespace tether
