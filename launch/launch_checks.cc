#include "launch/launch_checks.h"

#include "launch/job_plan.h"
#include "worker/train/resume_check.h"

namespace tether {

StatusOr<LaunchOptions> CheckLaunch(const LaunchRequest& request, const JobConfig& config,
                                    const std::string& bin_dir, const std::optional<EngineTask>& task) {
  TETHER_RETURN_IF_ERROR(CheckOutputPaths(request, config));
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

}  // namespace tether
