// tether-bench order: the row order a worker visits its partition in, one
// epoch per line on stdout (EpochOrder, worker/sampling.h), so that
// baselines outside Tether see the same minibatches (scripts/bench_train.sh).
//
// Ownership: returns an exit code; prints to stdout.
// Thread-safety: no shared state.
#pragma once

#include <cstdint>

namespace tether {

struct OrderBenchOptions {
  uint64_t seed = 1;    // train.seed
  int rank = 0;         // the worker's rank
  int epochs = 1;       // epochs to print
  int64_t rows = 0;     // rows in the worker's partition; required (> 0)
};

/// Prints the orders; returns 0, or 2 without rows (said on stderr).
int RunOrderBench(const OrderBenchOptions& options);

}  // namespace tether
