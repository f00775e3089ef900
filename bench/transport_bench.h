// tether-bench transport: Tether push/pull over loopback against a minimal
// ZeroMQ DEALER/ROUTER pair moving the same bytes (bench/raw_zmq.h),
// measured alternately in the same run; with `curve`, Tether with CURVE on
// against CURVE off instead. Prints a Markdown table on stdout
// (docs/PERFORMANCE.md gives the commands behind its tables).
//
// Ownership: the benchmark owns its shards, clients and key directory.
// Thread-safety: call from one thread; the shards run on threads of their own.
#pragma once

#include <string>

#include "bench/bench_cluster.h"
#include "bench/bench_util.h"

namespace tether {

struct TransportBenchOptions {
  std::string keys = "100,1000,10000,100000,1000000";  // key counts per request
  std::string dims;                // row widths in floats; "" = 1,16,64,256
  std::string servers = "1,2";     // shard counts
  std::string ops = "pull,push";   // operations to measure
  std::string shapes;              // curve: request shapes, "KEYSxDIM,..."
  double max_bytes = 1.1e9;        // skip cells whose values exceed this many bytes per request
  bool curve = false;              // CURVE on vs off instead of Tether vs raw ZeroMQ
  BenchTiming timing;
  BenchClientOptions client;       // chunk_bytes also cuts the raw side's messages
};

/// Runs the benchmark; returns the exit code: 0, 1 (a request or start-up
/// failed, named on stderr), 2 (a bad --keys or --shapes).
int RunTransportBench(const TransportBenchOptions& options);

}  // namespace tether
