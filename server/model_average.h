// Weighted model averaging for one shard: the merge of consistency model
// AVERAGE (the Adaptive SGD merge, Ma et al., arXiv 2110.07029; local SGD /
// model averaging as in Zhang, Choromanska & LeCun, "Deep learning with
// elastic averaging SGD", NIPS 2015, without the elastic term).
//
// Workers train local replicas for a period (a round) and push their deltas
// Δᵢ = replica − the model they started the round from (PUSH_DELTA), then
// end the round with a CLOCK that carries wᵢ, the local updates (minibatch
// steps) they did. When the round closes (every worker that still counts
// has ended it: the shard's settled clock passed it, see ClockTracker), the
// shard applies, per row or dense slice of this shard,
//
//   v ← m·v + Σᵢ wᵢΔᵢ / Σᵢ wᵢ        θ ← θ + v
//
// with m = consistency.model_momentum (m = 0: θ ← θ + the weighted mean of
// the deltas, i.e. the weighted mean of the replicas). The sums run over
// the workers that ended the round; a row a worker did not touch has
// Δᵢ = 0 there but its wᵢ still counts in the denominator (its replica
// held the round's start value). With 2 workers of equal weight, plain
// SGD and one minibatch per round this is synchronous SGD on the union of
// the two minibatches (tests/average_test.cc).
//
// A worker that leaves (BYE, timed out, rejoined) before ending its round
// is Dropped: its partial delta of that round is discarded and it has no
// weight in it; rounds it ended before stay merged or counted. A round in
// which no worker ended with a weight > 0 changes nothing (v is not
// decayed either).
//
// Momentum state v lives here, one vector per row touched so far (and per
// dense slice): its memory is that of the rows ever merged. It is not part
// of checkpoints: a resumed job restarts v at 0. The server's own optimizer
// is not applied to deltas (the shard's tables use SUM under AVERAGE).
//
// Bounds: pending deltas hold at most one round per worker (a worker is in
// one round at a time: it ends a round before it sends deltas of the next),
// plus the closed-but-unmerged sums of at most one round per distinct
// worker clock. Its next round's pulls wait for this one's merge, except
// while another worker is parked at the validation round (its pulls then
// read the rounds every worker ended: a worker whose epoch takes more
// rounds trains through them to reach the round).
//
// Not thread-safe: owned by the shard's event loop.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "proto/shard_state.pb.h"
#include "server/state_bytes.h"

namespace tether {

class ModelAverager {
 public:
  /// `momentum`: m in [0, 1).
  explicit ModelAverager(double momentum) : momentum_(momentum) {}

  /// Adds rank's delta for round `round` of row table `table`: n keys, n ×
  /// dim floats (unscaled Δ). A key sent twice in a round adds up. Errors:
  /// FailedPrecondition when `round` was already merged (a late delta),
  /// or when rank is still in another round (it did not end it), or a dim
  /// differing from the table's earlier deltas.
  Status AddRows(int rank, int64_t round, uint32_t table, const uint64_t* keys, uint64_t n, uint32_t dim,
                 const float* delta);
  /// Same for a dense slice of n floats (the shard's range of the table).
  Status AddDense(int rank, int64_t round, uint32_t table, const float* delta, uint64_t n);
  /// rank ended round `round` with `updates` local updates: its pending
  /// deltas join the round's weighted sum. Errors: FailedPrecondition as
  /// AddRows (a merged round, or pending deltas of another round).
  Status Complete(int rank, int64_t round, uint64_t updates);
  /// rank left before ending its round: its pending deltas are discarded.
  /// Returns the rows (dense slices count 1) discarded.
  uint64_t Drop(int rank);

  /// Applies every round < `through` not yet merged, in round order: calls
  /// apply_rows(table, keys (sorted), n, dim, step) per row table and
  /// apply_dense(table, step, n) per dense slice with the step v to add to
  /// θ. An error from a callback stops the merge and is returned (the
  /// round is dropped). Returns the rounds merged.
  using RowsFn = std::function<Status(uint32_t table, const uint64_t* keys, uint64_t n, uint32_t dim,
                                      const float* step)>;
  using DenseFn = std::function<Status(uint32_t table, const float* step, uint64_t n)>;
  StatusOr<int64_t> MergeThrough(int64_t through, const RowsFn& apply_rows, const DenseFn& apply_dense);

  /// Rounds merged so far; the first round not merged.
  int64_t rounds_merged() const { return rounds_merged_; }
  int64_t next_round() const { return merged_before_; }
  /// Rows (dense slices count 1) Drop discarded so far.
  uint64_t deltas_dropped() const { return deltas_dropped_; }
  /// Deltas (one per worker that ended a merged round with updates > 0,
  /// whether or not it sent rows of this shard) merged so far.
  uint64_t deltas_merged() const { return deltas_merged_; }
  /// Calls of Drop that discarded pending deltas (a worker left mid-round).
  uint64_t deltas_discarded() const { return deltas_discarded_; }

  // ---- Shard state (server/model_average_state.cc), for a replica that
  // joins a running shard: everything but the momentum (the job's).
  /// The shape of table id i (for the checks of RestoreState).
  struct TableShape {
    bool dense = false;
    uint32_t dim = 0;     // row tables
    uint64_t slice = 0;   // dense: the shard's floats
  };
  /// Writes the pending deltas, the rounds not merged, the velocity and the
  /// counters into *state; each table's sums (keys ascending) are appended
  /// to (*table_bytes)[table id] (layout: proto/shard_state.proto
  /// AverageSumsState).
  void SaveState(ModelAverageState* state, std::vector<std::string>* table_bytes) const;
  /// On a fresh averager: takes SaveState's state back, reading the sums
  /// from (*table_bytes)[table id]. Ranks must be below `max_ranks`.
  /// Errors: DataLoss naming the part (a table unknown or of another
  /// shape, keys not ascending, ranks or rounds out of order, counts past
  /// the bytes).
  Status RestoreState(const ModelAverageState& state, const std::vector<TableShape>& tables, int max_ranks,
                      std::vector<StateReader>* table_bytes);

 private:
  // Row deltas or sums of one table: key → dim floats; dense: one slice.
  struct TableSums {
    uint32_t dim = 0;
    std::unordered_map<uint64_t, std::vector<float>> rows;
    std::vector<float> dense;
    bool is_dense = false;
  };
  using Sums = std::map<uint32_t, TableSums>;  // by table id
  struct Pending {
    int64_t round = -1;  // -1: nothing pending
    Sums tables;
  };
  struct Round {
    double weight = 0;    // Σ wᵢ
    uint64_t deltas = 0;  // workers with wᵢ > 0
    Sums tables;          // Σ wᵢ Δᵢ
  };
  Status CheckRound(int rank, int64_t round) const;
  // State of a table's sums (model_average_state.cc).
  static void SaveSums(uint32_t table, const TableSums& sums, AverageSumsState* state,
                       std::vector<std::string>* table_bytes);
  static Status RestoreSums(const AverageSumsState& state, const std::vector<TableShape>& tables,
                            std::vector<StateReader>* table_bytes, Sums* out);

  double momentum_;
  std::unordered_map<int, Pending> pending_;  // by rank
  std::map<int64_t, Round> rounds_;           // ended by someone, not merged
  std::map<uint32_t, TableSums> velocity_;    // v, by table (momentum > 0 only)
  int64_t merged_before_ = 0;                 // rounds < this are merged
  int64_t rounds_merged_ = 0;
  uint64_t deltas_dropped_ = 0;
  uint64_t deltas_merged_ = 0;
  uint64_t deltas_discarded_ = 0;
};

}  // namespace tether
