// JSON-lines metrics of one server shard: the rows `tether-server` (and the
// in-process job of tools/local_job.h) write to train.metrics_dir.
#pragma once

#include "core/metrics_log.h"
#include "server/server.h"

namespace tether {

/// Makes `server` write one row to `log` each time its min clock advances:
/// {"kind": "clock", "min_clock", "pulls", "pushes", "rows_pulled",
/// "rows_pushed", "bytes_in", "bytes_out", "deferred_pulls",
/// "staleness_mean"}, the shard's counters so far (docs/PERFORMANCE.md §6).
/// Both must outlive server.Run(); rows are written on Run()'s thread.
void LogShardClocks(ServerShard* server, MetricsLog* log);

}  // namespace tether
