// RowAdmission: which keys of a row table get a row on this shard
// (TableBudget.admit_after / admit_probability, proto/tables.proto).
//
// With hashed features most ids are seen once or twice and carry no signal;
// a row for each is memory spent on noise. A key's pushes are counted in a
// count-min sketch (Cormode & Muthukrishnan, "An improved data stream
// summary: the count-min sketch and its applications", J. Algorithms 2005),
// with conservative update (Estan & Varghese, SIGCOMM 2002: only the
// smallest of a key's counters move), so a key costs no memory until it is
// admitted:
//  - admit_after K: a key is admitted at the push that brings its count to
//    K. The sketch never under-counts, so a key is admitted at its K-th
//    push or, when its counters collide with other keys', earlier.
//  - admit_probability p: each push of a key not yet admitted admits it
//    with probability p, drawn from a hash of (seed, table id, key, its
//    count so far): the same keys are admitted at the same pushes in every
//    run with the same seed and the same order of pushes.
// A key's count is kept after it is admitted (a count-min sketch cannot
// take one key's count out without under-counting the keys it shares
// counters with): a key whose row was evicted is counted on from where it
// was, so one that had reached K is admitted again at its next push, as a
// new key, its row starting from its initializer. Counts never decay: over
// a long stream, collisions raise every estimate (by at most e/width of
// the pushes of absent keys, with probability 1 − e^−depth), admitting
// keys earlier; the width follows max_rows for that reason.
//
// Cost: depth × width 16-bit counters (kDepth × width × 2 bytes; 8 MiB at
// the default width 2^20), and per push of an absent key kDepth hashed
// counter reads and writes. Counts saturate at 65535 (admit_after ≤ 65535).
//
// Not thread-safe: the shard's event loop owns it (through its table).
#pragma once

#include <cstdint>
#include <vector>

#include "proto/tables.pb.h"

namespace tether {

/// A count-min sketch of uint64 keys with conservative update: kDepth rows
/// of `width` saturating 16-bit counters (width a power of two ≥ 64).
class CountMinSketch {
 public:
  static constexpr int kDepth = 4;
  static constexpr uint32_t kMaxCount = 65535;
  /// `width`: counters per row, rounded up to a power of two (at least 64);
  /// `seed` picks the hash functions.
  CountMinSketch(uint64_t width, uint64_t seed);

  /// Counts one sighting of `key`; returns the new estimate (≥ the true
  /// count, ≤ kMaxCount).
  uint32_t Add(uint64_t key);
  /// The estimate of `key`'s count (the smallest of its counters).
  uint32_t Estimate(uint64_t key) const;

  uint64_t width() const { return width_; }
  uint64_t bytes() const { return counters_.size() * sizeof(uint16_t); }
  /// The counters, row after row (kDepth × width()): a checkpoint's copy.
  const std::vector<uint16_t>& counters() const { return counters_; }
  std::vector<uint16_t>* mutable_counters() { return &counters_; }

 private:
  uint64_t Index(int row, uint64_t key) const;

  uint64_t width_;
  uint64_t seed_;
  std::vector<uint16_t> counters_;
};

/// The admission rule of one row table on one shard.
class RowAdmission {
 public:
  /// Sketch width when the table sets no max_rows: 2^20 counters a row
  /// (AdmissionSketchWidth, optim/shard_budget.h).
  static constexpr uint64_t kDefaultWidth = uint64_t{1} << 20;

  /// `budget` must have passed ValidateTableSpecs; `seed` is the job's
  /// (TableSpec.init.seed), `table_id` the table's. The sketch's width is
  /// AdmissionSketchWidth(budget) (optim/shard_budget.h): 4 × max_rows
  /// counters a row (between 2^12 and 2^22), else kDefaultWidth.
  RowAdmission(const TableBudget& budget, uint64_t seed, uint32_t table_id);

  /// Bytes of the sketch a table with `budget` keeps (0 without an
  /// admission rule): the start-up fit check counts them.
  static uint64_t SketchBytes(const TableBudget& budget);

  /// True when the table has an admission rule (admit_after or
  /// admit_probability < 1).
  static bool Enabled(const TableBudget& budget);

  /// A push of `key`, which holds no row here: counts it, and returns true
  /// when the key is admitted now (its row is to be created).
  bool AdmitOnPush(uint64_t key);

  const CountMinSketch& sketch() const { return sketch_; }
  CountMinSketch* mutable_sketch() { return &sketch_; }

 private:
  uint32_t admit_after_;       // 0: by probability
  uint64_t threshold_;         // admit_probability as a 64-bit threshold (2^64 · p, saturated)
  uint64_t seed_;
  uint32_t table_id_;
  CountMinSketch sketch_;
};

}  // namespace tether
