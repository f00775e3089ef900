#include "server/shard_stats_state.h"

#include <cmath>
#include <string>

namespace tether {

void SaveState(const ServerStats& stats, ServerStatsState* state) {
  state->Clear();
#define TETHER_SAVE_COUNTER(name) state->set_##name(stats.name);
  TETHER_SERVER_COUNTERS(TETHER_SAVE_COUNTER)
#undef TETHER_SAVE_COUNTER
  state->set_failover_seconds(stats.failover_seconds);
  const StalenessHistogram& h = stats.staleness;
  int last = StalenessHistogram::kBuckets - 1;
  while (last >= 0 && h.count[last] == 0) --last;
  for (int b = 0; b <= last; ++b) state->add_staleness_count(h.count[b]);
  state->set_staleness_pushes(h.pushes);
  state->set_staleness_sum(h.sum);
  state->set_staleness_max(h.max);
}

Status RestoreState(const ServerStatsState& state, ServerStats* stats) {
  const std::string at = "shard state: stats.";
  const int buckets = state.staleness_count_size();
  if (buckets > StalenessHistogram::kBuckets)
    return Status::DataLoss(at + "staleness_count: " + std::to_string(buckets) + " buckets, at most " +
                            std::to_string(StalenessHistogram::kBuckets));
  StalenessHistogram h;
  uint64_t total = 0;
  for (int b = 0; b < buckets; ++b) {
    const uint64_t n = state.staleness_count(b);
    if (n > 0 && static_cast<uint64_t>(b) > state.staleness_max())
      return Status::DataLoss(at + "staleness_count[" + std::to_string(b) + "]: " + std::to_string(n) +
                              " pushes past staleness_max " + std::to_string(state.staleness_max()));
    if (total + n < total) return Status::DataLoss(at + "staleness_count: the buckets' sum overflows");
    total += n;
    h.count[b] = n;
  }
  if (total != state.staleness_pushes())
    return Status::DataLoss(at + "staleness_pushes: " + std::to_string(state.staleness_pushes()) +
                            ", the buckets sum to " + std::to_string(total));
  if (!std::isfinite(state.failover_seconds()) || state.failover_seconds() < 0)
    return Status::DataLoss(at + "failover_seconds: " + std::to_string(state.failover_seconds()) +
                            " (a sum of seconds, finite and ≥ 0)");
  h.pushes = state.staleness_pushes();
  h.sum = state.staleness_sum();
  h.max = state.staleness_max();
  ServerStats s;
#define TETHER_RESTORE_COUNTER(name) s.name = state.name();
  TETHER_SERVER_COUNTERS(TETHER_RESTORE_COUNTER)
#undef TETHER_RESTORE_COUNTER
  s.staleness = h;
  s.failover_seconds = state.failover_seconds();
  *stats = s;
  return Status::OK();
}

}  // namespace tether
