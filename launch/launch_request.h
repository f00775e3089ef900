// What tether-launch was asked to do: its command line as plain values
// (launch_main.cc maps the flags in; no gflags here), and the first
// decisions taken on it before any process starts: the flags' own ranges,
// --resume_if_present, and whether this process is one task of srun/mpirun
// (engine mode, launch/engine_task.h) or the launcher of a whole job
// (launch/job_plan.h).
//
// Ownership: plain values; the functions borrow them.
// Thread-safety: no shared state (DetectEngineTask reads the environment).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/file_lock.h"
#include "core/status.h"
#include "launch/engine_task.h"
#include "proto/config.pb.h"

namespace tether {

struct LaunchRequest {
  std::string config_path;            // --config
  std::string flagfile;               // --flagfile as given; "" = none
  std::vector<std::string> overrides;  // the config override flags set, "--name=value", in the table's order
  std::string num_workers_flag;        // --num_workers as given (or set by --workers); "" = unset
  std::string transport = "tcp";       // tcp | ipc | inproc
  int timeout_s = 1800;
  std::string metrics_out;
  bool print_metrics = false;  // --print_metrics
  std::string model_out;
  std::string resume_from;
  bool resume_if_present = false;
  std::string elastic_schedule;
  int max_restarts = 0;
  int max_replacements = -1;  // --max_replacements; -1: 2 × the server processes
  bool max_replacements_set = false;  // --max_replacements given (refused without cluster.replicas)
  // Engine mode.
  std::string engine = "auto";  // auto | on | off
  std::string listen;
  std::string advertise_host;
  bool rendezvous_serve = false;
  // The flags that do not apply in engine mode and were given, in the order
  // --transport, --max_restarts, --model_out, --timeout_s, --elastic_schedule.
  std::vector<std::string> not_for_engine;
  // /metrics.
  int metrics_port = -1;
  std::string metrics_host;
  int metrics_linger_s = 15;
  std::string metrics_sd_dir;
  bool metrics_port_file_set = false;  // --metrics_port_file was given (one process's file)
  bool metrics_sd_file_set = false;    // --metrics_sd_file was given
};

/// --servers and --workers (≥ 0; 0: the config's), --transport and
/// --timeout_s. Errors: InvalidArgument naming the flag and what it takes.
Status CheckLaunchCommandLine(int servers, int workers, const std::string& transport, int timeout_s);

/// --servers or --workers given on the command line (`given`) with `value`
/// 0: refused, since a job needs at least one of each; left out, the
/// config's count holds. Errors: InvalidArgument naming the flag and the fix.
Status CheckCountGiven(const std::string& flag, int value, bool given);

/// The paths a launched job writes, checked before any process starts:
/// --model_out and --metrics_out can be written (their folders exist and
/// take files; core/output_target.h: a link's target is written, a
/// directory or socket refused, and --metrics_out may be a character device
/// or FIFO, written through), neither is one of the job's inputs (the
/// config, the flag file, the data files: core/job_inputs.h), an existing
/// --metrics_out is an earlier run's metrics JSON (launch/old_metrics.h),
/// train.metrics_dir can be made, and it holds no earlier
/// run's JSON-lines files (CheckMetricsDirFresh) nor a live launch's lock
/// (LockMetricsDir), and checkpoint.dir can be made (CheckCheckpointDir).
/// Not for engine mode, whose tasks start apart.
/// Errors: InvalidArgument naming the flag or field, the path and the fix;
/// FailedPrecondition "train.metrics_dir (--metrics_dir)=DIR: in use by a
/// live job (pid P on host H, holding DIR/LOCK): ..." (LockMetricsDir), or
/// "flag --metrics_out=PATH: in use by a live job ..." (LockMetricsOut).
Status CheckOutputPaths(const LaunchRequest& request, const JobConfig& config);

/// Holds train.metrics_dir for this launch's life (nothing held when the
/// config has none): creates the folder and takes DIR/LOCK
/// (core/file_lock.h), then checks again that it holds no earlier run, so
/// that of two launches started at once into one folder the second is
/// refused before it starts a process, however close their checks were.
/// Each process of the job still locks its own file there
/// (telemetry/metrics_log.h). Errors: FailedPrecondition "...: in use by a
/// live job ..." as CheckOutputPaths; InvalidArgument from
/// CheckMetricsDirFresh; IOError naming a folder that cannot be made.
StatusOr<FileLock> LockMetricsDir(const JobConfig& config);

/// Holds --metrics_out for this launch's life: takes TARGET.lock next to
/// the file the job writes (a link's final target), so that of two launches
/// given one --metrics_out the second is refused before it removes or
/// writes anything, and no launch reports metrics another run wrote.
/// Nothing is held for no --metrics_out, or a device or pipe written
/// through. Errors: FailedPrecondition "flag --metrics_out=PATH: in use by a
/// live job (pid P on host H, holding TARGET.lock): another launch writes
/// its metrics there; ..."; IOError naming the lock file.
StatusOr<FileLock> LockMetricsOut(const LaunchRequest& request);

/// --resume_if_present: sets request->resume_from to the latest complete
/// checkpoint under checkpoint.dir when there is one (logged either way).
/// Errors: InvalidArgument with --resume_from, or without checkpoint.dir.
Status ResolveResumeIfPresent(const JobConfig& config, LaunchRequest* request);

/// This process's task of srun/mpirun per --engine (auto: when the
/// environment says so), or nullopt to launch the whole job. Errors:
/// InvalidArgument for a bad --engine, an environment that names no valid
/// task ("engine mode: ..."), --engine=on outside srun/mpirun, or a flag
/// that does not apply in engine mode.
StatusOr<std::optional<EngineTask>> SelectEngineTask(const LaunchRequest& request);

/// The options an engine task starts its role with.
EngineOptions EngineOptionsFor(const LaunchRequest& request);

}  // namespace tether
