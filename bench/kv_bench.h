// tether-bench kv: the worker side of scripts/bench_pslite.sh against a
// tether-server started apart (one shard, one worker, ASP, no cache, so
// every request crosses the wire): one ROW table per distinct dim of the
// shapes, any uint64 key, zeros at start, SGD (lr 1e-6) or NOOP, values on
// the wire in float32 or, with --wire, 16 bits (pushes with error
// feedback, as a job's --wire sets them; core/wire_codec.h). Per shape:
// one untimed push and pull (creates the rows, fills the frame pools), then
// timed pushes (PushRows + WaitAll: applied and acknowledged) and pulls
// alternately, as bench/pslite_kv/kv_bench.cc times ps-lite. Prints "READY"
// once connected, then "RESULT keys dim push_ms pull_ms reps" lines
// (medians) on stdout for the script to merge, then says BYE (the server
// exits).
//
// Ownership: the benchmark owns its client; the server is the caller's.
// Thread-safety: one thread.
#pragma once

#include <cstdint>
#include <string>

#include "bench/bench_util.h"

namespace tether {

struct KvBenchOptions {
  std::string server;             // endpoint of the running tether-server; required
  std::string job_id = "tether-bench-kv";  // the server's job id
  std::string shapes;             // "KEYSxDIM,..."
  std::string optimizer = "sgd";  // sgd | noop
  std::string wire = "fp32";      // fp32 | bf16 | fp16: both directions
  bool error_feedback = true;     // 16-bit pushes keep their rounding residuals (worker/client/residual_store.h)
  std::string client_key_file;         // with server_public_key_file: CURVE on
  std::string server_public_key_file;
  double push_value = 0.5;        // every pushed float
  bool key_list_cache = true;     // name repeated key lists instead of sending their keys
  bool push_copy = false;         // push from a plain buffer the client copies (else a PushValues by reference)
  uint64_t key_seed = 1;          // seed of the random sorted keys (bench/random_keys.h)
  int64_t chunk_bytes = 0;        // > 0: ClientOptions::max_message_bytes
  int max_outstanding = 0;        // > 0: ClientOptions::max_outstanding
  BenchTiming timing;
};

/// Runs the benchmark; returns 0, 1 (the server refused or a request
/// failed, named on stderr) or 2 (a bad flag: no --server, an unknown
/// --optimizer or --wire, a bad shape, bad CURVE keys).
int RunKvBench(const KvBenchOptions& options);

}  // namespace tether
