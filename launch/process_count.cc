#include "launch/process_count.h"

#include <sys/resource.h>

#include <cstdint>

namespace tether {

uint64_t CurrentProcessLimit() {
  struct rlimit r {};
  if (getrlimit(RLIMIT_NPROC, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return UINT64_MAX;
  return static_cast<uint64_t>(r.rlim_cur);
}

Status CheckLaunchProcessCount(int servers, int workers, int joiners, const std::string& transport,
                               uint64_t nproc_limit) {
  const int64_t total = int64_t{servers} + workers + joiners;
  const bool threads = transport == "inproc";
  const std::string what = std::to_string(servers) + " server(s) and " + std::to_string(workers) + " worker(s)" +
                           (joiners > 0 ? " and " + std::to_string(joiners) + " joining worker(s)" : "") +
                           (threads ? " as threads of one process" : "") + ": " + std::to_string(total) +
                           (threads ? " threads" : " processes") + " on this host";
  if (total > kMaxLaunchProcesses)
    return Status::InvalidArgument(
        "tether-launch would start " + what + ", above the " + std::to_string(kMaxLaunchProcesses) +
        " one launcher starts; run a larger job's processes on several hosts (srun or mpirun with tether-launch in "
        "engine mode, or tether-server and tether-worker by hand: docs/DEPLOY.md), or give fewer --workers");
  if (static_cast<uint64_t>(total) > nproc_limit)
    return Status::InvalidArgument("tether-launch would start " + what + ", above the process limit RLIMIT_NPROC "
                                   "(ulimit -u) of " + std::to_string(nproc_limit) +
                                   ", which the user's every process and thread counts against; raise it, or give "
                                   "fewer --workers");
  return Status::OK();
}

}  // namespace tether
