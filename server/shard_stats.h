// The counters one server shard keeps: logged at exit, sent in STATS_REPLY
// as a ShardStats (ServerShard::SnapshotStats) and shown on its /metrics
// page (server/shard_metrics.h). Each room of the shard counts what it
// does into the one ServerStats the shard owns.
//
// Thread-safety: plain integers of the shard's event loop; other threads
// read published copies only (server/shard_metrics.h).
#pragma once

#include <algorithm>
#include <cstdint>

namespace tether {

/// Staleness τ of applied pushes (Zhang et al., IJCAI 2016): how many
/// updates to the table landed between the version a gradient was computed
/// from and its own application.
struct StalenessHistogram {
  static constexpr int kBuckets = 64;  // τ = 0..62 exactly, the last bucket ≥ 63
  uint64_t count[kBuckets] = {};
  uint64_t pushes = 0, sum = 0, max = 0;
  void Add(uint64_t tau) {
    ++count[std::min<uint64_t>(tau, kBuckets - 1)];
    ++pushes;
    sum += tau;
    max = std::max(max, tau);
  }
  double mean() const { return pushes ? static_cast<double>(sum) / pushes : 0.0; }
};

// The shard's counters, listed once: each is a uint64_t member of
// ServerStats and the ShardStats field of the same name (proto/stats.proto
// says what each counts), so STATS_REPLY cannot leave one out.
#define TETHER_SERVER_COUNTERS(X)                                                      \
  X(pulls)             /* PULL requests served */                                      \
  X(pushes)            /* PUSH requests applied */                                     \
  X(rows_pulled)       /* rows sent in pull replies (row tables) */                    \
  X(rows_pushed)       /* rows of gradients applied (row tables) */                    \
  X(updates_applied)   /* rows applied, a dense push counting 1; equals the */         \
                       /* workers' ClientStats::updates_sent once all are answered */  \
  X(bytes_in)          /* keys and values frames received */                           \
  X(bytes_out)         /* keys and values frames sent */                               \
  X(deferred_pulls)    /* pulls that waited on the staleness bound */                  \
  X(bound_violations)  /* pulls answered past their bound: must stay 0 */              \
  X(bad_messages)      /* answered with ERROR_REPLY */                                 \
  X(send_failures)     /* replies that could not be delivered */                       \
  X(workers_timed_out) /* removed from the min clock for silence */                    \
  X(workers_rejoined)  /* HELLO again from a known rank */                           \
  X(workers_joined)    /* HELLO from a new rank beyond cluster.num_workers */          \
  X(failovers)         /* times a replica claimed this shard (RecordFailover) */

/// Counters a shard keeps.
struct ServerStats {
#define TETHER_DECLARE_COUNTER(name) uint64_t name = 0;
  TETHER_SERVER_COUNTERS(TETHER_DECLARE_COUNTER)
#undef TETHER_DECLARE_COUNTER
  StalenessHistogram staleness;  // over all tables of the shard
  // Seconds from the primary's last message the replica received to the
  // replica serving the shard (the pause its workers saw), summed over
  // `failovers` (RecordFailover).
  double failover_seconds = 0;

  /// A replica claimed this shard: called once by the claimant, on the
  /// copy it now serves, with the seconds from the primary's last message
  /// it received to serving the shard again (≥ 0: about 0.1 s for a
  /// process that died, cluster.liveness_timeout_ms and more for one that
  /// stopped answering).
  void RecordFailover(double seconds) {
    ++failovers;
    failover_seconds += seconds;
  }
};

}  // namespace tether
