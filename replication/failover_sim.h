// A simulation of replicated shards for property tests: random schedules
// of pushes, clocks, pulls, server kills, pauses and replica joins over
// simulated server processes and workers that use the replication rooms
// (chain_view.h, replication_log.h, commit_waiters.h, update_dedup.h,
// update_window.h) as a shard and a worker do. Every message carries the
// sender's view of the shard, everyone follows the newest view, each member
// applies its chain's log in order, pushes are acknowledged and pulls
// answered only once committed, and workers send their unacknowledged
// updates again to a new primary.
//
// RunSchedule checks, with exact counts (gtest failures in the calling
// test):
//   - every update each worker made is applied exactly once, in the
//     worker's order, on every live member of the shard's final view, and
//     the members' states are identical;
//   - every pull reply is a committed prefix of the final log (its digest,
//     an order-sensitive hash of the updates applied, equals the final
//     log's digest at that length), so no worker ever read an update that
//     a later primary lacks or applied in another order;
//   - every pull reply keeps the staleness bound (each worker's pushes of
//     clocks < c − s are in it) and read-my-writes;
//   - a paused former primary that wakes is refused and commits nothing.
//
// Single-threaded and deterministic for a seed.
#pragma once

#include <cstdint>

namespace tether {

struct ScheduleOptions {
  int processes = 3;  // server processes at the start, one shard each
  int replicas = 1;   // each shard's chain: 1 + replicas members at the start
  int workers = 2;
  int64_t staleness = 0;  // −1: ASP
  int steps = 2000;       // random steps before the schedule settles
  uint32_t seed = 1;
  bool pauses = false;  // processes stopped and continued
  bool joins = false;   // processes join shards as learners, then tails
  // false: chain forwarding (replication/replication_log.h: each member
  // forwards to its successor). true: fan-out, as tether-server replicates
  // (server/replica_link.h, server/replica_host.h): the primary sends each
  // entry to every replica itself and commits what all of them
  // acknowledged; when the primary is gone the first replica left claims
  // the shard alone, and the copies after it (which may hold entries it
  // lacks) join its claim again as learners.
  bool fan_out = false;
};

/// What a schedule did (the properties are checked in RunSchedule).
struct ScheduleCounts {
  int reads = 0, failovers = 0, stale_refused = 0, resends = 0, duplicates = 0, joins = 0, deposed = 0;
  int rejoins = 0;  // fan-out: copies a claim left out that asked to join it
  // Kills by the dead process's place in the newest view of each shard it
  // was in (one kill may count several places): primary, between the
  // primary and the tail, tail (of a chain of two or more), learner.
  int killed_primaries = 0, killed_middles = 0, killed_tails = 0, killed_learners = 0;
  ScheduleCounts& operator+=(const ScheduleCounts& o);
};

/// Runs one schedule to its end, lets it settle (every process woken,
/// failures noticed, messages delivered) and checks it (above).
ScheduleCounts RunSchedule(const ScheduleOptions& options);

}  // namespace tether
