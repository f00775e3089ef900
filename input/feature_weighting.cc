#include "input/feature_weighting.h"

#include <cmath>
#include <string>

namespace tether {

void CountDocumentFrequencies(const CsrMatrix& x, std::vector<uint64_t>* df) {
  if (df->size() < static_cast<size_t>(x.cols)) df->resize(static_cast<size_t>(x.cols), 0);
  // A column repeated within a row (DUPLICATES_KEEP_LAST keeps both
  // entries' positions) counts once: the last row seen per column.
  std::vector<int64_t> seen_in(static_cast<size_t>(x.cols), -1);
  for (int64_t r = 0; r < x.rows; ++r) {
    for (int64_t p = x.row_ptr[r]; p < x.row_ptr[r + 1]; ++p) {
      const uint32_t f = x.col_idx[p];
      const bool nonzero = x.values.empty() || x.values[p] != 0.0f;
      if (!nonzero || seen_in[f] == r) continue;
      seen_in[f] = r;
      ++(*df)[f];
    }
  }
}

std::vector<float> InverseDocumentFrequencies(const std::vector<uint64_t>& df, int64_t rows) {
  std::vector<float> idf(df.size());
  const double n1 = 1.0 + static_cast<double>(rows);
  for (size_t f = 0; f < df.size(); ++f)
    idf[f] = static_cast<float>(std::log(n1 / (1.0 + static_cast<double>(df[f]))) + 1.0);
  return idf;
}

Status ApplyFeatureWeights(const std::vector<float>& weights, CsrMatrix* x) {
  const int64_t nnz = x->row_ptr.empty() ? 0 : x->row_ptr.back() - x->row_ptr.front();
  const int64_t first = x->row_ptr.empty() ? 0 : x->row_ptr.front();
  for (int64_t p = first; p < first + nnz; ++p) {
    if (x->col_idx[p] >= weights.size())
      return Status::InvalidArgument("feature weights: column " + std::to_string(x->col_idx[p]) + " has no weight (" +
                                     std::to_string(weights.size()) + " weights)");
  }
  if (x->values.size() < static_cast<size_t>(first + nnz)) x->values.resize(static_cast<size_t>(first + nnz), 1.0f);
  for (int64_t p = first; p < first + nnz; ++p) x->values[p] *= weights[x->col_idx[p]];
  return Status::OK();
}

}  // namespace tether
