#include "launch/job_plan.h"

#include <signal.h>
#include <unistd.h>

#include <glog/logging.h>

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <random>

#include "checkpoint/checkpoint.h"
#include "checkpoint/dir_lock.h"
#include "core/config.h"
#include "core/net/curve.h"
#include "core/output_path.h"
#include "launch/elastic_schedule.h"
#include "launch/process_count.h"
#include "worker/trainer.h"

namespace tether {
namespace {

StatusOr<std::vector<ElasticStep>> PlanElastic(const LaunchRequest& request, const JobConfig& config) {
  const int num_workers = config.cluster().num_workers();
  TETHER_ASSIGN_OR_RETURN(std::vector<ElasticStep> steps,
                          ParseElasticSchedule(request.elastic_schedule, num_workers, MaxWorkers(config.cluster())));
  if (request.transport == "inproc")
    return Status::InvalidArgument("--elastic_schedule needs a process per worker: not with --transport=inproc");
  for (const ElasticStep& step : steps) {
    if (step.delta > 0) {
      // A joiner's first rank: refused now, not mid-job (the data it needs).
      if (Status st = CheckWorkerRank(config, num_workers, RowsDealtOnDemand(config)); !st.ok())
        return Status::InvalidArgument("--elastic_schedule " + std::to_string(step.epoch) + ":+" +
                                       std::to_string(step.delta) + ": " + st.message());
    }
    if (step.epoch > config.train().epochs())
      LOG(WARNING) << "[launch] --elastic_schedule step at epoch " << step.epoch << " is past train.epochs = "
                   << config.train().epochs() << ": it will never apply";
  }
  return steps;
}

// Every child sees the same S, W and replicas per shard, whatever the
// config file says, and the overrides; and, when the config names no job, a
// job id of this launch's own, so that no process of another launch of the
// same config (a stale worker, a second user) can pair with these.
std::vector<std::string> ForwardedFlags(const LaunchRequest& request, const JobConfig& config) {
  std::vector<std::string> forwarded = {"--num_servers=" + std::to_string(config.cluster().num_servers()),
                                        "--num_workers=" + std::to_string(config.cluster().num_workers())};
  if (config.cluster().replicas() > 0) forwarded.push_back("--replicas=" + std::to_string(config.cluster().replicas()));
  for (const std::string& f : request.overrides)
    if (f.rfind("--num_servers=", 0) != 0 && f.rfind("--num_workers=", 0) != 0 && f.rfind("--replicas=", 0) != 0)
      forwarded.push_back(f);
  if (config.cluster().job_id().empty()) {
    std::random_device rd;
    char suffix[32];
    std::snprintf(suffix, sizeof(suffix), "-%d-%08x", static_cast<int>(getpid()), rd());
    forwarded.push_back("--job_id=" + config.name() + suffix);
  }
  return forwarded;
}

Status CheckRestarts(const LaunchRequest& request, const JobConfig& config) {
  if (request.max_restarts < 0)
    return Status::InvalidArgument("--max_restarts must be ≥ 0, got " + std::to_string(request.max_restarts));
  if (request.max_restarts > 0 && config.checkpoint().dir().empty())
    return Status::InvalidArgument("--max_restarts=" + std::to_string(request.max_restarts) +
                                   " restarts the job from its checkpoints: set checkpoint.dir (--checkpoint_dir), "
                                   "and an interval (--checkpoint_every_clocks or --checkpoint_every_seconds) so that a "
                                   "restart resumes from the latest checkpoint rather than from the start");
  if (request.resume_from.empty() && !config.checkpoint().dir().empty()) {
    // Refused up front (worker 0 refuses it too, for jobs started by hand).
    auto existing = ResolveCheckpoint(config.checkpoint().dir());
    if (existing.ok())
      return Status::InvalidArgument("checkpoint.dir " + config.checkpoint().dir() +
                                     " already holds checkpoints (the latest: " + *existing +
                                     "): resume from them with --resume_from=" + config.checkpoint().dir() +
                                     ", or give the new job its own directory");
  }
  return Status::OK();
}

// Flags the job in force would ignore, refused rather than dropped:
// --max_replacements starts servers for shards with replicas only, and an
// in-process job (one process, inproc://) reads no flag InProcessIgnores
// names.
Status CheckLaunchFlagsApply(const LaunchRequest& request, const JobConfig& config) {
  if (request.max_replacements_set && config.cluster().replicas() == 0)
    return Status::InvalidArgument("--max_replacements=" + std::to_string(request.max_replacements) +
                                   " bounds the replacement servers of shards with replicas, and this job has "
                                   "cluster.replicas 0: add --replicas=R, or drop --max_replacements");
  if (request.transport != "inproc") return Status::OK();
  for (const std::string& f : request.overrides)
    if (const std::string why = InProcessIgnores(f.substr(2, f.find('=') - 2)); !why.empty())
      return Status::InvalidArgument("flag " + f + " is not read with --transport=inproc: " + why +
                                     "; drop it, or use --transport=tcp");
  return Status::OK();
}

// The file name prefix of the file_sd target files: the job id, with
// anything but [A-Za-z0-9._-] as '_'.
std::string SdPrefix(const JobConfig& config, const std::vector<std::string>& forwarded) {
  std::string job = config.cluster().job_id().empty() ? config.name() : config.cluster().job_id();
  for (const std::string& f : forwarded)
    if (f.rfind("--job_id=", 0) == 0) job = f.substr(9);
  for (char& ch : job)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '-' && ch != '_' && ch != '.') ch = '_';
  return job;
}

}  // namespace

StatusOr<LaunchOptions> PlanLaunch(const LaunchRequest& request, const JobConfig& config, const std::string& bin_dir) {
  // Bad checkpoint paths are refused before any process starts.
  if (Status st = CheckCheckpointPaths(config.checkpoint().dir(), request.resume_from); !st.ok())
    return Status::InvalidArgument(st.message());
  // So is a folder a live job holds (checkpoint/dir_lock.h): worker 0 takes
  // the lock itself, this says so before anything starts.
  const std::string dir = AbsoluteCheckpointPath(config.checkpoint().dir());
  if (!dir.empty())
    TETHER_RETURN_IF_ERROR(
        CheckpointDirLock::Probe(dir, CheckpointDirLock::Mode::kWrite).WithPrefix("checkpoint.dir"));
  if (!request.resume_from.empty()) {
    const std::string from = AbsoluteCheckpointPath(ResumeFolder(request.resume_from));
    if (from != dir)
      TETHER_RETURN_IF_ERROR(CheckpointDirLock::Probe(from, CheckpointDirLock::Mode::kRead)
                                 .WithPrefix("--resume_from=" + request.resume_from));
  }
  LaunchOptions options;
  options.config_path = request.config_path;
  options.bin_dir = bin_dir;
  options.num_servers = config.cluster().num_servers();
  options.num_workers = config.cluster().num_workers();
  options.data_on_demand = config.train().data_on_demand();
  options.replicas = config.cluster().replicas();
  options.config_rendezvous = !config.cluster().rendezvous().empty();
  if (request.max_replacements < -1)
    return Status::InvalidArgument("--max_replacements must be ≥ 0 (or -1: twice the server processes), got " +
                                   std::to_string(request.max_replacements));
  options.max_replacements =
      request.max_replacements < 0 ? 2 * config.cluster().num_servers() : request.max_replacements;
  TETHER_RETURN_IF_ERROR(CheckLaunchFlagsApply(request, config));
  options.metrics_out = request.metrics_out;
  options.print_metrics = request.print_metrics;
  options.model_out = request.model_out;
  if (!request.elastic_schedule.empty()) {
    TETHER_ASSIGN_OR_RETURN(options.elastic, PlanElastic(request, config));
  }
  int joiners = 0;
  for (const ElasticStep& step : options.elastic) joiners += step.delta > 0 ? step.delta : 0;
  TETHER_RETURN_IF_ERROR(CheckLaunchProcessCount(options.num_servers, options.num_workers, joiners,
                                                 request.transport, CurrentProcessLimit()));
  if (!request.model_out.empty() && request.transport != "inproc")
    return Status::InvalidArgument(
        "--model_out needs --transport=inproc (the one process that holds every shard's tables at the end); for a "
        "job of several processes, export a checkpoint with tether-export");
  if (request.transport == "inproc") TETHER_RETURN_IF_ERROR(ValidateInProcessJob(config));
  if (request.transport == "ipc" && config.cluster().replicas() > 0)
    return Status::InvalidArgument("config field cluster.replicas: is " + std::to_string(config.cluster().replicas()) +
                                   ", but a replica serves its shard on a tcp:// port of its own: use "
                                   "--transport=tcp");
  options.timeout = std::chrono::seconds(request.timeout_s);
  options.transport = request.transport;
  // A stopped worker first trains on to the stop's checkpoint and writes it
  // (worker/trainer.cc allows it 60 s).
  if (!config.checkpoint().dir().empty()) options.worker_stop_grace = std::chrono::seconds(65);
  options.forwarded = ForwardedFlags(request, config);
  options.rendezvous = config.cluster().rendezvous();
  options.job_id = JobId(config);
  for (const std::string& f : options.forwarded)
    if (f.rfind("--job_id=", 0) == 0) options.job_id = f.substr(9);
  options.generation = config.cluster().generation();
  options.rendezvous_readable = !(options.rendezvous.rfind("tcp://", 0) == 0 && config.security().has_curve());
  TETHER_RETURN_IF_ERROR(CheckRestarts(request, config));
  return options;
}

Status CheckRendezvousServe(const LaunchRequest& request, const JobConfig& config) {
  const std::string& spec = config.cluster().rendezvous();
  if (request.rendezvous_serve && spec.rfind("tcp://", 0) != 0)
    return Status::InvalidArgument("--rendezvous_serve needs --rendezvous=tcp://HOST:PORT, got '" + spec + "'");
  return Status::OK();
}

StatusOr<std::unique_ptr<RendezvousStore>> StartRendezvousStore(const LaunchRequest& request,
                                                                const JobConfig& config) {
  if (!request.rendezvous_serve) return std::unique_ptr<RendezvousStore>();
  // The store's thread must never take the launcher's signals (they are
  // read through a signalfd): it starts with every signal blocked.
  sigset_t all, saved;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &saved);
  // With security.curve the store holds the servers' key pair and admits
  // the servers' and the workers' keys only.
  SocketOptions store_options;
  std::vector<std::string> admitted;
  Status st;
  if (config.security().has_curve()) {
    auto curve = RendezvousCurveServer(config.security().curve(), &admitted);
    if (curve.ok())
      store_options.curve = *curve;
    else
      st = curve.status();
  }
  auto store = std::make_unique<RendezvousStore>();
  if (st.ok()) st = store->Start(config.cluster().rendezvous(), store_options, admitted);
  pthread_sigmask(SIG_SETMASK, &saved, nullptr);
  if (!st.ok()) return st;
  LOG(INFO) << "[launch] serving the rendezvous store at " << store->endpoint();
  return store;
}

Status CheckMetricsFlags(const LaunchRequest& request, int processes) {
  for (const auto& [set, flag] : {std::pair{request.metrics_port_file_set, "metrics_port_file"},
                                  std::pair{request.metrics_sd_file_set, "metrics_sd_file"}}) {
    if (set)
      return Status::InvalidArgument(std::string("flag --") + flag +
                                     " names one process's file; tether-launch takes --metrics_sd_dir (one file_sd "
                                     "target file per process)");
  }
  if (request.metrics_port < 0) {
    if (!request.metrics_sd_dir.empty())
      return Status::InvalidArgument("--metrics_sd_dir needs --metrics_port (0: a free port per process)");
    return Status::OK();
  }
  const int last = request.metrics_port + processes - 1;
  if (request.metrics_port > 0 && last > 65535)
    return Status::InvalidArgument("--metrics_port=" + std::to_string(request.metrics_port) + " gives the last of " +
                                   std::to_string(processes) + " processes port " + std::to_string(last) +
                                   ", past 65535");
  if (request.transport == "inproc")
    return Status::InvalidArgument("--metrics_port needs server and worker processes: --transport=tcp or ipc");
  if (request.metrics_linger_s < 0)
    return Status::InvalidArgument("--metrics_linger_s=" + std::to_string(request.metrics_linger_s) +
                                   " is negative (0: exit at once)");
  // Found creatable, not made: PlanMetrics (or each engine task) makes it.
  if (!request.metrics_sd_dir.empty()) return CheckWritableDir(request.metrics_sd_dir, "flag --metrics_sd_dir");
  return Status::OK();
}

Status PlanMetrics(const LaunchRequest& request, const JobConfig& config, LaunchOptions* options) {
  // /metrics: each child gets its own port (cli/metrics_flags.h); host
  // and linger are the same for all.
  TETHER_RETURN_IF_ERROR(CheckMetricsFlags(request, options->num_servers + options->num_workers));
  if (request.metrics_port < 0) return Status::OK();
  options->metrics_port = request.metrics_port;
  options->metrics_linger = std::chrono::seconds(request.metrics_linger_s);
  options->forwarded.push_back("--metrics_host=" + request.metrics_host);
  options->forwarded.push_back("--metrics_linger_s=" + std::to_string(request.metrics_linger_s));
  if (!request.metrics_sd_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(request.metrics_sd_dir, ec);
    if (ec) return Status::InvalidArgument("--metrics_sd_dir=" + request.metrics_sd_dir + ": " + ec.message());
    options->metrics_sd_dir = request.metrics_sd_dir;
    options->metrics_sd_prefix = SdPrefix(config, options->forwarded);
  }
  LOG(INFO) << "[launch] /metrics on " << request.metrics_host << ": "
            << (request.metrics_port == 0 ? std::string("a free port per process (each logs its URL)")
                                          : "servers from port " + std::to_string(request.metrics_port) +
                                                ", workers from " +
                                                std::to_string(request.metrics_port + options->num_servers))
            << (options->metrics_sd_dir.empty() ? "" : "; file_sd targets in " + options->metrics_sd_dir);
  return Status::OK();
}

}  // namespace tether
