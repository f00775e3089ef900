#include "input/csr.h"

#include <glog/logging.h>

namespace tether {

void CsrMatrix::AppendRow(const uint32_t* idx, const float* val, size_t n) {
#ifndef NDEBUG
  for (size_t i = 1; i < n; ++i) {
    DCHECK_LT(idx[i - 1], idx[i]) << "AppendRow: column ids must be sorted and unique";
  }
#endif
  if (n > 0) {
    col_idx.insert(col_idx.end(), idx, idx + n);
    values.insert(values.end(), val, val + n);
  }
  row_ptr.push_back(static_cast<int64_t>(col_idx.size()));
  ++rows;
}

CsrMatrix SliceRows(const CsrMatrix& m, int64_t begin, int64_t end) {
  CHECK(0 <= begin && begin <= end && end <= m.rows)
      << "SliceRows [" << begin << ", " << end << ") outside 0.." << m.rows;
  CsrMatrix out;
  out.rows = end - begin;
  out.cols = m.cols;
  out.col_keys = m.col_keys;
  const int64_t base = m.row_ptr[begin];
  out.row_ptr.resize(static_cast<size_t>(out.rows) + 1);
  for (int64_t r = 0; r <= out.rows; ++r) out.row_ptr[r] = m.row_ptr[begin + r] - base;
  out.col_idx.assign(m.col_idx.begin() + base, m.col_idx.begin() + m.row_ptr[end]);
  out.values.assign(m.values.begin() + base, m.values.begin() + m.row_ptr[end]);
  return out;
}

CsrMatrix GatherRows(const CsrMatrix& m, const std::vector<int64_t>& rows) {
  CsrMatrix out;
  out.cols = m.cols;
  out.col_keys = m.col_keys;
  int64_t total = 0;
  for (int64_t r : rows) {
    CHECK(0 <= r && r < m.rows) << "GatherRows: row " << r << " outside 0.." << m.rows;
    total += m.row_ptr[r + 1] - m.row_ptr[r];
  }
  out.row_ptr.reserve(rows.size() + 1);
  out.col_idx.reserve(static_cast<size_t>(total));
  out.values.reserve(static_cast<size_t>(total));
  for (int64_t r : rows) {
    const int64_t b = m.row_ptr[r];
    out.AppendRow(m.col_idx.data() + b, m.values.data() + b,
                  static_cast<size_t>(m.row_ptr[r + 1] - b));
  }
  return out;
}

}  // namespace tether
