// A whole job trained in one test process with every shard's inputs
// recorded (ServerShard::SetInputListener, as server/shard_input.h bytes),
// for the tests that replay a shard's inputs into copies of it
// (tests/shard_replay_test.cc, tests/replicated_shard_schedule_test.cc).
//
// The shards are ShardThreads on 127.0.0.1; each worker runs RunWorker on a
// thread of its own, so the order of a shard's inputs is the scheduler's.
// Bounded: RunWorker's own timeouts (the config's), then at most 30 s for
// each shard to return; every thread is joined before RunRecordedJob
// returns. Thread-safety: call from the test's thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "proto/config.pb.h"
#include "tests/testing/cluster.h"

namespace tether::testing {

struct RecordedJob {
  /// The shards, stopped (their state is the job's end state).
  std::vector<std::unique_ptr<ShardThread>> shards;
  /// Each shard's inputs in the order it took them in.
  std::vector<std::vector<std::string>> inputs;
  /// Each worker's RunWorker status, by rank.
  std::vector<Status> workers;
};

/// Trains `config` (cluster.num_servers shards, cluster.num_workers
/// workers) with every shard's inputs recorded.
RecordedJob RunRecordedJob(const JobConfig& config);

/// What a shard's state comes to, for comparing a copy with its primary:
/// the files a checkpoint at clock 0 writes of it (server/table_checkpoint.h
/// and server/table_budget_checkpoint.h: rows, values, optimizer state,
/// versions; admission sketches, eviction order, counters), by size and
/// XXH3-64, and every rank's clock.
struct ShardDigest {
  uint64_t table_bytes = 0, tables = 0;
  bool has_budget = false;
  uint64_t budget = 0;
  std::vector<int64_t> clocks;
  int64_t min_clock = 0;
  bool operator==(const ShardDigest& o) const {
    return table_bytes == o.table_bytes && tables == o.tables && has_budget == o.has_budget && budget == o.budget &&
           clocks == o.clocks && min_clock == o.min_clock;
  }
};

/// Digests shard `shard` of `config`, writing its files under `dir`
/// (made when missing). A write that fails is a test failure.
ShardDigest DigestShard(const ServerShard& s, const JobConfig& config, int shard, const std::string& dir);

/// Expects `copy`'s reply cache (ServerShard::reply_cache; both null for a
/// shard that is not replicated) to be `primary`'s, id for id and reply for
/// reply, with two differences a copy has by design: a BYE the primary
/// answered as its Run() ended (a finished worker's goodbye is held until
/// the job's outcome) is still unanswered on a copy that never ran, and a
/// copy's CHECKPOINT_REPLY abandons the round whose files the primary
/// wrote (only its request id, clock and abandoned flag are compared).
/// Returns the request ids compared.
size_t ExpectSameReplyCache(const ServerShard& primary, const ServerShard& copy);

/// Expects `copy` (a copy of shard `s` of `c`, fed `primary`'s inputs by
/// Replay, or restored from its state and fed the rest) to hold
/// `primary`'s state: the digests (DigestShard, files under `dir`), the
/// shard's counters, the rows evicted, on shard 0 the job coordinator's
/// state, and for a replicated shard the reply cache (more than 100 ids).
void ExpectSameShardState(const ServerShard& primary, const ServerShard& copy, const JobConfig& c, int s,
                          const std::string& dir);

/// Feeds inputs [begin, end) of shard `shard` (ShardInput bytes, as
/// RecordedJob::inputs holds them) to `copy` with ServerShard::Replay, in
/// order; false on the first that does not decode or fails (a non-fatal
/// test failure names it).
bool ReplayInputs(const std::vector<std::string>& inputs, size_t begin, size_t end, int shard, ServerShard* copy);

/// Bibtex (the bundled data, tests/data/bibtex_fixed.pbtxt: 2 servers, 2
/// workers, SSP staleness 2, Adam) with a 32-unit hidden layer, one epoch,
/// seed 7, 30 s startup and idle timeouts. Paths are relative to the
/// repository root (the tests' working directory).
JobConfig SmallBibtexJob();

}  // namespace tether::testing
