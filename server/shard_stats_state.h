// A copy of a shard's counters (ServerStats, server/shard_stats.h) in
// proto/shard_state.proto ServerStatsState: part of a running shard's state
// sent to a joining replica. Carried: every TETHER_SERVER_COUNTERS counter,
// the staleness histogram (buckets, pushes, sum, max) and failover_seconds.
//
// Thread-safety: like ServerStats, the shard's event loop's (Run()'s
// thread).
#pragma once

#include "core/status.h"
#include "proto/shard_state.pb.h"
#include "server/shard_stats.h"

namespace tether {

/// Writes `stats` into `*state` (cleared first); the histogram is cut after
/// its last non-zero bucket.
void SaveState(const ServerStats& stats, ServerStatsState* state);

/// Sets `*stats` (a shard's, freshly made) from `state`. Errors: DataLoss
/// naming the field ("shard state: stats.staleness_count ...") for more
/// than StalenessHistogram::kBuckets buckets, buckets that do not sum to
/// staleness_pushes, a non-empty bucket past staleness_max, or
/// failover_seconds negative or not finite; `*stats` is then left as it
/// was.
Status RestoreState(const ServerStatsState& state, ServerStats* stats);

}  // namespace tether
