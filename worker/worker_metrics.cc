#include "worker/worker_metrics.h"

#include <algorithm>

#include "telemetry/prometheus.h"

namespace tether {

namespace {

// Bytes on the wire per table and direction (worker/client/wire_bytes.h):
// as sent, and their values in float32 (the ratio of the two sums is the
// compression ratio).
void AddWireCounters(const WorkerMetricsSnapshot& snap, const PrometheusLabels& base, ExpositionWriter* w) {
  const std::vector<TableWireBytes>& wire = snap.progress.client.wire;
  for (const bool fp32 : {false, true}) {
    const std::string name = fp32 ? "tether_worker_table_wire_fp32_bytes_total" : "tether_worker_table_wire_bytes_total";
    w->Family(name, ExpositionWriter::Type::kCounter,
              fp32 ? "The same frames' bytes had their values been float32 (over wire_bytes: the compression ratio)."
                   : "Bytes of keys and values frames of one table's pulls and pushes, by direction.");
    for (size_t t = 0; t < wire.size(); ++t) {
      for (const bool sent : {true, false}) {
        PrometheusLabels labels = base;
        labels.emplace_back("table", t < snap.tables.size() ? snap.tables[t] : std::to_string(t));
        labels.emplace_back("direction", sent ? "sent" : "received");
        const DirectionBytes& d = sent ? wire[t].sent : wire[t].received;
        w->Sample(name, labels, static_cast<double>(fp32 ? d.bytes - d.value_bytes + d.fp32_value_bytes : d.bytes));
      }
    }
  }
  // Values a 16-bit wire clamped to its largest finite value: in this
  // worker's pushes (sent) and in the replies the shards narrowed (received).
  const ClientStats& c = snap.progress.client;
  const char* saturated = "tether_worker_wire_saturated_total";
  w->Family(saturated, ExpositionWriter::Type::kCounter,
            "Values a 16-bit wire encoding saturated to its largest finite value (FP16: beyond 65504), in "
            "pushes sent and in pull and push replies received.");
  for (const bool sent : {true, false}) {
    PrometheusLabels labels = base;
    labels.emplace_back("direction", sent ? "sent" : "received");
    w->Sample(saturated, labels, static_cast<double>(sent ? c.push_values_saturated : c.reply_values_saturated));
  }
}

}  // namespace

std::string RenderWorkerMetrics(const WorkerMetricsSnapshot& snap, const std::string& job, int rank) {
  const PrometheusLabels base = {{"tether_job", job}, {"role", "worker"}, {"rank", std::to_string(rank)}};
  const WorkerProgress& p = snap.progress;
  const ClientStats& c = p.client;
  ExpositionWriter w;
  w.ProcessInfo(base, snap.running);
  struct Counter {
    const char* name;
    double value;
    const char* help;
  };
  const Counter counters[] = {
      {"tether_worker_pulls_total", static_cast<double>(c.pulls), "PULL messages sent (one per shard touched)."},
      {"tether_worker_pushes_total", static_cast<double>(c.pushes), "PUSH messages sent."},
      {"tether_worker_rows_pulled_total", static_cast<double>(c.rows_pulled), "Rows asked for in PULL requests."},
      {"tether_worker_rows_pushed_total", static_cast<double>(c.rows_pushed), "Rows of gradients sent."},
      {"tether_worker_rows_read_total", static_cast<double>(c.rows_read),
       "Rows handed to the model, cache hits included."},
      {"tether_worker_cache_hits_total", static_cast<double>(c.cache_hits),
       "Rows read from the worker's parameter cache."},
      {"tether_worker_cache_evictions_total", static_cast<double>(c.cache_evictions),
       "Rows or dense slices the parameter cache evicted to stay within its capacity."},
      {"tether_worker_sent_bytes_total", static_cast<double>(c.bytes_sent), "Bytes of keys and values frames sent."},
      {"tether_worker_received_bytes_total", static_cast<double>(c.bytes_received),
       "Bytes of keys and values frames received in replies."},
      {"tether_worker_updates_sent_total", static_cast<double>(c.updates_sent),
       "Updates handed to a socket (rows of pushes, a dense slice counting 1)."},
      {"tether_worker_updates_failed_total", static_cast<double>(c.updates_failed),
       "Updates that could not be sent or were refused by a server."},
      {"tether_worker_send_waits_total", static_cast<double>(c.send_waits),
       "Sends that waited for room in the in-flight window (back-pressure)."},
      {"tether_worker_key_lists_defined_total", static_cast<double>(c.key_lists_defined),
       "Requests that sent their keys and a key list id for the shard to keep."},
      {"tether_worker_key_lists_used_total", static_cast<double>(c.key_lists_used),
       "Requests that named a key list instead of sending its keys."},
      {"tether_worker_key_lists_resent_total", static_cast<double>(c.key_lists_resent),
       "Requests sent again with their keys because the shard no longer held their key list."},
      {"tether_worker_key_lists_saved_bytes_total", static_cast<double>(c.key_list_bytes_saved),
       "Bytes of keys frames not sent thanks to key lists."},
      {"tether_worker_wait_seconds_total", c.wait_seconds,
       "Seconds blocked waiting for server replies, waits on the staleness bound included (the bound's share "
       "alone: tether_server_bound_wait_seconds_total)."},
      {"tether_worker_pull_wait_seconds_total", p.pull_wait_seconds,
       "Seconds the model spent in Pull, waiting for parameters (staleness-bound waits included)."},
      {"tether_worker_train_seconds_total", p.train_seconds,
       "Seconds of training in this run, evaluations left out."},
      {"tether_worker_samples_total", static_cast<double>(p.samples),
       "Rows trained on, all epochs (with those before a resume)."},
      {"tether_worker_minibatches_total", static_cast<double>(p.minibatches),
       "Minibatches trained (with those before a resume)."},
  };
  for (const Counter& k : counters) w.Counter(k.name, k.help, base, k.value);
  AddWireCounters(snap, base, &w);
  w.Gauge("tether_worker_clock", "Clocks this worker completed.", base, static_cast<double>(p.clock));
  w.Gauge("tether_worker_cache_bytes", "Bytes the parameter cache holds now (values and per-entry bookkeeping).",
          base, static_cast<double>(c.cache_bytes));
  w.Gauge("tether_worker_cache_peak_bytes", "The most bytes the parameter cache held at once.", base,
          static_cast<double>(c.cache_peak_bytes));
  w.Gauge("tether_worker_cache_capacity_bytes", "The parameter cache's capacity in bytes (0: unbounded).", base,
          static_cast<double>(c.cache_capacity_bytes));
  w.Gauge("tether_worker_cache_hit_ratio", "Rows read from the parameter cache over rows read (0 before any read).",
          base, c.rows_read > 0 ? static_cast<double>(c.cache_hits) / c.rows_read : 0.0);
  w.Gauge("tether_worker_epoch", "The epoch in progress, 1-based (train.epochs once done).", base, p.epoch);
  w.Gauge("tether_worker_minibatch_loss",
          "Mean minibatch training loss over the last clock's minibatches (NaN before the first clock).", base,
          p.clock_loss);
  w.Gauge("tether_worker_epoch_loss",
          "Mean minibatch training loss over the last finished epoch (NaN before the first).", base, p.epoch_loss);
  w.Gauge("tether_worker_samples_per_second",
          "Rows trained per second of this run's training time, averaged since it started.", base,
          p.train_seconds > 0 ? static_cast<double>(p.run_samples) / p.train_seconds : 0.0);
  return w.text();
}

}  // namespace tether
