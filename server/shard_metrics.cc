#include "server/shard_metrics.h"

#include <chrono>
#include <memory>


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

void PublishShardMetrics(ServerShard* server, PublishedSnapshot<ShardMetricsSnapshot>* out) {
  struct State {
    std::chrono::steady_clock::time_point last{};
    int64_t min_clock = 0;
  };
  auto state = std::make_shared<State>();
  server->SetTickListener([server, out, state](bool done) {
    const ClockTracker& clocks = server->clocks();
    if (clocks.min_clock() != ClockTracker::kNoWorkers) state->min_clock = clocks.min_clock();
    // The loop's calls are throttled (a publish copies the shard's stats);
    // the last one, as Run() returns, always publishes the final values.
    const auto now = std::chrono::steady_clock::now();
    if (!done && now - state->last < std::chrono::milliseconds(kShardMetricsPublishMs)) return;
    state->last = now;
    ShardMetricsSnapshot snap;
    snap.published = true;
    snap.running = !done;
    snap.stats = server->SnapshotStats();
    snap.worker_clocks.resize(clocks.num_workers());
    for (int r = 0; r < clocks.num_workers(); ++r) snap.worker_clocks[r] = clocks.clock(r);
    snap.min_clock = state->min_clock;
    snap.memory_budget_bytes = server->memory_budget_bytes();
    for (size_t t = 0; t < server->num_tables(); ++t) snap.table_names.push_back(server->table(t).spec().name());
    out->Publish(std::move(snap));
  });
}

namespace {

// Upper bounds of the staleness histogram's buckets: every τ up to 8, then
// coarser, within the 63 exact buckets the shard keeps (τ ≥ 63 falls in
// +Inf only).
const std::vector<double>& StalenessBounds() {
  static const std::vector<double> kBounds = {0, 1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 24, 32, 48, 62};
  return kBounds;
}

using T = ExpositionWriter::Type;

// The shard's request, byte and membership counters.
void WriteCounters(const ShardStats& s, const PrometheusLabels& base, ExpositionWriter* out) {
  ExpositionWriter& w = *out;
  struct Counter {
    const char* name;
    uint64_t value;
    const char* help;
  };
  const Counter counters[] = {
      {"tether_server_pulls_total", s.pulls(), "PULL requests served."},
      {"tether_server_pushes_total", s.pushes(), "PUSH requests applied."},
      {"tether_server_rows_pulled_total", s.rows_pulled(), "Rows sent in pull replies (row tables)."},
      {"tether_server_rows_pushed_total", s.rows_pushed(), "Rows of gradients applied (row tables)."},
      {"tether_server_updates_applied_total", s.updates_applied(),
       "Updates applied: rows of pushes, a dense push counting 1 (the metrics JSON's updates_applied, summed "
       "over shards)."},
      {"tether_server_received_bytes_total", s.bytes_in(), "Bytes of keys and values frames received."},
      {"tether_server_sent_bytes_total", s.bytes_out(), "Bytes of keys and values frames sent."},
      {"tether_server_deferred_pulls_total", s.deferred_pulls(), "Pulls that waited on the staleness bound."},
      {"tether_server_bound_violations_total", s.bound_violations(),
       "Pulls answered past their staleness bound (must stay 0)."},
      {"tether_server_bad_messages_total", s.bad_messages(), "Requests answered with ERROR_REPLY."},
      {"tether_server_send_failures_total", s.send_failures(), "Replies that could not be delivered."},
      {"tether_server_workers_timed_out_total", s.workers_timed_out(),
       "Workers removed from the min clock for silence."},
      {"tether_server_workers_rejoined_total", s.workers_rejoined(), "HELLOs again from a known rank."},
      {"tether_server_workers_joined_total", s.workers_joined(), "HELLOs from new ranks beyond cluster.num_workers."},
      {"tether_server_failovers_total", s.failovers(),
       "Times a replica claimed this shard after its primary was gone (cluster.replicas)."},
      {"tether_server_key_lists_defined_total", s.key_lists().defined(),
       "Requests whose key list this shard kept (core/net/key_list_cache.h)."},
      {"tether_server_key_lists_used_total", s.key_lists().used(),
       "Requests served from a kept key list (no keys received, no lookups)."},
      {"tether_server_key_lists_unknown_total", s.key_lists().unknown(),
       "Requests that named a key list this shard did not hold (the worker sent them again with their keys)."},
      {"tether_server_key_lists_saved_bytes_total", s.key_lists().bytes_saved(),
       "Bytes of keys frames not received thanks to kept key lists."},
  };
  for (const Counter& c : counters) w.Counter(c.name, c.help, base, static_cast<double>(c.value));
  w.Counter("tether_server_failover_seconds_total",
            "Seconds from taking this shard's primary for gone to a replica serving the shard, summed over its "
            "failovers.",
            base, s.failover_seconds());
}

// The min clock and, per worker rank, its clock and its pulls' bound wait.
void WriteClocks(const ShardMetricsSnapshot& snap, const PrometheusLabels& base, ExpositionWriter* out) {
  ExpositionWriter& w = *out;
  const ShardStats& s = snap.stats;
  auto with_rank = [&](size_t r) {
    PrometheusLabels l = base;
    l.emplace_back("worker_rank", std::to_string(r));
    return l;
  };
  w.Gauge("tether_server_min_clock",
          "Smallest clock over the workers still training, as this shard sees them (the last value once all "
          "finished).",
          base, static_cast<double>(snap.min_clock));
  w.Family("tether_server_worker_clock", T::kGauge, "Clock of each worker as this shard last heard it.");
  for (size_t r = 0; r < snap.worker_clocks.size(); ++r)
    w.Sample("tether_server_worker_clock", with_rank(r), static_cast<double>(snap.worker_clocks[r]));
  w.Family("tether_server_bound_wait_seconds_total", T::kCounter,
           "Seconds each worker's pulls waited on the staleness bound at this shard (pulls of one minibatch "
           "waiting side by side count once).");
  for (int r = 0; r < s.bound_wait_seconds_size(); ++r)
    w.Sample("tether_server_bound_wait_seconds_total", with_rank(r), s.bound_wait_seconds(r));
}

// The staleness histogram of applied pushes.
void WriteStaleness(const ShardStats& s, const PrometheusLabels& base, ExpositionWriter* out) {
  ExpositionWriter& w = *out;
  // Cumulative counts of τ ≤ b from the shard's exact per-τ buckets.
  const std::vector<double>& bounds = StalenessBounds();
  std::vector<uint64_t> cumulative(bounds.size(), 0);
  uint64_t running = 0;
  size_t next = 0;
  for (int tau = 0; tau < StalenessHistogram::kBuckets - 1 && next < bounds.size(); ++tau) {
    if (tau < s.staleness_histogram_size()) running += s.staleness_histogram(tau);
    while (next < bounds.size() && bounds[next] == tau) cumulative[next++] = running;
  }
  w.Family("tether_server_push_staleness", T::kHistogram,
           "Staleness tau of applied pushes: updates to the table between the version a gradient was computed "
           "from and its application (Zhang et al., IJCAI 2016).");
  w.Histogram("tether_server_push_staleness", base, bounds, cumulative, static_cast<double>(s.staleness_sum()),
              s.pushes());
}

// Per table (row tables; a dense table's rows are 0): the shard's rows and
// the budget's counters (server/table.h).
void WritePerTable(const ShardMetricsSnapshot& snap, const PrometheusLabels& base, ExpositionWriter* out) {
  ExpositionWriter& w = *out;
  const ShardStats& s = snap.stats;
  struct PerTable {
    const char* name;
    T type;
    const google::protobuf::RepeatedField<uint64_t>& values;
    const char* help;
  };
  const PerTable per_table[] = {
      {"tether_server_table_rows", T::kGauge, s.table_rows(), "Rows this shard holds of each table (0: dense)."},
      {"tether_server_rows_admitted_total", T::kCounter, s.rows_admitted(),
       "Rows created (first touches admitted; restored rows not counted)."},
      {"tether_server_rows_evicted_total", T::kCounter, s.rows_evicted(), "Rows evicted by the table's budget."},
      {"tether_server_rows_not_admitted_total", T::kCounter, s.rows_not_admitted(),
       "Rows of pushed gradients dropped because their key was not admitted."},
      {"tether_server_resident_bytes", T::kGauge, s.resident_bytes(),
       "Bytes each table holds: rows with optimizer state, index, eviction metadata, admission sketch."},
  };
  for (const PerTable& p : per_table) {
    w.Family(p.name, p.type, p.help);
    for (int t = 0; t < p.values.size(); ++t) {
      PrometheusLabels l = base;
      l.emplace_back("table", static_cast<size_t>(t) < snap.table_names.size() ? snap.table_names[t]
                                                                                 : std::to_string(t));
      w.Sample(p.name, l, static_cast<double>(p.values.Get(t)));
    }
  }
}

}  // namespace

std::string RenderShardMetrics(const ShardMetricsSnapshot& snap, const std::string& job, int shard) {
  const PrometheusLabels base = {{"tether_job", job}, {"role", "server"}, {"shard", std::to_string(shard)}};
  const ShardStats& s = snap.stats;
  ExpositionWriter w;
  w.ProcessInfo(base, snap.running);
  WriteCounters(s, base, &w);
  WriteClocks(snap, base, &w);
  WriteStaleness(s, base, &w);
  WritePerTable(snap, base, &w);
  w.Gauge("tether_server_memory_budget_bytes",
          "Bytes this shard may spend on the job's tables and optimizer state (cluster.server_memory_bytes; 0: "
          "no budget).",
          base, static_cast<double>(snap.memory_budget_bytes));
  w.Gauge("tether_server_push_staleness_max", "Largest staleness tau applied so far.", base,
          static_cast<double>(s.staleness_max()));
  return w.text();
}

}  // namespace tether
