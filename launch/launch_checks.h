// Every check tether-launch makes before it starts anything, in one place:
// the launcher of a whole job runs it before it starts a process, and
// --check_config runs the same, also as a task of srun/mpirun (engine
// mode), so that the check says what a launch would. A check has no
// effects: output folders are found creatable (the nearest part of each
// path that exists is a writable directory), never made; nothing is
// removed or logged.
//
// Ownership: borrows its arguments. Thread-safety: reads the file system
// only; safe from any thread.
#pragma once

#include <optional>
#include <string>

#include "core/status.h"
#include "launch/engine_task.h"
#include "launch/launch_request.h"
#include "launch/launcher.h"
#include "proto/config.pb.h"

namespace tether {

/// `request` against `config` (loaded, validated): the output paths
/// (CheckOutputPaths), without `task` the parent of the launcher's
/// temporary folder (CheckLaunchTempParent, naming TMPDIR), a resume the
/// config cannot make (CheckResumeConfig), the plan (PlanLaunch; the caller names the flag that set a field with
/// NameConfigFieldSource, cli/config_flags.h),
/// --rendezvous_serve, the metrics flags (CheckMetricsFlags, over every
/// process of the job), and with `task` (engine mode) the task's place in
/// the job (CheckEngineTask). Returns the plan of a launched job. Errors:
/// InvalidArgument or FailedPrecondition naming the flag, field or path and
/// why (the caller exits 2).
StatusOr<LaunchOptions> CheckLaunch(const LaunchRequest& request, const JobConfig& config,
                                    const std::string& bin_dir, const std::optional<EngineTask>& task);

/// --check_config of a whole job, once CheckLaunch passed: the checkpoint
/// --resume_from names, read whole (VerifyResumeCheckpoint: its MANIFEST
/// and every file it lists). A launch leaves that to its processes, which
/// read every file anyway (a second read of a large checkpoint would double
/// the launch's I/O); each task of srun/mpirun would read it again. OK
/// without --resume_from. Errors: NotFound or DataLoss "--resume_from=R:
/// FILE: ...; checkpoint DIR is damaged or incomplete; resume from an older
/// one with ..." (the caller exits 2).
Status CheckResumeFiles(const LaunchRequest& request);

}  // namespace tether
