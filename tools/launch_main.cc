// tether-launch: runs a whole Tether job on this machine. Starts
// cluster.num_servers `tether-server` shards on 127.0.0.1 port 0, reads their
// bound endpoints back from port files, then starts cluster.num_workers
// `tether-worker` ranks pointed at them, monitors everything, and prints the
// metrics of rank 0 and the wall time on success.
//
// --transport picks how the processes talk:
//   tcp     (default) TCP on 127.0.0.1, as between hosts;
//   ipc     Unix-domain sockets in the launcher's private directory: one
//           process per shard and worker as with tcp, less kernel work per byte;
//   inproc  one `tether-worker --in_process` child that runs every shard and
//           every worker as threads, passing messages by pointer
//           (local/local_job.h). The fastest on one host; a single process,
//           so a crash takes the whole job with it.
//
// The child binaries are taken from the launcher's own directory
// (/proc/self/exe). Every child runs in one process group owned by the
// launcher and gets PR_SET_PDEATHSIG(SIGKILL), so no child outlives the
// launcher, even a SIGKILLed one. Every wait is bounded.
//
// Engine mode: run as every task of `srun -n N` or `mpirun -np N` (detected
// from SLURM_STEP_ID / OMPI_COMM_WORLD_RANK; --engine), this binary starts
// nothing: each task execs its own role, server shard i for task i < S, else
// worker i - S, and the processes find each other through the rendezvous
// (core/net/rendezvous.h; launch/engine_task.h, docs/OPERATIONS.md).
//
// Exit codes: 0 success; 1 a child failed, the servers did not exit after the
// workers, the metrics file is missing, or a start-up error; 2 bad config or
// flags; 124 --timeout_s expired; 128+N on signal N (130 SIGINT, 143 SIGTERM,
// 129 SIGHUP).
//
// Single-threaded: the launcher is one event loop over a signalfd (SIGCHLD,
// SIGINT, SIGTERM, SIGHUP) and, while servers start, an inotify watch on the
// port-file directory. The launcher itself is launch/ (launcher.h, the
// checks before it starts in job_plan.h, restarts in restarts.h); this file
// maps the flags into a LaunchRequest.
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <filesystem>
#include <string>
#include <tuple>

#include "cli/config_flags.h"
#include "cli/metrics_flags.h"
#include "core/config.h"
#include "launch/job_plan.h"
#include "launch/launch_checks.h"
#include "launch/launch_request.h"
#include "launch/restarts.h"
#include "worker/models/model_registry.h"

DEFINE_int32(servers, 0, "number of server shards (overrides cluster.num_servers); 0: from the config");
DEFINE_int32(workers, 0, "number of workers (overrides cluster.num_workers); 0: from the config");
DEFINE_string(metrics_out, "",
              "passed to worker 0 (with --elastic_schedule: to every worker; the evaluator writes it), which "
              "writes the final metrics JSON there; the summary line names its headline metrics and the file "
              "(--print_metrics: the whole JSON too)");
DEFINE_bool(print_metrics, false,
            "at the end, print the metrics file's JSON (--metrics_out) on stdout before the summary line; "
            "by default only the summary line names the headline metrics and where the file is");
DEFINE_string(model_out, "",
              "with --transport=inproc: the trained model is written here at the end (FILE.npz: NumPy npz, else "
              "safetensors; docs/OPERATIONS.md, Export)");
DEFINE_string(transport, "tcp",
              "tcp (127.0.0.1, as between hosts), ipc (Unix-domain sockets, one process per shard and worker) "
              "or inproc (one process, shards and workers as threads; see local/local_job.h)");
DEFINE_int32(timeout_s, 1800, "bound on the whole job in seconds; on expiry every child is killed (exit 124)");
DEFINE_string(resume_from, "",
              "resume the job from this checkpoint, or the latest complete one under this directory "
              "(passed to every server and worker)");
DEFINE_string(engine, "auto",
              "engine mode, where this process is one task of a job started by srun or mpirun and runs one "
              "role (see below): auto (when SLURM_STEP_ID or OMPI_COMM_WORLD_RANK is set), on (required), off");
DEFINE_string(listen, "tcp://*:0",
              "engine mode: the endpoint a server task binds (default every interface, advertised as "
              "--advertise_host or the node's hostname)");
DEFINE_string(advertise_host, "", "engine mode: the host workers connect to for a wildcard --listen");
DEFINE_bool(rendezvous_serve, false,
            "serve the rendezvous store at --rendezvous=tcp://HOST:PORT: in engine mode task 0 (server 0) serves "
            "it; otherwise this launcher does, for the whole job");
DEFINE_bool(resume_if_present, false,
            "resume from the latest complete checkpoint under checkpoint.dir when there is one, else start "
            "afresh (a requeued job); excludes --resume_from");
DEFINE_string(metrics_sd_dir, "",
              "with --metrics_port: every server and worker writes its Prometheus file_sd target file "
              "(JOBID-server-I.json, JOBID-worker-R.json) here, for a file_sd_configs entry of DIR/*.json");
DEFINE_string(elastic_schedule, "",
              "add and stop workers by the job's epoch, e.g. \"2:+2,4:-1\": at the start of epoch 2 start two "
              "workers with new ranks, at epoch 4 stop the most recently started one gracefully (SIGTERM: it says "
              "BYE). Needs cluster.max_workers above the ranks started and train.data_on_demand for the joiners "
              "(docs/OPERATIONS.md, Joining and leaving); not with --transport=inproc or engine mode");
DEFINE_int32(max_replacements, -1,
             "with cluster.replicas: how many replacement server processes may be started over the job, each "
             "joining a shard whose chain a server death left short of cluster.replicas (tether-server "
             "--join_as_replica; one per replica missing); "
             "-1: twice the number of servers; 0: none");
DEFINE_bool(check_config, false,
            "check the job as a launch would (the config with the overrides, the model's checks, the data files, "
            "the output paths, found creatable but never made, a resume against its checkpoint (whose files it reads "
            "whole, unless a task of srun/mpirun), the plan and the "
            "metrics flags; as a task of srun/mpirun, its place in the job too), log the config in force and "
            "exit: 0 when the job would start, 2 naming the first problem; starts, makes and removes nothing");
DEFINE_int32(max_restarts, 0,
             "when the job fails (a process died or failed), restart it from the latest complete checkpoint "
             "under checkpoint.dir, up to N times, each as the next cluster.generation");

namespace {

// --servers/--workers are the launcher's names for --num_servers/--num_workers;
// contradicting pairs are refused instead of silently picking one. False
// (logged) on a contradiction.
bool ApplyCountAliases() {
  for (auto [mine, flag, override_name] : {std::tuple{FLAGS_servers, "servers", "num_servers"},
                                           std::tuple{FLAGS_workers, "workers", "num_workers"}}) {
    if (mine == 0) continue;
    std::string other;
    CHECK(gflags::GetCommandLineOption(override_name, &other)) << "--" << override_name << " not defined";
    if (!other.empty() && other != std::to_string(mine)) {
      LOG(ERROR) << "[launch] --" << flag << "=" << mine << " contradicts --" << override_name << "=" << other;
      return false;
    }
    gflags::SetCommandLineOption(override_name, std::to_string(mine).c_str());
  }
  return true;
}

// --config with the overrides, validated as a whole job, the model's checks
// and the data files: refused before any server starts, naming the file's
// line or the flag that set the field. The launcher logs
// the values in force once, after the plan (main), not each child.
tether::StatusOr<tether::JobConfig> LoadLaunchConfig() {
  auto config = tether::LoadConfigFromFlags("launch", tether::ConfigScope::kJob, tether::ConfigLog::kQuiet);
  if (!config.ok()) return config;
  TETHER_RETURN_IF_ERROR(tether::NameConfigFieldSource(tether::ValidateModelConfig(*config)));
  TETHER_RETURN_IF_ERROR(tether::NameConfigFieldSource(tether::CheckDataFilesExist(*config)));
  return config;
}

// Directory of the running executable, where the child binaries live.
tether::StatusOr<std::string> OwnDirectory() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return tether::Status::Internal("cannot read /proc/self/exe: " + ec.message());
  return exe.parent_path().string();
}

bool FlagGiven(const char* name) { return !gflags::GetCommandLineFlagInfoOrDie(name).is_default; }

tether::LaunchRequest RequestFromFlags() {
  tether::LaunchRequest r;
  gflags::GetCommandLineOption("config", &r.config_path);
  gflags::GetCommandLineOption("flagfile", &r.flagfile);
  gflags::GetCommandLineOption("num_workers", &r.num_workers_flag);
  r.overrides = tether::OverrideFlagsSet();
  r.transport = FLAGS_transport;
  r.timeout_s = FLAGS_timeout_s;
  r.metrics_out = FLAGS_metrics_out;
  r.print_metrics = FLAGS_print_metrics;
  r.model_out = FLAGS_model_out;
  r.resume_from = FLAGS_resume_from;
  r.resume_if_present = FLAGS_resume_if_present;
  r.elastic_schedule = FLAGS_elastic_schedule;
  r.max_restarts = FLAGS_max_restarts;
  r.max_replacements = FLAGS_max_replacements;
  r.max_replacements_set = FlagGiven("max_replacements");
  r.engine = FLAGS_engine;
  r.listen = FLAGS_listen;
  r.advertise_host = FLAGS_advertise_host;
  r.rendezvous_serve = FLAGS_rendezvous_serve;
  for (const char* flag :
       {"transport", "max_restarts", "max_replacements", "model_out", "timeout_s", "elastic_schedule"})
    if (FlagGiven(flag)) r.not_for_engine.push_back(flag);
  r.metrics_port = FLAGS_metrics_port;
  r.metrics_host = FLAGS_metrics_host;
  r.metrics_linger_s = FLAGS_metrics_linger_s;
  r.metrics_sd_dir = FLAGS_metrics_sd_dir;
  r.metrics_port_file_set = FlagGiven("metrics_port_file");
  r.metrics_sd_file_set = FlagGiven("metrics_sd_file");
  return r;
}

// The config in force, once for the job; its servers and workers are
// started with --log_config=false and log theirs only at --v=1.
void LogConfigInForce(const tether::LaunchRequest& request, const tether::JobConfig& config) {
  std::string flags;
  for (const std::string& f : request.overrides) flags += " " + f;
  const std::string head =
      "[launch] config in force (" + request.config_path + (flags.empty() ? "" : ", flags" + flags) + "):";
  if (VLOG_IS_ON(1))
    LOG(INFO) << head << "\n" << tether::ConfigSummary(config);
  else
    LOG(INFO) << head << " " << tether::ConfigOneLine(config);
}

// --check_config: the job passed every check a launch makes before it
// starts anything.
// As a task of srun/mpirun the workers are the tasks past the servers.
int ConfigChecked(const tether::LaunchRequest& request, const tether::JobConfig& config,
                  const std::optional<tether::EngineTask>& task) {
  LogConfigInForce(request, config);
  const int servers = config.cluster().num_servers();
  LOG(INFO) << "[launch] --check_config: " << request.config_path << " is a job that would start (" << servers
            << " server(s), " << (task ? task->ntasks - servers : config.cluster().num_workers())
            << " worker(s)); nothing started";
  return 0;
}

// Logs "[launch] MESSAGE" when `st` failed; true then.
bool Refused(const tether::Status& st) {
  if (st.ok()) return false;
  LOG(ERROR) << "[launch] " << st.message();
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  tether::ParseFlagsOrDie(
      &argc, &argv,
      {"tether-launch --config=JOB.pbtxt [--servers=S] [--workers=W] [--transport=tcp|ipc|inproc] "
       "[--metrics_out=FILE] [--timeout_s=1800] [--resume_from=DIR] [--max_restarts=N] "
       "[--metrics_port=BASE [--metrics_host=H] [--metrics_sd_dir=DIR] [--metrics_linger_s=15]] "
       "[override flags such as --staleness=N, forwarded to every server and worker]\n"
       "Runs S tether-server shards and W tether-worker ranks on 127.0.0.1 and waits for them.\n"
       "   or, as every task of srun/mpirun (engine mode): srun -n $((S+W)) tether-launch --config=JOB.pbtxt "
       "--num_servers=S [--rendezvous=...]: task i < S is server shard i, the others workers i-S."});
  if (Refused(tether::CheckLaunchCommandLine(FLAGS_servers, FLAGS_workers, FLAGS_transport, FLAGS_timeout_s)) ||
      Refused(tether::CheckCountGiven("servers", FLAGS_servers, FlagGiven("servers"))) ||
      Refused(tether::CheckCountGiven("workers", FLAGS_workers, FlagGiven("workers"))) ||
      !ApplyCountAliases())
    return 2;
  auto config = LoadLaunchConfig();
  if (!config.ok()) {
    LOG(ERROR) << "[launch] " << config.status().ToString();
    return 2;
  }
  auto bin_dir = OwnDirectory();
  if (!bin_dir.ok()) LOG(FATAL) << "[launch] " << bin_dir.status().ToString();
  tether::LaunchRequest request = RequestFromFlags();
  if (Refused(tether::ResolveResumeIfPresent(*config, &request))) return 2;
  auto engine_task = tether::SelectEngineTask(request);
  if (Refused(engine_task.status())) return 2;
  // One set of checks for every --check_config, a task of srun/mpirun's
  // too, and for the launcher of a whole job before it starts a process.
  if (FLAGS_check_config) {
    if (Refused(tether::NameConfigFieldSource(tether::CheckLaunch(request, *config, *bin_dir, *engine_task).status())))
      return 2;
    if (!engine_task->has_value() && Refused(tether::CheckResumeFiles(request))) return 2;
    return ConfigChecked(request, *config, *engine_task);
  }
  if (engine_task->has_value())
    return tether::RunEngineTask(**engine_task, *config, tether::EngineOptionsFor(request), *bin_dir);

  auto options = tether::CheckLaunch(request, *config, *bin_dir, std::nullopt);
  if (Refused(tether::NameConfigFieldSource(options.status()))) return 2;
  // Held until the job ends: a second launch into this folder, or onto
  // this metrics file, is refused.
  auto metrics_dir_lock = tether::LockMetricsDir(*config);
  if (Refused(metrics_dir_lock.status())) return 2;
  auto metrics_out_lock = tether::LockMetricsOut(request);
  if (Refused(metrics_out_lock.status())) return 2;
  auto store = tether::StartRendezvousStore(request, *config);
  if (Refused(store.status())) return 1;
  if (Refused(tether::PlanMetrics(request, *config, &*options))) return 2;
  LogConfigInForce(request, *config);
  tether::RestartPolicy restarts;
  restarts.max_restarts = request.max_restarts;
  restarts.checkpoint_dir = config->checkpoint().dir();
  restarts.generation = config->cluster().generation();
  restarts.resume_from = request.resume_from;
  return tether::RunWithRestarts(*options, restarts);
}
