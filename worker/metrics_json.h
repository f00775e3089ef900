// The metrics JSON of a finished job (`--metrics_out`, written by rank 0):
// the test metrics and the run's figures from its TrainReport, and the
// counters every shard returned in STATS_REPLY (ShardStats, each with the
// WorkerStats the workers sent at BARRIER) merged into the job-wide view.
//
// The keys and JSON types are a contract with users' scripts
// (tools/plot_metrics.py, tools/staleness_sweep.py, tests/integration/):
// counters are JSON integers, times and fractions JSON floats (written with
// a fraction, 0.0 not 0), a NaN test metric is null. tests/data/
// metrics_schema/ holds the key/type tree, and integration.metrics_schema
// checks real jobs against it. The stats messages' field names are the keys
// (proto/stats.proto), a nested message's fields flattened under
// "<field>_<name>" (WorkerStats.key_lists.used → "key_lists_used");
// protobuf's own JSON printer is not used because it writes 64-bit integers
// as strings, names in camelCase and 0.0 as 0.
//
// Pure functions of their arguments; thread-safe.
#pragma once

#include <nlohmann/json.hpp>

#include "proto/config.pb.h"
#include "worker/trainer.h"

namespace tether {

/// The metrics JSON object of a finished job, keys in alphabetical order:
///  - report.test_metrics by name (NaN or infinite → null);
///  - train_seconds, total_samples, test_rows, final_loss (null when not
///    finite or not known), final_loss_from ("training", "checkpoint" or
///    "none": TrainReport::final_loss_from), pull_wait_fraction_rank0 from
///    `report`, samples_per_second from
///    JobSamplesPerSecond(report); num_workers,
///    num_servers, staleness (-1 = ASP), epochs, seed from `config`;
///  - when report.servers holds the shards' stats (in shard order):
///    "servers": per shard every ShardStats counter but `workers`,
///    `staleness_sum` and `send_failures`, plus staleness_mean
///    (staleness_sum / pushes, 0.0 without pushes);
///    "workers": per rank the WorkerStats of shard 0 but its two wall-clock
///    stamps (train_start_unix_s, train_end_unix_s: the schema predates them,
///    and samples_per_second carries what they are for; an empty object for
///    a rank that never reached the barrier) plus bound_wait_seconds, the
///    largest of that rank's bound_wait_seconds over the shards (a
///    minibatch's pulls wait on the shards side by side), and
///    bound_wait_fraction = min(1, bound_wait_seconds / train_seconds), 0.0
///    when train_seconds is 0;
///    "staleness_histogram" (the shards' histograms added bucket by bucket,
///    as long as the longest), "staleness_mean" (Σ staleness_sum / Σ pushes),
///    "staleness_max", "bound_violations" (summed) over all shards;
///    "chunks_redealt", "rows_redealt" and the key-list counters
///    "key_lists_defined", "key_lists_used", "key_lists_unknown",
///    "key_lists_bytes_saved", summed over the shards.
nlohmann::json MetricsJson(const TrainReport& report, const JobConfig& config);

/// The job's training throughput in samples per second: report.total_samples
/// over the span from the earliest train_start_unix_s to the latest
/// train_end_unix_s among the WorkerStats of report.servers[0] (wall-clock
/// seconds, so it stays right however many workers start and end at
/// different times). Falls back to report.samples_per_second (rank 0's own
/// span) when there are no server stats, a rank never reached the barrier,
/// a worker sent no timestamps (an older worker), or the span is not
/// positive. No errors.
double JobSamplesPerSecond(const TrainReport& report);

}  // namespace tether
