// Metrics of one server shard:
//  - JSON-lines rows `tether-server` (and the in-process job of
//    local/local_job.h) write to train.metrics_dir (LogShardClocks);
//  - the shard's /metrics page in the Prometheus text format
//    (tether-server --metrics_port; docs/OPERATIONS.md, "Prometheus").
//
// Thread-safety of /metrics: the shard's counters are plain integers of its
// single-threaded event loop, so a scrape never reads them. Run()'s thread
// publishes a copy (ShardMetricsSnapshot: the counters, the staleness
// histogram, each rank's clock and bound wait) at most every
// kShardMetricsPublishMs and once as Run() returns; a scrape copies the
// latest under one mutex (PublishedSnapshot, telemetry/prometheus.h). Values are
// thus up to that interval old while the shard runs, and final after.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "telemetry/metrics_log.h"
#include "telemetry/prometheus.h"
#include "server/server.h"

namespace tether {

/// Makes `server` write one row to `log` each time its min clock advances:
/// {"kind": "clock", "min_clock", "pulls", "pushes", "rows_pulled",
/// "rows_pushed", "bytes_in", "bytes_out", "deferred_pulls",
/// "staleness_mean"}, the shard's counters so far (docs/METRICS.md).
/// Both must outlive server.Run(); rows are written on Run()'s thread.
void LogShardClocks(ServerShard* server, MetricsLog* log);

/// What a shard's /metrics page shows, copied on Run()'s thread.
struct ShardMetricsSnapshot {
  bool published = false;              // false until the first publish
  bool running = false;                // Run() serves; false once it returned
  ShardStats stats;                    // ServerShard::SnapshotStats()
  std::vector<int64_t> worker_clocks;  // [rank]: the clock this shard has for it
  std::vector<std::string> table_names;  // [table id] (the per-table series' `table` label)
  // The smallest clock over the workers that count; once none counts (all
  // finished), the last such value.
  int64_t min_clock = 0;
  uint64_t memory_budget_bytes = 0;  // cluster.server_memory_bytes (0: none)
};

/// How often Run()'s thread publishes at most, in milliseconds.
inline constexpr int kShardMetricsPublishMs = 100;

/// Makes `server` publish its snapshot into `out` (ServerShard's tick
/// listener: at most every kShardMetricsPublishMs while Run() serves, and
/// once, with running = false, as Run() returns). Both must outlive
/// server.Run(). Replaces any tick listener set before.
void PublishShardMetrics(ServerShard* server, PublishedSnapshot<ShardMetricsSnapshot>* out);

/// The Prometheus text of `snap` for shard `shard` of job `job` (labels
/// tether_job, role="server", shard on every sample; worker_rank on the
/// per-worker series; table on the per-table series: rows, rows admitted,
/// evicted and not admitted, resident bytes). docs/OPERATIONS.md lists every metric.
std::string RenderShardMetrics(const ShardMetricsSnapshot& snap, const std::string& job, int shard);

}  // namespace tether
