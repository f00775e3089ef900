// TF-IDF weighting of sparse input at read time (DataConfig.tf_idf): each
// feature value is multiplied by its feature's inverse document frequency,
// counted over the training rows, so rare features weigh more than common
// ones (Sparck Jones, "A statistical interpretation of term specificity and
// its application in retrieval", J. Documentation 28, 1972; Salton &
// Buckley, "Term-weighting approaches in automatic text retrieval", IP&M
// 24, 1988). The smoothed form scikit-learn's TfidfTransformer uses by
// default: idf(f) = ln((1 + N) / (1 + df(f))) + 1 for N training rows of
// which df(f) hold feature f, so a feature in every row keeps weight 1 and
// one never seen in training gets the largest, ln(1 + N) + 1. Row
// normalisation (data.normalize_rows) comes after the weighting.
//
// Pure functions of their arguments; thread-compatible. Vectors are plain
// values owned by the caller.
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "input/csr.h"

namespace tether {

/// Document frequencies: out[f] = rows of `x` holding column f with a
/// non-zero value (a column repeated within a row counts once), for f in
/// [0, x.cols). Adds to `*df` (resized to x.cols when smaller), so the
/// counts of several shares can be summed. O(nnz + cols).
void CountDocumentFrequencies(const CsrMatrix& x, std::vector<uint64_t>* df);

/// idf(f) = ln((1 + rows) / (1 + df[f])) + 1, in double, rounded to float.
std::vector<float> InverseDocumentFrequencies(const std::vector<uint64_t>& df, int64_t rows);

/// Multiplies every stored value of column f by weights[f]. Errors:
/// InvalidArgument when a column index of `x` has no weight (naming it),
/// before anything is changed. O(nnz).
[[nodiscard]] Status ApplyFeatureWeights(const std::vector<float>& weights, CsrMatrix* x);

}  // namespace tether
