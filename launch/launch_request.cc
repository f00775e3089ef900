#include "launch/launch_request.h"

#include <glog/logging.h>

#include <filesystem>

#include "checkpoint/checkpoint.h"
#include "core/job_inputs.h"
#include "core/output_path.h"
#include "core/output_target.h"
#include "launch/old_metrics.h"

namespace tether {

Status CheckLaunchCommandLine(int servers, int workers, const std::string& transport, int timeout_s) {
  // 0 is the flags' default (left out: the config's count); a 0 given is
  // refused by CheckCountGiven.
  if (servers < 0 || workers < 0) {
    const bool s = servers < 0;
    return Status::InvalidArgument(std::string("--") + (s ? "servers" : "workers") + "=" +
                                   std::to_string(s ? servers : workers) + ": a job needs at least one " +
                                   (s ? "server shard" : "worker") +
                                   "; give a count ≥ 1, or leave the flag out to take the config's");
  }
  if (transport != "tcp" && transport != "ipc" && transport != "inproc")
    return Status::InvalidArgument("--transport=" + transport + ": expected tcp, ipc or inproc");
  if (timeout_s <= 0) return Status::InvalidArgument("--timeout_s must be positive, got " + std::to_string(timeout_s));
  return Status::OK();
}

Status CheckCountGiven(const std::string& flag, int value, bool given) {
  if (!given || value != 0) return Status::OK();
  return Status::InvalidArgument("--" + flag + "=0: a job needs at least one " +
                                 (flag == "servers" ? "server shard" : "worker") +
                                 "; give a count ≥ 1, or leave the flag out to take the config's");
}

namespace {

constexpr char kMetricsDirSource[] = "train.metrics_dir (--metrics_dir)";

std::string MetricsDirLockPath(const std::string& dir) { return dir + "/LOCK"; }

constexpr char kMetricsDirFix[] = "a launch needs the folder to itself; give this job its own --metrics_dir";

// The lock file of --metrics_out: TARGET.lock next to the file written (a
// link's final target); "" for a device or pipe written through, which
// holds no run's file, or a path the writable checks refuse.
std::string MetricsOutLockPath(const std::string& metrics_out) {
  if (metrics_out.empty()) return "";
  StatusOr<OutputTarget> target = ResolveOutputTarget(metrics_out, "flag --metrics_out", StreamOutput::kWriteThrough);
  if (!target.ok() || target->write_through) return "";
  return target->path + ".lock";
}

constexpr char kMetricsOutFix[] = "another launch writes its metrics there; give this job its own --metrics_out";

}  // namespace

Status CheckOutputPaths(const LaunchRequest& request, const JobConfig& config) {
  const std::vector<NamedInput> inputs = JobInputs(request.config_path, request.flagfile, config, request.resume_from);
  if (!request.model_out.empty())
    TETHER_RETURN_IF_ERROR(CheckWritableFile(request.model_out, "flag --model_out", false));
  // Before the replaceable check: a data file there is named as the input it is.
  TETHER_RETURN_IF_ERROR(
      CheckOutputs({{"flag --model_out", request.model_out}, {"flag --metrics_out", request.metrics_out}}, inputs));
  if (!request.metrics_out.empty())
    TETHER_RETURN_IF_ERROR(CheckMetricsOutReplaceable(request.metrics_out, "flag --metrics_out"));
  if (const std::string lock = MetricsOutLockPath(request.metrics_out); !lock.empty())
    TETHER_RETURN_IF_ERROR(FileLock::Probe(lock, "flag --metrics_out=" + request.metrics_out, kMetricsOutFix));
  if (const std::string& dir = config.train().metrics_dir(); !dir.empty()) {
    TETHER_RETURN_IF_ERROR(CheckWritableDir(dir, kMetricsDirSource));
    TETHER_RETURN_IF_ERROR(
        FileLock::Probe(MetricsDirLockPath(dir), std::string(kMetricsDirSource) + "=" + dir, kMetricsDirFix));
    TETHER_RETURN_IF_ERROR(CheckMetricsDirFresh(dir, kMetricsDirSource));
  }
  if (!config.checkpoint().dir().empty()) TETHER_RETURN_IF_ERROR(CheckCheckpointDir(config.checkpoint().dir()));
  return Status::OK();
}

StatusOr<FileLock> LockMetricsDir(const JobConfig& config) {
  const std::string& dir = config.train().metrics_dir();
  if (dir.empty()) return FileLock();
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status::IOError(std::string(kMetricsDirSource) + "=" + dir + ": cannot be created: " + ec.message());
  TETHER_ASSIGN_OR_RETURN(FileLock lock, FileLock::Acquire(MetricsDirLockPath(dir),
                                                          std::string(kMetricsDirSource) + "=" + dir, kMetricsDirFix));
  TETHER_RETURN_IF_ERROR(CheckMetricsDirFresh(dir, kMetricsDirSource));
  return lock;
}

StatusOr<FileLock> LockMetricsOut(const LaunchRequest& request) {
  const std::string lock = MetricsOutLockPath(request.metrics_out);
  if (lock.empty()) return FileLock();
  return FileLock::Acquire(lock, "flag --metrics_out=" + request.metrics_out, kMetricsOutFix);
}

Status ResolveResumeIfPresent(const JobConfig& config, LaunchRequest* request) {
  if (!request->resume_if_present) return Status::OK();
  if (!request->resume_from.empty())
    return Status::InvalidArgument("--resume_if_present and --resume_from exclude each other");
  if (config.checkpoint().dir().empty())
    return Status::InvalidArgument(
        "--resume_if_present needs checkpoint.dir (--checkpoint_dir): where to look for one");
  if (auto latest = ResolveCheckpoint(config.checkpoint().dir()); latest.ok()) {
    LOG(INFO) << "[launch] --resume_if_present: resuming from " << *latest;
    request->resume_from = *latest;
  } else {
    LOG(INFO) << "[launch] --resume_if_present: no complete checkpoint under " << config.checkpoint().dir()
              << "; starting afresh";
  }
  return Status::OK();
}

StatusOr<std::optional<EngineTask>> SelectEngineTask(const LaunchRequest& request) {
  if (request.engine != "auto" && request.engine != "on" && request.engine != "off")
    return Status::InvalidArgument("--engine=" + request.engine + ": expected auto, on or off");
  auto task = DetectEngineTask();
  if (!task.ok()) return Status::InvalidArgument("engine mode: " + task.status().message());
  if (request.engine == "off") task->reset();
  if (request.engine == "on" && !task->has_value())
    return Status::InvalidArgument(
        "--engine=on, but this process is not a task of srun (SLURM_STEP_ID unset, or the batch step) or mpirun "
        "(OMPI_COMM_WORLD_RANK unset)");
  if (task->has_value() && !request.not_for_engine.empty())
    return Status::InvalidArgument("--" + request.not_for_engine.front() +
                                   " does not apply in engine mode (one task of srun/mpirun runs one role; the "
                                   "scheduler bounds and restarts the job)");
  return task;
}

EngineOptions EngineOptionsFor(const LaunchRequest& request) {
  EngineOptions o;
  o.config_path = request.config_path;
  o.num_workers_flag = request.num_workers_flag;
  o.overrides = request.overrides;
  o.listen = request.listen;
  o.advertise_host = request.advertise_host;
  o.rendezvous_serve = request.rendezvous_serve;
  o.metrics_out = request.metrics_out;
  o.resume_from = request.resume_from;
  o.metrics_port = request.metrics_port;
  o.metrics_host = request.metrics_host;
  o.metrics_linger_s = request.metrics_linger_s;
  o.metrics_sd_dir = request.metrics_sd_dir;
  return o;
}

}  // namespace tether
