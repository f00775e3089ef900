// libFuzzer targets for the XMC and LIBSVM readers (input/reader.h), built
// twice: TETHER_FUZZ_FORMAT selects the format (xmc_reader_fuzz,
// libsvm_reader_fuzz).
//
// Input layout: byte 0 picks the options (index base, duplicate and
// non-finite policies, unlabeled rows, header mismatch, partition count);
// the rest is the file's bytes (plain text or gzip) given to ParseDataset.
// Beyond "no crash, no sanitizer report", every Dataset that loads must keep
// the CSR invariants the kernels rely on (sorted unique in-range columns,
// finite values, matching row counts), and its byte-range shares must hold
// exactly the rows of the whole read, each once. A broken invariant aborts.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include <glog/logging.h>

#include "input/reader.h"

namespace {

void Require(bool ok) {
  if (!ok) std::abort();
}

void CheckCsr(const tether::CsrMatrix& m, bool values_are_ones) {
  Require(m.rows >= 0 && m.cols >= 0);
  Require(m.row_ptr.size() == static_cast<size_t>(m.rows) + 1);
  Require(m.row_ptr[0] == 0);
  Require(m.col_idx.size() == m.values.size());
  Require(static_cast<size_t>(m.row_ptr.back()) == m.col_idx.size());
  for (int64_t r = 0; r < m.rows; ++r) {
    Require(m.row_ptr[r] <= m.row_ptr[r + 1]);
    for (int64_t i = m.row_ptr[r]; i < m.row_ptr[r + 1]; ++i) {
      Require(static_cast<int64_t>(m.col_idx[i]) < m.cols);
      if (i > m.row_ptr[r]) Require(m.col_idx[i - 1] < m.col_idx[i]);
      Require(std::isfinite(m.values[i]));
      if (values_are_ones) Require(m.values[i] == 1.0f);
    }
  }
}

void CheckDataset(const tether::Dataset& ds) {
  CheckCsr(ds.features, false);
  CheckCsr(ds.labels, true);
  Require(ds.labels.rows == ds.features.rows);
  Require(ds.source_lines.size() == static_cast<size_t>(ds.features.rows));
  Require(ds.targets.empty() || ds.targets.size() == static_cast<size_t>(ds.features.rows));
  for (float t : ds.targets) Require(std::isfinite(t));
  for (size_t i = 1; i < ds.source_lines.size(); ++i) Require(ds.source_lines[i - 1] < ds.source_lines[i]);
  Require(ds.rows_read >= ds.features.rows);
  Require(ds.dropped_rows >= 0 && ds.unlabeled_rows >= 0);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  FLAGS_minloglevel = google::GLOG_FATAL;  // the reader logs every warning; keep the run readable
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t o = data[0];
  tether::ReadOptions opts;
  opts.format = TETHER_FUZZ_FORMAT;
  opts.index_base = o & 1;
  opts.duplicates = (o >> 1) % 3 == 0   ? tether::DuplicatePolicy::kError
                    : (o >> 1) % 3 == 1 ? tether::DuplicatePolicy::kSum
                                        : tether::DuplicatePolicy::kKeepLast;
  opts.non_finite = (o & 8) ? tether::NonFinitePolicy::kDropRow : tether::NonFinitePolicy::kError;
  opts.skip_unlabeled = (o & 16) != 0;
  opts.header_mismatch_is_error = (o & 32) == 0;
  const int shares = 2 + ((o >> 6) & 1);  // 2 or 3
  const bool check_shares = (o & 128) != 0;
  const std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);

  tether::StatusOr<tether::Dataset> whole = tether::ParseDataset(bytes, "fuzz", opts);
  if (!whole.ok()) {
    Require(!whole.status().message().empty());
    return 0;
  }
  CheckDataset(*whole);
  Require(whole->features.rows > 0);  // zero examples is never a success
  if (!check_shares || opts.skip_unlabeled) return 0;

  // Shares: same widths as the whole read, so every share agrees.
  opts.num_features = whole->features.cols;
  if (opts.format == tether::DataFormat::kXmc || whole->labels.cols > 0) opts.num_labels = whole->labels.cols;
  if (opts.num_features == 0 || (opts.format == tether::DataFormat::kLibsvm && whole->targets.empty() &&
                                 opts.num_labels == 0)) {
    return 0;  // a width that cannot be given explicitly: shares would refuse
  }
  opts.num_partitions = shares;
  std::vector<int64_t> lines;
  for (int p = 0; p < shares; ++p) {
    opts.partition = p;
    tether::StatusOr<tether::Dataset> part = tether::ParseDataset(bytes, "fuzz", opts);
    Require(part.ok());
    CheckDataset(*part);
    Require(part->features.cols == whole->features.cols);
    Require(part->labels.cols == whole->labels.cols);
    lines.insert(lines.end(), part->source_lines.begin(), part->source_lines.end());
  }
  Require(lines == whole->source_lines);
  return 0;
}
