// tether-bench checkpoint: writes and loads an XMC-MLP-shaped model (Adam
// state included) through the server's checkpoint path
// (server/table_checkpoint.h, checkpoint/checkpoint.h), every shard in a
// thread of its own as servers on one host, against dd's sequential write
// speed to the same directory, measured in the same run. Loads it back on
// as many shards and on another count (re-sharded). Prints Markdown on
// stdout; the directory it made is removed after.
//
// Ownership: the benchmark owns what it makes (tables, files) and removes
// its directory when it succeeds.
// Thread-safety: call from one thread; it runs one thread per shard.
#pragma once

#include <cstdint>
#include <string>

namespace tether {

struct CheckpointBenchOptions {
  std::string dir;                // where to write; "" = $TMPDIR/tether-bench-checkpoint.PID
  int64_t features = 135909;      // input features (rows of w1); Amazon-670K's
  int64_t labels = 670091;        // labels (rows of w2, size of b2); Amazon-670K's
  int hidden = 256;               // hidden width (dim of w1 and w2 rows)
  int servers = 2;                // shards writing
  int load_servers = 3;           // shards loading it back (another count re-shards)
};

/// Runs the benchmark; returns 0, or 1 when a write or load failed (named
/// on stderr).
int RunCheckpointBench(const CheckpointBenchOptions& options);

}  // namespace tether
