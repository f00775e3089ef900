// Engine mode of tether-launch: under `srun -n N tether-launch ...` or
// `mpirun -np N tether-launch ...` every task runs tether-launch; each takes
// its place from the scheduler's environment (no MPI library: only the
// variables srun and Open MPI set) and becomes its role by exec'ing
// tether-server (task i < num_servers: shard i) or tether-worker (the
// others: rank i - num_servers) from the launcher's directory. The
// processes find each other through the rendezvous (core/net/rendezvous.h).
// Exec, not a child: the scheduler's task IS the role, so its exit code is
// the task's, a SIGTERM from srun/mpirun reaches it directly, and nothing
// is left behind when the step is killed.
//
// Ownership: returns values; RunEngineTask replaces this process (exec).
// Thread-safety: reads the process environment; call from main() before
// any thread starts.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "proto/config.pb.h"

namespace tether {

/// This process's place in the scheduler's job.
struct EngineTask {
  std::string scheduler;   // "SLURM" or "Open MPI"
  std::string rank_var;    // the variable the rank came from
  int rank = 0;            // task index in [0, ntasks)
  int ntasks = 0;
  std::string job_id;      // "" when the scheduler gives none
  uint64_t generation = 0;  // SLURM_RESTART_COUNT (a requeued job)
  /// When another launcher's variables are set too: which were used and
  /// which ignored, for the task's start-up line ("" otherwise).
  std::string chosen_over;
};

/// The task's place, or nullopt when this process is not a task of srun (a
/// step: SLURM_STEP_ID; SLURM's special steps such as the batch script are
/// not) or of mpirun (OMPI_COMM_WORLD_RANK). When both are set (mpirun run
/// inside a SLURM allocation, or SLURM variables leaked into mpirun's
/// environment), Open MPI's are used: mpirun started this process, and
/// SLURM's then describe the allocation or the step of mpirun's own
/// daemons, not this rank. `chosen_over` names both sets. Errors:
/// InvalidArgument naming a variable that is not a non-negative integer.
StatusOr<std::optional<EngineTask>> DetectEngineTask();

/// What the task's role is started with, from tether-launch's command line.
struct EngineOptions {
  std::string config_path;        // --config
  std::string num_workers_flag;   // --num_workers as given ("" = unset)
  std::vector<std::string> overrides;  // the config override flags set, "--name=value"
  std::string listen;             // --listen (servers)
  std::string advertise_host;     // --advertise_host (servers)
  bool rendezvous_serve = false;  // task 0 serves the rendezvous store
  std::string metrics_out;        // worker 0 writes the metrics JSON here
  std::string resume_from;
  int metrics_port = -1;          // -1: none; 0: a free port each; else BASE + task rank
  std::string metrics_host;
  int metrics_linger_s = 0;
  std::string metrics_sd_dir;     // "" = no file_sd target files
};

/// The task's place in the job checked, as EngineRoleCommand checks it,
/// without its effects (no file removed or folder made): for
/// tether-launch --check_config. Errors: InvalidArgument (no worker,
/// --num_workers contradicting the tasks, no job id, --rendezvous_serve
/// without tcp://), prefixed with the task's place ("SLURM task 3 of 8
/// (SLURM_PROCID): ...").
Status CheckEngineTask(const EngineTask& task, const JobConfig& config, const EngineOptions& options);

/// The role's command line, BIN_DIR/tether-server or tether-worker first,
/// per `task` and `config` (validated). Removes an old metrics file (worker
/// 0) and makes --metrics_sd_dir. Errors: InvalidArgument for a task count
/// or flag that cannot work (no worker, --num_workers contradicting the
/// tasks, no job id, --rendezvous_serve without tcp://, --metrics_sd_dir
/// without --metrics_port or not creatable); IOError when the old metrics
/// file cannot be removed (with errno's text, as PLOG writes it).
StatusOr<std::vector<std::string>> EngineRoleCommand(const EngineTask& task, const JobConfig& config,
                                                     const EngineOptions& options, const std::string& bin_dir);

/// Runs this task's role: logs where it is and execs the command; returns
/// only on an error, with the exit code (2: a bad task count or flag; 1:
/// the metrics file, the parent gone, or exec failed), logged with the
/// task's place ("[launch] SLURM task 3 of 8 (SLURM_PROCID): ...").
int RunEngineTask(const EngineTask& task, const JobConfig& config, const EngineOptions& options,
                  const std::string& bin_dir);

}  // namespace tether
