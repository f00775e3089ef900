// From a LaunchRequest and the job's config to the LaunchOptions of a job
// launched on this machine (launch/launcher.h), with every check that can
// refuse the job before a single process starts: checkpoint paths, the
// elastic schedule, --model_out, --max_restarts, a checkpoint.dir that
// already holds checkpoints, the /metrics layout. Also the rendezvous store
// a launcher may serve for the whole job (--rendezvous_serve).
//
// Ownership: the caller owns the options and the store returned (keep the
// store alive while the job runs).
// Thread-safety: no shared state; StartRendezvousStore starts the store's
// thread with every signal blocked, so it never takes the launcher's.
#pragma once

#include <memory>
#include <string>

#include "core/net/rendezvous.h"
#include "core/status.h"
#include "launch/launch_request.h"
#include "launch/launcher.h"
#include "proto/config.pb.h"

namespace tether {

/// The options of a launched job: counts, the flags forwarded to every
/// child (--num_servers, --num_workers, the overrides, a job id of this
/// launch's own when the config has none), the elastic steps, timeouts.
/// `config` is validated; `bin_dir` holds the binaries. Logs a WARNING for
/// an elastic step past train.epochs. Errors: InvalidArgument, the message
/// saying which flag or field and why (the caller exits 2).
StatusOr<LaunchOptions> PlanLaunch(const LaunchRequest& request, const JobConfig& config, const std::string& bin_dir);

/// --rendezvous_serve needs a tcp:// --rendezvous. Errors: InvalidArgument.
Status CheckRendezvousServe(const LaunchRequest& request, const JobConfig& config);

/// With --rendezvous_serve: the store at cluster.rendezvous, for the whole
/// job (with security.curve: the servers' key pair, admitting the servers'
/// and workers' keys only); null without it. Errors: the store's and the
/// keys' (the caller exits 1).
StatusOr<std::unique_ptr<RendezvousStore>> StartRendezvousStore(const LaunchRequest& request, const JobConfig& config);

/// The /metrics layout of the children into *options: ports from
/// --metrics_port, the flags forwarded, the file_sd folder (made here).
/// Logs the layout. Errors: InvalidArgument (a per-process flag, ports past
/// 65535, inproc, a negative linger, --metrics_sd_dir without
/// --metrics_port or not creatable).
Status PlanMetrics(const LaunchRequest& request, const JobConfig& config, LaunchOptions* options);

/// PlanMetrics' refusals without its effects (no folder made, nothing
/// logged), for --check_config: `processes` servers and workers in all.
/// --metrics_sd_dir must be creatable: the nearest part of its path that
/// exists a writable directory (CheckWritableDir). Errors: as PlanMetrics.
Status CheckMetricsFlags(const LaunchRequest& request, int processes);

}  // namespace tether
