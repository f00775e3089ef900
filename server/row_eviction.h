// RowEviction: which row of a row table leaves this shard when the table is
// at its budget (TableBudget.max_rows and evict, proto/tables.proto).
//
// Rows are numbered 0 .. rows − 1 (ServerTable keeps them dense: an evicted
// row's place is taken by the last row, Removed()). Per row it keeps the
// clock of its last touch (a pull or push), how often it was pushed, the
// request that touched it last, and its place in a list ordered by last touch
// (doubly linked through row numbers), so that every operation is O(1)
// (LFU: O(kSamples)) and nothing ever scans the table:
//  - LRU: the victim is the list's tail, the row touched longest ago.
//  - TTL: rows whose last touch is ttl_clocks or more clocks old are taken
//    from the tail as they expire (Expired()); at max_rows, as LRU.
//  - LFU: the victim is the least pushed of kSamples rows drawn from a
//    generator seeded by the table (ties: the one touched longest ago): an
//    approximation of LFU without a frequency-ordered structure, as Redis's
//    allkeys-lfu samples. Pushes, not pulls, are counted: a worker that
//    reads ahead pulls a minibatch again after a resume, and a count of
//    pulls would then differ from an uninterrupted run's. Counts do not
//    decay, so a row pushed often long ago stays over a newly busy one.
// Rows touched by the request being served (its `serial`) are never
// chosen: a request's rows are resolved before the new ones are made room
// for.
//
// Cost: kBytesPerRow bytes a row. Not thread-safe: the shard's event loop
// owns it (through its table).
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "optim/shard_budget.h"
#include "proto/tables.pb.h"

namespace tether {

class RowEviction {
 public:
  static constexpr uint64_t kNone = ~uint64_t{0};
  static constexpr int kSamples = 8;
  /// Metadata bytes per row (list links, last touch clock, request serial, push count).
  static constexpr uint64_t kBytesPerRow = kEvictionBytesPerRow;

  /// `policy` other than EVICT_NONE; `ttl_clocks` ≥ 1 for TTL; `seed`
  /// seeds LFU's samples.
  RowEviction(EvictPolicy policy, uint64_t ttl_clocks, uint64_t seed);

  /// Row `row` (== rows() before the call) was created at `clock` by
  /// request `serial`, a push or a pull.
  void Added(uint64_t row, int64_t clock, uint64_t serial, bool push);
  /// Row `row` was pulled or pushed at `clock` by request `serial`.
  void Touched(uint64_t row, int64_t clock, uint64_t serial, bool push);
  /// The row to evict to make room, or kNone when every row was touched by
  /// request `serial`.
  uint64_t Victim(uint64_t serial);
  /// TTL: a row whose last touch is ttl_clocks or more before `clock` and
  /// not by request `serial`, or kNone (always kNone for LRU and LFU).
  uint64_t Expired(int64_t clock, uint64_t serial) const;
  /// Row `row` was evicted and the last row (rows() − 1) took its number
  /// (when it is not `row` itself): the metadata follows; rows() drops by 1.
  void Removed(uint64_t row);

  uint64_t rows() const { return clock_.size(); }
  int64_t last_touch(uint64_t row) const { return clock_[row]; }
  uint32_t pushes(uint64_t row) const { return count_[row]; }
  /// The request that touched `row` last (a shard state carries it).
  uint64_t serial(uint64_t row) const { return serial_[row]; }
  /// Row numbers from the most to the least recently touched (tests,
  /// checkpoints).
  std::vector<uint64_t> RecencyOrder() const;
  /// LFU's generator state (checkpoints).
  uint64_t sample_state() const { return rng_; }
  /// Replaces every row's metadata (a checkpoint's, taken between requests,
  /// so no row is stamped with a request in progress): `order` the row
  /// numbers from the most to the least recently touched (a permutation of
  /// 0 .. n − 1), the others by row number (n each). `serials` (n, by row
  /// number; a shard state's) or null: every row's request is 0. Errors:
  /// InvalidArgument when the sizes differ or `order` is not a permutation;
  /// nothing changes then.
  Status Restore(const std::vector<uint64_t>& order, const std::vector<int64_t>& clocks,
                 const std::vector<uint32_t>& counts, uint64_t sample_state,
                 const std::vector<uint64_t>* serials = nullptr);

 private:
  void Unlink(uint64_t row);
  void PushFront(uint64_t row);
  uint64_t NextRandom();

  EvictPolicy policy_;
  uint64_t ttl_clocks_;
  uint64_t rng_;
  uint64_t head_ = kNone, tail_ = kNone;  // most and least recently touched
  std::vector<uint64_t> prev_, next_;     // toward the head, toward the tail
  std::vector<int64_t> clock_;            // clock of the last touch
  std::vector<uint64_t> serial_;          // request of the last touch
  std::vector<uint32_t> count_;           // pushes, saturating
};

}  // namespace tether
