// tether-bench kv --replicas: what a replica costs a push and a pull. For
// each request shape (KEYSxDIM), the same cells run against shards without
// a copy (replicas 0) and with one (replicas 1: every shard's copy on a
// ReplicaHost in this process, as server/replica_host.h describes), all
// over loopback TCP with one request in flight, measured alternately in
// the same run so both sides see the same machine load. With a replica a
// push's acknowledgement, and a pull's reply, wait until the copy
// acknowledged the input (server/replica_link.h). Prints one Markdown table
// on stdout, one row per shape and variant (docs/FEATURE_COSTS.md gives the
// commands behind its tables).
//
// Ownership: the benchmark owns its shards, hosts and clients.
// Thread-safety: call from one thread; shards and hosts run on threads of
// their own.
#pragma once

#include <string>

#include "bench/bench_cluster.h"
#include "bench/bench_util.h"

namespace tether {

struct ReplicatedKvBenchOptions {
  std::string replicas = "0,1";   // variants, each 0 or 1, one row each per shape
  std::string servers = "2";      // shard counts, each ≥ 2 when a variant has a replica
  std::string shapes;             // "KEYSxDIM,...", floats per key
  BenchTiming timing;
  BenchClientOptions client;
};

/// Runs the benchmark; returns 0, 1 (start-up or a request failed, named on
/// stderr) or 2 (a bad --replicas, --servers or --shapes).
int RunReplicatedKvBench(const ReplicatedKvBenchOptions& options);

}  // namespace tether
