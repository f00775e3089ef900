// LocalReplica: a worker's local copy of the model under consistency model
// AVERAGE (weighted model averaging, server/model_average.h). It sits
// between a Model and its WorkerClient (WorkerClient::AttachReplica), so the
// models need no change: their PullRows / PullDense read the replica, and
// their PushRows / PushDense take a step of the local optimizer on it
// instead of sending gradients. The replica reaches the servers through
// the client's ServerPath (WorkerClient::servers()), the path the client's
// calls take without a replica.
//
// A period (a round, one clock): the first read of a row or dense table in
// the period fetches it from the servers (a pull at the round's clock,
// which the servers answer once the previous round is merged: every row is
// the model the period started from, θ₀); later reads and steps use the
// local copy θ. WorkerClient::Clock() calls EndPeriod(): the replica pushes
// Δ = θ − θ₀ of every row (or dense table) it holds whose Δ is not all zero
// (PUSH_DELTA, at the round's clock), forgets the period's rows, and
// returns its update count, which the CLOCK carries as its weight.
//
// Updates: the local optimizer steps of the period, counted as the most
// pushes any one table received (each model pushes each table once per
// minibatch, so this is the minibatches trained in the period).
//
// Where optimizer state lives: the local optimizer is each table's
// configured one (TableSpec.optimizer: SGD with or without momentum,
// AdaGrad, Adam; ValidateJobConfig refuses FTRL, SUM and NOOP under
// AVERAGE), with its state (momentum, AdaGrad's sums, Adam's moments and
// step count) kept here, per row this worker ever stepped, across periods;
// it is this worker's own and is never sent. The servers keep no optimizer
// state (their tables sum merged deltas), only the merge's model momentum.
// Neither is checkpointed: a resumed job starts both at their initial value.
//
// Memory: the rows read in one period (2 × dim floats each: θ and θ₀),
// plus the optimizer state of every row ever stepped (StateFloats(dim)).
//
// Errors: a pull's error surfaces on the handle returned (as WorkerClient);
// a delta push's is sticky on the client (its next Clock, Barrier or Bye).
//
// Not thread-safe: one per WorkerClient, on the client's thread.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "core/config.h"
#include "optim/optimizer.h"
#include "worker/client/request_channel.h"

namespace tether {

class WorkerClient;

class LocalReplica {
 public:
  /// `tables`: the job's tables (TablesForJob, the client's); `client` is
  /// borrowed and must outlive the replica. Does not attach itself.
  LocalReplica(const std::vector<TableSpec>& tables, WorkerClient* client);

  /// As WorkerClient::PullRows (keys sorted, unique): rows held this period
  /// come from the replica, the others are fetched first (blocking). The
  /// returned handle is complete.
  RequestHandle PullRows(uint32_t table, const std::vector<uint64_t>& keys, float* out);
  /// As WorkerClient::PullDense.
  RequestHandle PullDense(uint32_t table, float* out);
  /// One local optimizer step on the rows of `keys` with gradients `grads`
  /// (keys.size() × dim); rows not held yet are fetched first. Returns a
  /// complete handle (a fetch's error, or OK).
  RequestHandle PushRows(uint32_t table, const std::vector<uint64_t>& keys, const float* grads);
  /// One local optimizer step on dense table `table`.
  RequestHandle PushDense(uint32_t table, const float* grad);

  /// Ends the period: pushes the deltas (PUSH_DELTA), forgets the period's
  /// rows, and returns the period's local updates (see the file comment).
  uint64_t EndPeriod();

  struct Stats {
    uint64_t periods = 0;         // EndPeriod calls
    uint64_t local_updates = 0;   // summed over periods (local optimizer steps)
    uint64_t rows_fetched = 0;    // rows read from the servers
    uint64_t delta_rows = 0;      // rows (dense tables count 1) of deltas pushed
    // Periods that ended with updates > 0: this worker's deltas, each a
    // weight in its round's merge (WorkerStats.average.deltas_pushed).
    uint64_t deltas_pushed = 0;
  };
  const Stats& stats() const { return stats_; }

 private:
  struct Table {
    TableSpec spec;
    std::unique_ptr<Optimizer> optimizer;
    uint64_t width = 0;  // dim (row tables) or size (dense)
    uint64_t state_floats = 0;  // per row / dense table
    // Row tables: this period's rows, key → slot in theta/base.
    std::unordered_map<uint64_t, uint32_t> slot;
    std::vector<uint64_t> keys;  // by slot
    std::vector<float> theta, base;
    // Optimizer state: row tables key → state (kept across periods); dense:
    // one block.
    std::unordered_map<uint64_t, std::vector<float>> row_state;
    std::vector<float> dense_state;
    bool dense_held = false;
    uint64_t pushes = 0;  // this period
  };
  // Fetches the keys of `keys` not held yet; returns the fetch's handle (or
  // a done one).
  RequestHandle Fetch(Table& t, uint32_t table, const std::vector<uint64_t>& keys);
  RequestHandle FetchDense(Table& t, uint32_t table);

  WorkerClient* client_;
  std::vector<Table> tables_;
  std::vector<uint64_t> missing_;
  std::vector<float> fetched_;
  Stats stats_;
};

}  // namespace tether
