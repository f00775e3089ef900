#include "server/shard_metrics.h"

namespace tether {

void LogShardClocks(ServerShard* server, MetricsLog* log) {
  server->SetClockListener([server, log](int64_t min_clock) {
    const ServerStats& s = server->stats();
    log->Write({{"kind", "clock"}, {"min_clock", min_clock}, {"pulls", s.pulls}, {"pushes", s.pushes},
                {"rows_pulled", s.rows_pulled}, {"rows_pushed", s.rows_pushed}, {"bytes_in", s.bytes_in},
                {"bytes_out", s.bytes_out}, {"deferred_pulls", s.deferred_pulls},
                {"staleness_mean", s.staleness.mean()}});
  });
}

}  // namespace tether
