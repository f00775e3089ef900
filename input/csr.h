// CsrMatrix: the compressed-sparse-row matrix that carries features and
// labels from the readers to the CPU and CUDA kernels.
//
// Invariants every producer keeps and every kernel relies on:
//   - row_ptr has rows + 1 entries, row_ptr[0] == 0, non-decreasing;
//   - within each row, col_idx is strictly increasing (sorted and unique)
//     and every entry is < cols (0-based);
//   - values has the same length as col_idx; explicit zeros are allowed.
//
// Hashed features (DataConfig.hashed_features): the readers give every
// distinct 64-bit feature id of what they read a column of its own, in
// increasing id order, and keep the ids in col_keys, so column j stands for
// the id (*col_keys)[j]. The kernels and every invariant above are those of
// an ordinary matrix (cols == col_keys->size()); LocalizeBatch
// (worker/models/xmc_mlp.h) turns a minibatch's columns back into its ids, the keys
// of the input row table. The 32-bit column limit thus applies to the
// distinct ids of one reader's share, never to the model's key space. An
// ordinary matrix has no col_keys and pays nothing for them.
//
// Ownership: a plain value type that owns its three arrays; copies are deep,
// except col_keys, an immutable dictionary that copies (and SliceRows,
// GatherRows) share.
// Thread-safety: none of its own. Concurrent reads of one matrix are safe;
// writes (AppendRow) need external synchronisation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace tether {

struct CsrMatrix {
  int64_t rows = 0;  // number of rows (examples)
  int64_t cols = 0;  // number of columns (features or labels), 0-based ids
  std::vector<int64_t> row_ptr{0};  // rows + 1 offsets into col_idx/values
  std::vector<uint32_t> col_idx;    // nnz column ids, sorted and unique per row
  std::vector<float> values;        // nnz values, parallel to col_idx
  /// Hashed features only (null otherwise): cols strictly increasing 64-bit
  /// feature ids, column j ↔ (*col_keys)[j]. Shared, never modified.
  std::shared_ptr<const std::vector<uint64_t>> col_keys;

  /// Number of stored entries (explicit zeros included), == row_ptr.back().
  int64_t nnz() const { return row_ptr.back(); }

  /// Appends one row of n entries: idx[0..n) column ids, val[0..n) values.
  /// The ids must already be strictly increasing (checked in debug builds
  /// only; the readers guarantee it). Does not change `cols`: the caller
  /// sets the width. Both pointers may be null when n == 0.
  void AppendRow(const uint32_t* idx, const float* val, size_t n);
};

/// Rows [begin, end) of `m` copied out as a new (end - begin) × m.cols matrix
/// (sharing m.col_keys).
/// Requires 0 <= begin <= end <= m.rows (a programmer error otherwise: CHECK).
CsrMatrix SliceRows(const CsrMatrix& m, int64_t begin, int64_t end);

/// The rows of `m` listed in `rows` (0-based, in that order, repeats allowed)
/// copied out as a new rows.size() × m.cols matrix (sharing m.col_keys). Every index must lie in
/// [0, m.rows) (a programmer error otherwise: CHECK).
CsrMatrix GatherRows(const CsrMatrix& m, const std::vector<int64_t>& rows);

}  // namespace tether
