// Writing a Dataset (reader.h) back out as XMC, LIBSVM or MULAN ARFF, and
// the summary `tether-data stats` prints. Each writer is the inverse of its
// reader: reading the output back gives the same CSR matrices bit for bit
// (values are written as the shortest decimal that reads back to the same
// float, std::to_chars).
//
// Files are written whole to "OUT.tmp-PID" beside OUT and renamed onto OUT
// only when complete, so an error (or a crash) never leaves a half-written
// OUT; an OUT ending in ".gz" is gzip-compressed. Errors: IOError naming the
// file ("PATH: cannot write: REASON"); InvalidArgument when the dataset
// cannot be written in the format asked for (e.g. a single-label dataset as
// ARFF). Thread-safety: pure functions of their inputs and the file system.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "input/reader.h"

namespace tether {

/// XMC: header "rows features labels", then "l1,l2,... f:v f:v ..." per row,
/// ids written with `index_base` (0 or 1; 0 is the repository's convention).
/// Requires a label matrix (labels.cols > 0 or an XMC/ARFF source).
[[nodiscard]] Status WriteXmc(const Dataset& ds, const std::string& path, int index_base = 0);

/// LIBSVM: a single-label dataset (targets) as "target f:v ...", a
/// multi-label one as "l1,l2,... f:v ..." (label ids 0-based as the
/// multi-label LIBSVM reader takes them; a row without labels starts with its
/// first feature). Feature indices are written with `index_base` (1 is
/// LIBSVM's convention).
[[nodiscard]] Status WriteLibsvm(const Dataset& ds, const std::string& path, int index_base = 1);

/// Sparse MULAN ARFF: the feature attributes (numeric), then the labels as
/// nominal {0,1} attributes, rows "{i v,...,j 1}" with 0-based attribute
/// indices; and MULAN's label XML at `xml_path`. Names are
/// Dataset::feature_names / label_names when present (an ARFF source), else
/// f0, f1, ... and label0, label1, .... Requires a label matrix.
[[nodiscard]] Status WriteArff(const Dataset& ds, const std::string& path, const std::string& xml_path,
                               const std::string& relation);

/// What `tether-data stats` prints.
struct DatasetStats {
  int64_t rows = 0, features = 0, labels = 0, nnz = 0, label_nnz = 0;
  int64_t nnz_min = 0, nnz_max = 0;        // features per row
  double nnz_mean = 0;
  int64_t labels_min = 0, labels_max = 0;  // labels per row (multi-label)
  double labels_mean = 0;
  int64_t unused_features = 0;  // feature columns no row uses
  int64_t unused_labels = 0;    // label columns no row has
  // Label frequency (rows per label, over all label columns) at these
  // quantiles; nearest-rank: the value at index ceil(q * L) - 1 (q = 0: min).
  std::vector<double> quantiles{0, 0.25, 0.5, 0.75, 0.9, 0.99, 1};
  std::vector<int64_t> label_freq_at;  // one per quantile
};

/// Counts over the whole dataset. Pure; O(nnz + label_nnz + labels log labels).
DatasetStats ComputeStats(const Dataset& ds);

}  // namespace tether
