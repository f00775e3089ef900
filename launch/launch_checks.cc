#include "launch/launch_checks.h"

#include "checkpoint/checkpoint.h"
#include "launch/job_plan.h"
#include "launch/temp_dir.h"
#include "worker/train/resume_check.h"

namespace tether {

StatusOr<LaunchOptions> CheckLaunch(const LaunchRequest& request, const JobConfig& config,
                                    const std::string& bin_dir, const std::optional<EngineTask>& task) {
  TETHER_RETURN_IF_ERROR(CheckOutputPaths(request, config));
  // The launcher of a whole job makes its folder there (launch/temp_dir.h).
  if (!task) TETHER_RETURN_IF_ERROR(CheckLaunchTempParent());
  TETHER_RETURN_IF_ERROR(CheckResumeConfig(config, request.resume_from));
  TETHER_ASSIGN_OR_RETURN(LaunchOptions options, PlanLaunch(request, config, bin_dir));
  TETHER_RETURN_IF_ERROR(CheckRendezvousServe(request, config));
  // A task of srun/mpirun is one of the tasks the scheduler started; a
  // launched job is its servers and workers.
  const int processes = task ? task->ntasks : options.num_servers + options.num_workers;
  TETHER_RETURN_IF_ERROR(CheckMetricsFlags(request, processes));
  if (task) TETHER_RETURN_IF_ERROR(CheckEngineTask(*task, config, EngineOptionsFor(request)));
  return options;
}

Status CheckResumeFiles(const LaunchRequest& request) {
  if (request.resume_from.empty()) return Status::OK();
  return VerifyResumeCheckpoint(request.resume_from).WithPrefix("--resume_from=" + request.resume_from);
}

}  // namespace tether
