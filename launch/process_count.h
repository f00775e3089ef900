// How many processes one tether-launch may start on its host: the job's
// servers and workers (and the workers an elastic schedule adds), or, with
// --transport=inproc, as many threads in one process. A count past
// kMaxLaunchProcesses, or past the user's process limit (RLIMIT_NPROC,
// ulimit -u), is refused before anything starts, rather than found out
// fork by fork.
//
// Ownership: plain values. Thread-safety: pure but for CurrentProcessLimit
// (getrlimit).
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"

namespace tether {

/// The most server and worker processes one tether-launch starts on its
/// host. Larger jobs span hosts: each host's tasks started by srun or
/// mpirun (engine mode), or by hand (docs/DEPLOY.md).
inline constexpr int kMaxLaunchProcesses = 1024;

/// RLIMIT_NPROC's soft limit, or UINT64_MAX when unlimited (or unreadable).
uint64_t CurrentProcessLimit();

/// `servers` + `workers` (+ `joiners`, the workers an elastic schedule
/// starts later) against kMaxLaunchProcesses and `nproc_limit` (each
/// process is one of the user's RLIMIT_NPROC tasks at least; its threads
/// count too). `transport` "inproc" runs them as threads of one process,
/// checked alike. Errors: InvalidArgument naming the counts, the limit and
/// the way out.
Status CheckLaunchProcessCount(int servers, int workers, int joiners, const std::string& transport,
                               uint64_t nproc_limit);

}  // namespace tether
