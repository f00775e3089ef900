// The /metrics page of one worker (tether-worker --metrics_port;
// docs/OPERATIONS.md, "Prometheus").
//
// Thread-safety: the training thread publishes a WorkerMetricsSnapshot
// (a copy of its WorkerProgress, TrainerOptions::on_progress) after every
// clock and epoch and once at the end; a scrape copies the latest under
// one mutex (PublishedSnapshot, telemetry/prometheus.h) and renders it on the
// HTTP thread. Values are as of the worker's last clock.
#pragma once

#include <string>
#include <vector>

#include "worker/trainer.h"

namespace tether {

struct WorkerMetricsSnapshot {
  bool running = false;  // training (false before the first clock and once done)
  WorkerProgress progress;
  /// The job's table names in table order, for the per-table byte counters'
  /// `table` label (a table without a name here is labelled by its id).
  std::vector<std::string> tables;
};

/// The Prometheus text of `snap` for worker `rank` of job `job` (labels
/// tether_job, role="worker", rank on every sample).
std::string RenderWorkerMetrics(const WorkerMetricsSnapshot& snap, const std::string& job, int rank);

}  // namespace tether
