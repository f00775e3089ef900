#include "launch/engine_task.h"

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <glog/logging.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "launch/old_metrics.h"

namespace tether {
namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

StatusOr<int> EnvInt(const char* name) {
  const std::string v = Env(name);
  char* end = nullptr;
  errno = 0;
  const long n = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno != 0 || n < 0 || n > (1 << 30))
    return Status::InvalidArgument(std::string("environment variable ") + name + "='" + v +
                                   "': expected a non-negative integer");
  return static_cast<int>(n);
}

StatusOr<EngineTask> SlurmTask() {
  EngineTask t;
  t.scheduler = "SLURM";
  t.rank_var = "SLURM_PROCID";
  TETHER_ASSIGN_OR_RETURN(t.rank, EnvInt("SLURM_PROCID"));
  TETHER_ASSIGN_OR_RETURN(t.ntasks, EnvInt("SLURM_NTASKS"));
  // One job id per allocation and step (two sruns of one sbatch are two
  // jobs); the same after a requeue, which bumps SLURM_RESTART_COUNT.
  if (!Env("SLURM_JOB_ID").empty()) t.job_id = "slurm-" + Env("SLURM_JOB_ID") + "." + Env("SLURM_STEP_ID");
  if (!Env("SLURM_RESTART_COUNT").empty()) {
    TETHER_ASSIGN_OR_RETURN(int restarts, EnvInt("SLURM_RESTART_COUNT"));
    t.generation = static_cast<uint64_t>(restarts);
  }
  return t;
}

StatusOr<EngineTask> OpenMpiTask() {
  EngineTask t;
  t.scheduler = "Open MPI";
  t.rank_var = "OMPI_COMM_WORLD_RANK";
  TETHER_ASSIGN_OR_RETURN(t.rank, EnvInt("OMPI_COMM_WORLD_RANK"));
  TETHER_ASSIGN_OR_RETURN(t.ntasks, EnvInt("OMPI_COMM_WORLD_SIZE"));
  // Unique per mpirun (Open MPI 4.1 sets both).
  if (!Env("OMPI_MCA_ess_base_jobid").empty())
    t.job_id = "ompi-" + Env("OMPI_MCA_ess_base_jobid");
  else if (!Env("PMIX_NAMESPACE").empty())
    t.job_id = "ompi-" + Env("PMIX_NAMESPACE");
  return t;
}

// The role a task runs, and what its start-up line says.
struct EngineRole {
  bool is_server = false;
  int index = 0;  // shard or rank
  int count = 0;  // servers or workers of the job
  std::string job_id;
  uint64_t generation = 0;
  std::string rendezvous;
  std::vector<std::string> args;  // the command line, binary first
};

// The task's role in the job, checked; args not yet filled in.
StatusOr<EngineRole> PlaceTask(const EngineTask& task, const JobConfig& config, const EngineOptions& options) {
  const int num_servers = config.cluster().num_servers();
  if (task.rank >= task.ntasks) return Status::InvalidArgument("rank outside [0, " + std::to_string(task.ntasks) + ")");
  if (task.ntasks <= num_servers)
    return Status::InvalidArgument(std::to_string(task.ntasks) + " task(s) and --num_servers=" +
                                   std::to_string(num_servers) +
                                   " leave no worker: start num_servers + num_workers tasks (srun -n / mpirun -np)");
  const int num_workers = task.ntasks - num_servers;
  if (!options.num_workers_flag.empty() && options.num_workers_flag != std::to_string(num_workers))
    return Status::InvalidArgument("--num_workers=" + options.num_workers_flag + " contradicts the " +
                                   std::to_string(task.ntasks) + " tasks less " + std::to_string(num_servers) +
                                   " server(s) = " + std::to_string(num_workers) + " worker(s)");
  EngineRole role;
  role.job_id = config.cluster().job_id();
  if (role.job_id.empty()) role.job_id = task.job_id;
  if (role.job_id.empty())
    return Status::InvalidArgument(task.scheduler + " gave no job id (SLURM_JOB_ID / OMPI_MCA_ess_base_jobid / "
                                   "PMIX_NAMESPACE unset): set cluster.job_id (--job_id), the same in every task");
  role.generation = config.cluster().has_generation() ? config.cluster().generation() : task.generation;
  role.rendezvous = config.cluster().rendezvous();
  if (role.rendezvous.empty()) {
    // Default: beside the job, in the working directory every task shares
    // (srun and mpirun start tasks there); a shared filesystem across hosts.
    std::error_code ec;
    role.rendezvous = "file:" + (std::filesystem::current_path(ec) / "tether-rendezvous").string();
  }
  if (options.rendezvous_serve && role.rendezvous.rfind("tcp://", 0) != 0)
    return Status::InvalidArgument("--rendezvous_serve needs --rendezvous=tcp://HOST:PORT, got '" + role.rendezvous +
                                   "'");
  role.is_server = task.rank < num_servers;
  role.index = role.is_server ? task.rank : task.rank - num_servers;
  role.count = role.is_server ? num_servers : num_workers;
  return role;
}

// The same /metrics layout as a launched job: task i serves on BASE + i
// (server i, then worker r on BASE + S + r); 0 picks a free port each.
Status AddEngineMetricsFlags(const EngineTask& task, const EngineOptions& options, const EngineRole& role,
                             std::vector<std::string>* args) {
  if (options.metrics_port < 0) {
    if (!options.metrics_sd_dir.empty())
      return Status::InvalidArgument("--metrics_sd_dir needs --metrics_port (0: a free port per task)");
    return Status::OK();
  }
  args->push_back("--metrics_port=" + std::to_string(options.metrics_port == 0 ? 0 : options.metrics_port + task.rank));
  args->push_back("--metrics_host=" + options.metrics_host);
  args->push_back("--metrics_linger_s=" + std::to_string(options.metrics_linger_s));
  if (options.metrics_sd_dir.empty()) return Status::OK();
  std::error_code ec;  // every task makes it; the first one wins
  std::filesystem::create_directories(options.metrics_sd_dir, ec);
  if (ec) return Status::InvalidArgument("--metrics_sd_dir=" + options.metrics_sd_dir + ": " + ec.message());
  std::string name = role.job_id;
  for (char& ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '-' && ch != '_' && ch != '.') ch = '_';
  args->push_back("--metrics_sd_file=" + options.metrics_sd_dir + "/" + name +
                  (role.is_server ? "-server-" : "-worker-") + std::to_string(role.index) + ".json");
  return Status::OK();
}

StatusOr<EngineRole> EngineRoleFor(const EngineTask& task, const JobConfig& config, const EngineOptions& options,
                                   const std::string& bin_dir) {
  TETHER_ASSIGN_OR_RETURN(EngineRole role, PlaceTask(task, config, options));
  std::vector<std::string>& args = role.args;
  args = {bin_dir + "/" + (role.is_server ? "tether-server" : "tether-worker"), "--config=" + options.config_path};
  args.push_back(role.is_server ? "--shard=" + std::to_string(role.index) : "--rank=" + std::to_string(role.index));
  args.push_back("--num_servers=" + std::to_string(config.cluster().num_servers()));
  args.push_back("--num_workers=" + std::to_string(task.ntasks - config.cluster().num_servers()));
  args.push_back("--job_id=" + role.job_id);
  args.push_back("--generation=" + std::to_string(role.generation));
  args.push_back("--rendezvous=" + role.rendezvous);
  for (const std::string& f : options.overrides) {
    const auto set_here = {"--num_servers=", "--num_workers=", "--job_id=", "--generation=", "--rendezvous="};
    if (std::none_of(set_here.begin(), set_here.end(), [&](const char* mine) { return f.rfind(mine, 0) == 0; }))
      args.push_back(f);
  }
  if (role.is_server) {
    args.push_back("--listen=" + options.listen);
    if (!options.advertise_host.empty()) args.push_back("--advertise_host=" + options.advertise_host);
    if (options.rendezvous_serve && role.index == 0) args.push_back("--rendezvous_serve");
  } else if (role.index == 0 && !options.metrics_out.empty()) {
    // A file left by an earlier run must not pass for this run's metrics; only
    // such a file is removed (launch/old_metrics.h).
    TETHER_RETURN_IF_ERROR(RemoveOldMetrics(options.metrics_out, "flag --metrics_out"));
    args.push_back("--metrics_out=" + options.metrics_out);
  }
  if (!options.resume_from.empty()) args.push_back("--resume_from=" + options.resume_from);
  TETHER_RETURN_IF_ERROR(AddEngineMetricsFlags(task, options, role, &args));
  return role;
}

}  // namespace

StatusOr<std::optional<EngineTask>> DetectEngineTask() {
  // SLURM's special steps (the batch script 0xfffffffe, extern, interactive:
  // ids from 0xfffffff0 up) are not srun task steps: a tether-launch run
  // straight from an sbatch script runs the job on its node, as elsewhere.
  const std::string step = Env("SLURM_STEP_ID");
  const bool slurm = !step.empty() && !(step.size() >= 10 && step >= "4294967280");
  if (!Env("OMPI_COMM_WORLD_RANK").empty()) {
    TETHER_ASSIGN_OR_RETURN(EngineTask t, OpenMpiTask());
    if (slurm || !Env("SLURM_PROCID").empty()) {
      // Both: mpirun is the launcher that started this process.
      t.chosen_over = "Open MPI's OMPI_COMM_WORLD_RANK=" + Env("OMPI_COMM_WORLD_RANK") + " OMPI_COMM_WORLD_SIZE=" +
                      Env("OMPI_COMM_WORLD_SIZE") + " used; SLURM's SLURM_PROCID=" + Env("SLURM_PROCID") +
                      " SLURM_NTASKS=" + Env("SLURM_NTASKS") + " SLURM_STEP_ID=" + Env("SLURM_STEP_ID") +
                      " ignored (mpirun started this process: the SLURM variables are its allocation's or leaked "
                      "into its environment)";
    }
    return std::optional<EngineTask>(t);
  }
  if (slurm) {
    TETHER_ASSIGN_OR_RETURN(EngineTask t, SlurmTask());
    return std::optional<EngineTask>(t);
  }
  return std::optional<EngineTask>();
}

Status CheckEngineTask(const EngineTask& task, const JobConfig& config, const EngineOptions& options) {
  const StatusOr<EngineRole> role = PlaceTask(task, config, options);
  if (role.ok()) return Status::OK();
  return role.status().WithPrefix(task.scheduler + " task " + std::to_string(task.rank) + " of " +
                                  std::to_string(task.ntasks) + " (" + task.rank_var + ")");
}

StatusOr<std::vector<std::string>> EngineRoleCommand(const EngineTask& task, const JobConfig& config,
                                                     const EngineOptions& options, const std::string& bin_dir) {
  TETHER_ASSIGN_OR_RETURN(EngineRole role, EngineRoleFor(task, config, options, bin_dir));
  return role.args;
}

int RunEngineTask(const EngineTask& task, const JobConfig& config, const EngineOptions& options,
                  const std::string& bin_dir) {
  const std::string where = "[launch] " + task.scheduler + " task " + std::to_string(task.rank) + " of " +
                            std::to_string(task.ntasks) + " (" + task.rank_var + "): ";
  StatusOr<EngineRole> role = EngineRoleFor(task, config, options, bin_dir);
  if (!role.ok()) {
    LOG(ERROR) << where << role.status().message();
    return role.status().code() == Status::Code::kInvalidArgument ? 2 : 1;
  }
  std::string cmdline;
  for (const auto& a : role->args) cmdline += (cmdline.empty() ? "" : " ") + a;
  const char* what = role->is_server ? "server" : "worker";
  if (!task.chosen_over.empty()) LOG(WARNING) << where << "both launchers' variables are set: " << task.chosen_over;
  LOG(INFO) << where << (role->is_server ? "server shard " : "worker rank ") << role->index << " of " << role->count
            << ", job '" << role->job_id << "' generation " << role->generation << ", rendezvous "
            << role->rendezvous << ": exec " << cmdline;
  std::vector<char*> argv;
  for (auto& a : role->args) argv.push_back(a.data());
  argv.push_back(nullptr);
  // The role must not outlive the scheduler's process that started it
  // (mpirun, orted, slurmstepd): an mpirun stopped while it is still
  // launching exits without signalling the tasks it already started. When
  // that parent goes, the role gets SIGTERM and leaves as on any stop (the
  // setting survives exec).
  const pid_t parent = getppid();
  if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0) PLOG(WARNING) << where << "prctl(PR_SET_PDEATHSIG)";
  if (getppid() != parent) {
    LOG(ERROR) << where << "the process that started this task (pid " << parent << ") is gone; not starting the "
               << what;
    return 1;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  google::FlushLogFiles(google::GLOG_INFO);
  execv(argv[0], argv.data());
  PLOG(ERROR) << where << "cannot exec " << argv[0] << " (the " << what << " role)";
  return 1;
}

}  // namespace tether
