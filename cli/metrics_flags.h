// The /metrics flags of tether-server and tether-worker, and what main()
// does with them (docs/OPERATIONS.md, "Prometheus"):
//   --metrics_port=N        serve /metrics on port N; 0: a free port; -1 (default): no endpoint
//   --metrics_host=H        address to bind (default 127.0.0.1: this host only)
//   --metrics_port_file=F   write "HOST:PORT" (the bound port) here once serving
//   --metrics_sd_file=F     write a Prometheus file_sd target file for this process here
//                           (the output policy of core/output_target.h: telemetry/sd_file.h)
//   --metrics_linger_s=S    after training, keep serving the final values S seconds (default 15)
// tether-launch links this file too, for the flag definitions it forwards.
// Only main() files include this (gflags).
//
// Ownership: the caller owns the endpoint StartMetricsEndpointFromFlags
// returns. Thread-safety: call from main() (the flags are process-global);
// the endpoint's render callback runs on its own threads.
#pragma once

#include <gflags/gflags.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "core/output_target.h"
#include "telemetry/metrics_endpoint.h"
#include "telemetry/prometheus.h"
#include "core/status.h"

DECLARE_int32(metrics_port);
DECLARE_string(metrics_host);
DECLARE_string(metrics_port_file);
DECLARE_string(metrics_sd_file);
DECLARE_int32(metrics_linger_s);

namespace tether {

/// The labels a process's target carries in --metrics_sd_file (and its
/// /metrics samples): tether_job, role, and shard or rank.
struct MetricsTarget {
  std::string job;
  std::string role;        // "server" or "worker"
  std::string index_name;  // "shard" or "rank"
  int index = 0;
};

/// Checks the flags, and starts the endpoint they ask for (null when
/// --metrics_port is -1), logs its URL, and writes --metrics_port_file /
/// --metrics_sd_file. --metrics_sd_file is checked before the endpoint
/// binds (telemetry/sd_file.h): a link is followed, a directory, socket,
/// device or FIFO refused, and so is one of `inputs` (core/job_inputs.h).
/// `render` runs on the endpoint's threads (MetricsEndpoint::Start).
/// Errors: InvalidArgument (a bad flag value or --metrics_sd_file path,
/// naming it), the endpoint's (IOError naming host:port), IOError writing
/// a file.
StatusOr<std::unique_ptr<MetricsEndpoint>> StartMetricsEndpointFromFlags(const std::string& who,
                                                                         const MetricsTarget& target,
                                                                         MetricsEndpoint::Render render,
                                                                         const std::vector<NamedInput>& inputs);

/// After training ended: keeps `endpoint` serving for --metrics_linger_s
/// seconds, so a scrape does not miss a short job's final values, returning
/// early once `signal` is non-zero (a stop signal cuts the wait short; the
/// caller then exits with the job's own exit code). Does nothing when
/// `endpoint` is null.
void LingerForScrapes(const std::string& who, const MetricsEndpoint* endpoint, const std::atomic<int>& signal);

/// Withdraws --metrics_sd_file (telemetry/sd_file.h: removed; through a
/// link, the target emptied to []) when destroyed, so Prometheus stops
/// scraping the gone process whichever way it ends: after the linger, on a
/// stop signal, or on an error after the endpoint started. Holds nothing
/// when `endpoint` is null or the flag is unset. A failed withdrawal is
/// logged as a warning naming the path. Not copyable; one per process,
/// on the main thread.
class MetricsTargetWithdrawal {
 public:
  MetricsTargetWithdrawal(std::string who, const MetricsEndpoint* endpoint);
  ~MetricsTargetWithdrawal();
  MetricsTargetWithdrawal(const MetricsTargetWithdrawal&) = delete;
  MetricsTargetWithdrawal& operator=(const MetricsTargetWithdrawal&) = delete;

 private:
  std::string who_;
  std::string path_;  // empty: nothing to withdraw
};

}  // namespace tether
