// Parameter tables held by one server shard: row tables (uint64 key → row of
// `dim` floats, created on first touch) and dense slices (a contiguous range
// of a dense table). Each row stores its weights followed by its optimizer
// state, so one push touches one cache-friendly span.
//
// Not thread-safe: a shard's event loop owns its tables.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "core/config.h"
#include "server/optimizer.h"

namespace tether {

/// Deterministic initial value of weight `j` of row `key` in table
/// `table_id`: a counter-based hash of (seed, table, key, j), so the model
/// is identical for any number of shards and any order of first touch.
float InitialWeight(uint64_t seed, uint32_t table_id, uint64_t key, uint32_t j, float bound);

class ServerTable {
 public:
  /// For a dense table, this shard holds [begin, end) of its `size` floats.
  ServerTable(const TableSpec& spec, uint64_t seed, uint64_t begin, uint64_t end);

  const TableSpec& spec() const { return spec_; }
  uint64_t dense_begin() const { return begin_; }
  uint64_t dense_end() const { return end_; }

  /// Row tables: copies the rows of `n` keys into out (n × dim floats),
  /// creating untouched rows with the initializer.
  void PullRows(const uint64_t* keys, uint64_t n, float* out);
  /// Row tables: applies gradients g (n × dim) to the rows of `keys`.
  void PushRows(const uint64_t* keys, uint64_t n, const float* g, float lr_scale = 1.0f);
  /// Dense slice: copies its end−begin floats into out.
  void PullDense(float* out) const;
  /// Dense slice: applies g (end−begin floats).
  void PushDense(const float* g, float lr_scale = 1.0f);

  uint64_t num_rows() const { return index_.size(); }

  /// Updates applied to this table on this shard so far (one per push).
  uint64_t version() const { return version_; }

 private:
  float* Row(uint64_t key);  // creates on first touch

  TableSpec spec_;
  Optimizer optimizer_;
  uint64_t seed_;
  uint64_t begin_ = 0, end_ = 0;
  uint64_t version_ = 0;
  uint32_t stride_;  // dim + optimizer state floats per row
  std::unordered_map<uint64_t, uint64_t> index_;  // key → offset in data_
  std::vector<float> data_;
};

}  // namespace tether
