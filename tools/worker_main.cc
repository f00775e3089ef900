// tether-worker: one trainer of the job.
#include <unistd.h>

#include <gflags/gflags.h>
#include <glog/logging.h>

#include <atomic>
#include <csignal>
#include <cstdint>
#include <ctime>
#include <sstream>

#include "core/config.h"
#include "core/endpoint_list.h"
#include "core/file_util.h"
#include "core/job_inputs.h"
#include "launch/old_metrics.h"
#include "core/output_path.h"
#include "core/net/curve.h"
#include "core/net/endpoint_check.h"
#include "core/net/rendezvous.h"
#include "core/net/server_lookup.h"
#include "worker/client/claim_lookup.h"
#include "checkpoint/checkpoint.h"
#include "cli/config_flags.h"
#include "cli/metrics_flags.h"
#include "cli/signals.h"
#include "local/local_job.h"
#include "serving/model_export.h"
#include "telemetry/metrics_log.h"
#include "worker/models/model_registry.h"
#include "worker/train/job_outcome.h"
#include "worker/train/resume_check.h"
#include "worker/trainer.h"
#include "worker/worker_metrics.h"

DEFINE_int32(rank, 0, "this worker's rank in [0, num_workers)");
DEFINE_string(server_addresses, "",
              "comma-separated server endpoints in shard order (tcp://HOST:PORT,...); "
              "default: cluster.server_addresses from the config, else looked up in --rendezvous");
DEFINE_bool(resume_if_present, false,
            "resume from the latest complete checkpoint under checkpoint.dir when there is one, else start "
            "afresh (a requeued job); excludes --resume_from");
DEFINE_string(metrics_out, "", "write the final metrics JSON here if this worker evaluates at the end (rank 0, or the lowest rank still there when rank 0 left: give it to every worker of an elastic job)");
DEFINE_string(resume_from, "",
              "resume from this checkpoint, or the latest complete one under this directory "
              "(checkpoint.dir); every worker of the job takes the same (docs/OPERATIONS.md)");
DEFINE_string(model_out, "",
              "with --in_process: write the trained model here at the end of the job (FILE.npz: NumPy npz; "
              "else safetensors), with the training label counts (docs/OPERATIONS.md, Export)");
DEFINE_string(progress_file, "",
              "write \"EPOCH CLOCK\" (the epoch in progress, 1-based, and the clocks completed) here, replaced "
              "atomically at each new epoch: how tether-launch --elastic_schedule follows the job's progress");
DEFINE_bool(in_process, false,
            "run the whole job in this process: cluster.num_servers shards and cluster.num_workers workers "
            "as threads over inproc:// (one host; see local/local_job.h); excludes --rank and "
            "--server_addresses");

namespace {
// SIGTERM/SIGINT ask the worker to leave gracefully: it finishes the current
// minibatch, or gives up the wait it is blocked in (within 100 ms, whatever
// it waits on), says BYE to every shard it can reach (the servers stop
// counting it at once; at most a second), and exits with 128 + the signal
// (130, 143), since the job did not finish with it. A second
// stop signal a second or more after the first exits at once with 128 + the
// signal, even from a blocked wait. (One within a second is the same
// request: tether-launch signals both its process group and each child.)
std::atomic<bool> g_stop{false};

// The job's table names in table order (the /metrics table label).
std::vector<std::string> TableNames(const tether::JobConfig& config) {
  std::vector<std::string> names;
  for (const tether::TableSpec& t : tether::TablesForJob(config)) names.push_back(t.name());
  return names;
}

std::atomic<int> g_signal{0};
std::atomic<int64_t> g_first_stop_ms{0};
int64_t MonotonicMs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);  // async-signal-safe
  return int64_t{ts.tv_sec} * 1000 + ts.tv_nsec / 1000000;
}
// The paths this run writes, checked before it trains (exit 2): a path
// found bad at the end would lose the run's results.
// The files this run reads (--config, --flagfile, the data, the checkpoint
// of --resume_from), which no output may be.
std::vector<tether::NamedInput> RunInputs(const tether::JobConfig& c) {
  std::string config_path, flagfile;
  gflags::GetCommandLineOption("config", &config_path);
  gflags::GetCommandLineOption("flagfile", &flagfile);
  return tether::JobInputs(config_path, flagfile, c, FLAGS_resume_from);
}

tether::Status CheckOutputs(const tether::JobConfig& c) {
  const std::vector<tether::NamedInput> inputs = RunInputs(c);
  if (!FLAGS_model_out.empty())
    TETHER_RETURN_IF_ERROR(tether::CheckWritableFile(FLAGS_model_out, "flag --model_out", false));
  TETHER_RETURN_IF_ERROR(tether::CheckOutputs(
      {{"flag --metrics_out", FLAGS_metrics_out}, {"flag --model_out", FLAGS_model_out}}, inputs));
  // As tether-launch: an existing file there is an earlier run's metrics
  // JSON, never a file of the user's (launch/old_metrics.h).
  if (!FLAGS_metrics_out.empty())
    TETHER_RETURN_IF_ERROR(tether::CheckMetricsOutReplaceable(FLAGS_metrics_out, "flag --metrics_out"));
  if (!c.train().metrics_dir().empty()) {
    TETHER_RETURN_IF_ERROR(tether::CheckWritableDir(c.train().metrics_dir(), "train.metrics_dir (--metrics_dir)"));
    if (!FLAGS_in_process)
      TETHER_RETURN_IF_ERROR(tether::MetricsLog::CheckPath(c.train().metrics_dir(), "worker", FLAGS_rank, inputs));
  }
  return tether::Status::OK();
}

void RequestStop(int sig) {
  const int64_t now = MonotonicMs();
  if (g_stop.exchange(true)) {
    if (now - g_first_stop_ms.load() >= 1000) _exit(128 + sig);  // async-signal-safe
    return;
  }
  g_first_stop_ms.store(now);
  g_signal.store(sig);
}
int ExitCode(const std::string& who, const tether::StatusOr<tether::TrainReport>& report,
             const tether::JobConfig& config, bool input_refused);
// The flags an in-process job cannot take; false (logged) when one is given.
bool InProcessFlagsValid(const char* who) {
  for (const char* flag : {"metrics_port", "metrics_port_file", "metrics_sd_file"}) {
    if (!gflags::GetCommandLineFlagInfoOrDie(flag).is_default) {
      LOG(ERROR) << who << "flag --" << flag << " is not served by an in-process job: run servers and workers "
                 << "as processes (tether-launch --transport tcp, or by hand) for /metrics";
      return false;
    }
  }
  for (const std::string& f : tether::OverrideFlagsSet()) {
    if (const std::string why = tether::InProcessIgnores(f.substr(2, f.find('=') - 2)); !why.empty()) {
      LOG(ERROR) << who << "flag " << f << " is not read by an in-process job: " << why;
      return false;
    }
  }
  for (const char* flag : {"rank", "server_addresses"}) {
    if (!gflags::GetCommandLineFlagInfoOrDie(flag).is_default) {
      LOG(ERROR) << who << "flag --" << flag << " cannot be combined with --in_process (every rank and shard "
                 << "runs in this process)";
      return false;
    }
  }
  return true;
}
int RunInProcess() {
  const char* who = "[in-process job] ";
  if (!InProcessFlagsValid(who)) return 2;
  auto config = tether::LoadConfigFromFlags("in-process job");
  if (!config.ok()) {
    LOG(ERROR) << who << config.status().message();
    return 2;
  }
  // The model's checks here too (RunLocalJob runs them again), where the
  // config file's lines are known.
  tether::Status checked = tether::ValidateModelConfig(*config);
  if (checked.ok()) checked = tether::CheckDataFilesExist(*config);
  if (checked.ok()) checked = tether::ValidateInProcessJob(*config);
  if (!checked.ok()) {
    LOG(ERROR) << who << tether::NameConfigFieldSource(checked).message();
    return 2;
  }
  // The paths before the resume: an output inside the checkpoint is named
  // as that, whatever else the resume would refuse.
  if (tether::Status st = tether::CheckCheckpointPaths(config->checkpoint().dir(), FLAGS_resume_from);
      !st.ok() || !(st = CheckOutputs(*config)).ok()) {
    LOG(ERROR) << who << st.message();
    return 2;
  }
  if (checked = tether::CheckResumeConfig(*config, FLAGS_resume_from); !checked.ok()) {
    LOG(ERROR) << who << tether::NameConfigFieldSource(checked).message();
    return 2;
  }
  LOG(INFO) << who << config->cluster().num_servers() << " shard(s) and " << config->cluster().num_workers()
            << " worker(s) as threads of this process, over inproc://";
  tether::InstallStopSignals(RequestStop);  // SIGTERM, SIGINT, SIGHUP, SIGUSR1/2, SIGXCPU, SIGPWR
  tether::LocalJobOptions options;
  options.metrics_out = FLAGS_metrics_out;
  options.resume_from = FLAGS_resume_from;
  options.inputs = RunInputs(*config);
  options.stop = &g_stop;
  tether::TrainedModel model;
  if (!FLAGS_model_out.empty()) options.model_out = &model;
  bool input_refused = false;
  options.input_refused = &input_refused;
  auto report = tether::RunLocalJob(*config, options);
  if (!report.ok()) {
    // Errors from the client already carry the "[worker R] " prefix.
    const std::string& msg = report.status().message();
    LOG(ERROR) << (msg.rfind(who, 0) == 0 ? "" : who) << msg;
    if (input_refused) {
      LOG(ERROR) << who << "the input data is bad (the error above names the file and what is wrong in it): exit "
                 << tether::kExitBadInput;
      return tether::kExitBadInput;
    }
    return 1;
  }
  if (report->left_early) {
    LOG(WARNING) << who << "stopped before the end of training by signal " << g_signal.load();
    return 128 + g_signal.load();
  }
  if (!FLAGS_model_out.empty()) {
    const tether::Status st = tether::ExportModel(model, FLAGS_model_out,
                                                  tether::ModelFileFormatForPath(FLAGS_model_out), true);
    if (!st.ok()) {
      LOG(ERROR) << who << "--model_out: " << st.message();
      return 1;
    }
  }
  if (const tether::RunVerdict verdict = tether::JudgeReport(*report, *config); verdict.exit_code != 0) {
    LOG(ERROR) << who << verdict.why;
    return verdict.exit_code;
  }
  return 0;
}

}  // namespace

namespace {

// Checkpoint paths as the servers must see them: the servers write where
// this worker's CHECKPOINT says and read the checkpoint its HELLO names, so
// relative paths (which each server would resolve against its own working
// directory) go out absolute.
void MakeCheckpointPathsAbsolute(const std::string& who, tether::JobConfig* config) {
  if (const std::string& d = config->checkpoint().dir(); !d.empty() && d.front() != '/') {
    const std::string abs = tether::AbsoluteCheckpointPath(d);
    LOG(INFO) << who << "checkpoint.dir " << d << " is relative: " << abs << " (this worker's working directory)";
    config->mutable_checkpoint()->set_dir(abs);
  }
  if (!FLAGS_resume_from.empty() && FLAGS_resume_from.front() != '/')
    FLAGS_resume_from = tether::AbsoluteCheckpointPath(FLAGS_resume_from);
}

// The config and the flags checked before anything connects. The exit
// code when the worker must not start (logged), else 0.
int LoadAndCheck(const std::string& who, tether::StatusOr<tether::JobConfig>* config) {
  if (!FLAGS_model_out.empty()) {
    // Only the in-process job sees the shards' tables at its end; a job of
    // several processes exports from a checkpoint (tether-export).
    LOG(ERROR) << who << "--model_out needs --in_process (one process); for a job of several processes, "
               << "export a checkpoint with tether-export";
    return 2;
  }
  *config = tether::LoadConfigFromFlags("worker " + std::to_string(FLAGS_rank));
  if (!config->ok()) {
    LOG(ERROR) << who << config->status().message();
    return 2;
  }
  const tether::JobConfig& c = **config;
  if (tether::Status st = tether::CheckWorkerRank(c, FLAGS_rank, tether::RowsDealtOnDemand(c)); !st.ok()) {
    LOG(ERROR) << who << "flag --rank=" << FLAGS_rank << ": " << st.message();
    return 2;
  }
  // The model's checks here too (the trainer runs them again), where the
  // config file's lines are known.
  tether::Status st = tether::NameConfigFieldSource(tether::ValidateModelConfig(c));
  if (st.ok()) st = tether::NameConfigFieldSource(tether::CheckDataFilesExist(c));
  if (st.ok()) st = tether::CheckCheckpointPaths(c.checkpoint().dir(), FLAGS_resume_from);
  if (st.ok()) st = CheckOutputs(c);
  if (!st.ok()) {
    LOG(ERROR) << who << st.message();
    return 2;
  }
  // Only the evaluator writes the metrics JSON (docs/RUNNING.md, "Who
  // evaluates"): the flag is right on every worker of a job where rank 0
  // may leave and the job goes on (data on demand: tether-launch gives it
  // to every worker), but said here for any other, since this rank alone
  // writes nothing.
  if (!FLAGS_metrics_out.empty() && FLAGS_rank > 0 && !tether::RowsDealtOnDemand(c))
    LOG(WARNING) << who << "flag --metrics_out=" << FLAGS_metrics_out << ": worker " << FLAGS_rank
                 << " writes it only if it evaluates at the end; the evaluator is rank 0, or the lowest rank "
                 << "still in the job when rank 0 left: give --metrics_out to rank 0 as well";
  MakeCheckpointPathsAbsolute(who, &**config);
  return 0;
}

// --resume_if_present: the latest complete checkpoint under checkpoint.dir
// into options->resume_from when there is one. The exit code on a bad flag
// (logged), else 0.
int ResumeIfPresent(const std::string& who, const tether::JobConfig& config, tether::TrainerOptions* options) {
  if (!FLAGS_resume_if_present) return 0;
  if (!FLAGS_resume_from.empty()) {
    LOG(ERROR) << who << "--resume_if_present and --resume_from exclude each other";
    return 2;
  }
  if (config.checkpoint().dir().empty()) {
    LOG(ERROR) << who << "--resume_if_present needs checkpoint.dir (--checkpoint_dir): where to look for one";
    return 2;
  }
  if (auto latest = tether::ResolveCheckpoint(config.checkpoint().dir()); latest.ok()) {
    LOG(INFO) << who << "--resume_if_present: resuming from " << *latest;
    options->resume_from = *latest;
  } else {
    LOG(INFO) << who << "--resume_if_present: no complete checkpoint under " << config.checkpoint().dir()
              << "; starting afresh";
  }
  return 0;
}

// The job's rendezvous (cluster.rendezvous, non-empty). With
// security.curve the store admits key holders only: this worker reaches it
// with its own key pair, as it reaches the servers. Null, with `*code` the
// exit code, when it cannot be opened (logged).
std::shared_ptr<tether::Rendezvous> OpenRendezvous(const std::string& who, const tether::JobConfig& config,
                                                   int* code) {
  const std::string& spec = config.cluster().rendezvous();
  tether::SocketOptions rendezvous_socket_options;
  if (config.security().has_curve() && spec.rfind("tcp://", 0) == 0) {
    auto curve = tether::RendezvousCurveClient(config.security().curve(), /*as_server=*/false);
    if (!curve.ok()) {
      LOG(ERROR) << who << "rendezvous: " << curve.status().message();
      *code = 1;
      return nullptr;
    }
    rendezvous_socket_options.curve = *curve;
  }
  auto rdzv = tether::Rendezvous::Open(spec, rendezvous_socket_options);
  if (!rdzv.ok()) {
    LOG(ERROR) << who << rdzv.status().message();
    *code = 2;
    return nullptr;
  }
  return std::shared_ptr<tether::Rendezvous>(std::move(*rdzv));
}

// With replicated shards, a worker whose view of a shard's chain ran out
// finds the process that claimed the shard in the rendezvous, where it
// publishes its port (worker/client/claim_lookup.h). Exit code as
// OpenRendezvous's (`rdzv` null: opened here).
int AddClaimLookup(const std::string& who, const tether::JobConfig& config, std::shared_ptr<tether::Rendezvous> rdzv,
                   tether::TrainerOptions* options) {
  if (config.cluster().replicas() <= 0 || config.cluster().rendezvous().empty()) return 0;
  int code = 0;
  if (rdzv == nullptr && (rdzv = OpenRendezvous(who, config, &code)) == nullptr) return code;
  tether::ClaimLookup::Options claim_options;
  claim_options.source = "rendezvous " + config.cluster().rendezvous();
  claim_options.log_prefix = who;
  options->claim_lookup = std::make_shared<tether::ClaimLookup>(
      config.cluster().num_servers(),
      tether::ReadServerEntry(std::move(rdzv), tether::JobId(config), config.cluster().generation()), claim_options);
  return 0;
}

// The servers from the rendezvous, where they publish their endpoints once
// bound (core/net/rendezvous.h). The exit code when they cannot be found
// (logged), else 0.
int LookUpServers(const std::string& who, const tether::JobConfig& config, tether::TrainerOptions* options) {
  const std::string& spec = config.cluster().rendezvous();
  int code = 0;
  std::shared_ptr<tether::Rendezvous> rdzv = OpenRendezvous(who, config, &code);
  if (rdzv == nullptr) return code;
  const std::string job_id = tether::JobId(config);
  LOG(INFO) << who << "looking up " << config.cluster().num_servers() << " server(s) of job '" << job_id
            << "' generation " << config.cluster().generation() << " in rendezvous " << spec << " (up to "
            << config.cluster().startup_timeout_ms() << " ms, cluster.startup_timeout_ms)";
  auto found = tether::LookupServers(rdzv.get(), job_id, config.cluster().generation(),
                                     config.cluster().num_servers(), config.cluster().startup_timeout_ms(),
                                     [] { return g_stop.load(); });
  if (!found.ok()) {
    if (const int sig = g_signal.load(); sig != 0) {
      LOG(WARNING) << who << "stopped by signal " << sig << " while looking up the servers: exit " << 128 + sig;
      return 128 + sig;
    }
    LOG(ERROR) << who << found.status().message();
    return 1;
  }
  options->servers = *found;
  options->servers_source = "rendezvous " + spec;
  std::string list;
  for (const auto& ep : options->servers) list += (list.empty() ? "" : ",") + ep;
  LOG(INFO) << who << "servers from the rendezvous: " << list;
  // An entry may be stale (a server of an earlier run that died): while a
  // shard waits for its connection, its entry is read again, so that the
  // real server, publishing later, is found (core/net/server_lookup.h).
  tether::ServerLookup::Options lookup_options;
  lookup_options.source = options->servers_source;
  lookup_options.log_prefix = who;
  options->server_lookup = std::make_shared<tether::ServerLookup>(
      options->servers, tether::ReadServerEntry(rdzv, job_id, config.cluster().generation()), lookup_options);
  return AddClaimLookup(who, config, std::move(rdzv), options);
}

// The servers' endpoints in shard order: --server_addresses, else
// cluster.server_addresses, else the rendezvous. The exit code when there
// are none or not cluster.num_servers (logged), else 0.
int FindServers(const std::string& who, const tether::JobConfig& config, tether::TrainerOptions* options) {
  if (!FLAGS_server_addresses.empty()) {
    std::stringstream ss(FLAGS_server_addresses);
    std::string ep;
    while (std::getline(ss, ep, ',')) options->servers.push_back(ep);
  } else if (config.cluster().server_addresses_size() > 0) {
    options->servers.assign(config.cluster().server_addresses().begin(), config.cluster().server_addresses().end());
  } else if (!config.cluster().rendezvous().empty()) {
    if (const int code = LookUpServers(who, config, options); code != 0) return code;
  } else {
    LOG(ERROR) << who << "no servers: give --server_addresses, cluster.server_addresses, or --rendezvous "
               << "(docs/DEPLOY.md)";
    return 2;
  }
  if (static_cast<int>(options->servers.size()) != config.cluster().num_servers()) {
    LOG(ERROR) << who << "flag --server_addresses has " << options->servers.size()
               << " endpoint(s) but cluster.num_servers is " << config.cluster().num_servers();
    return 2;
  }
  const std::string source = !FLAGS_server_addresses.empty()              ? "flag --server_addresses"
                             : config.cluster().server_addresses_size() > 0 ? "config field cluster.server_addresses"
                                                                            : "the rendezvous";
  for (const std::string& ep : options->servers)
    if (tether::Status st = tether::CheckEndpoint(ep, source, tether::EndpointUse::kConnect); !st.ok()) {
      LOG(ERROR) << who << st.message();
      return 2;
    }
  // The rendezvous is left out: an entry may be stale and is read again.
  if (source != "the rendezvous")
    if (tether::Status st = tether::CheckDistinctEndpoints(options->servers, source); !st.ok()) {
      LOG(ERROR) << who << st.message();
      return 2;
    }
  // Servers given by address, the job's rendezvous still holds the port of
  // a process that claims a replicated shard.
  if (options->claim_lookup == nullptr) return AddClaimLookup(who, config, nullptr, options);
  return 0;
}

// --progress_file: one small file per new epoch (not per clock), "EPOCH
// CLOCK", replaced atomically; a reader polls it.
void WriteProgressFile(const std::string& who, tether::TrainerOptions* options) {
  auto metrics = std::move(options->on_progress);
  options->on_progress = [metrics, last_epoch = 0, who](const tether::WorkerProgress& p) mutable {
    if (metrics) metrics(p);
    if (p.epoch == last_epoch) return;
    last_epoch = p.epoch;
    tether::Status st = [&]() -> tether::Status {
      TETHER_ASSIGN_OR_RETURN(tether::AtomicFile f, tether::AtomicFile::Create(FLAGS_progress_file));
      TETHER_RETURN_IF_ERROR(f.Append(std::to_string(p.epoch) + " " + std::to_string(p.clock) + "\n"));
      return f.Commit();
    }();
    if (!st.ok()) LOG(WARNING) << who << "--progress_file: " << st.message();
  };
}

}  // namespace

int main(int argc, char** argv) {
  tether::ParseFlagsOrDie(&argc, &argv,
                          {"tether-worker --config=JOB.pbtxt --rank=R (--server_addresses=tcp://H:P,... | "
                           "--rendezvous=file:DIR|tcp://HOST:PORT) [--metrics_out=FILE] [--resume_if_present]\n"
                           "   or: tether-worker --config=JOB.pbtxt --in_process [--metrics_out=FILE] [--model_out=MODEL.safetensors]\n"
                           "One trainer of a job, or (--in_process) the whole job as threads of one process."});
  if (FLAGS_in_process) return RunInProcess();
  const std::string who = "[worker " + std::to_string(FLAGS_rank) + "] ";
  tether::StatusOr<tether::JobConfig> config = tether::Status::Internal("not loaded");
  if (const int code = LoadAndCheck(who, &config); code != 0) return code;
  tether::TrainerOptions options;
  options.rank = FLAGS_rank;
  options.metrics_out = FLAGS_metrics_out;
  options.resume_from = FLAGS_resume_from;
  options.inputs = RunInputs(*config);
  if (const int code = ResumeIfPresent(who, *config, &options); code != 0) return code;
  // A resume the config cannot make is refused before the data is read:
  // exit 2, which no restart cures (tether-launch does not restart it).
  if (tether::Status st = tether::CheckResumeConfig(*config, options.resume_from); !st.ok()) {
    LOG(ERROR) << who << st.message();
    return 2;
  }
  tether::InstallStopSignals(RequestStop);  // SIGTERM, SIGINT, SIGHUP, SIGUSR1/2, SIGXCPU, SIGPWR
  if (const int code = FindServers(who, *config, &options); code != 0) return code;
  // /metrics (--metrics_port): the training thread publishes its progress
  // every clock; a scrape renders the latest copy. Null when --metrics_port
  // is -1 (the flags are still checked).
  tether::PublishedSnapshot<tether::WorkerMetricsSnapshot> published;
  const std::string job = tether::JobId(*config);
  auto endpoint = tether::StartMetricsEndpointFromFlags(
      who, {job, "worker", "rank", FLAGS_rank},
      [&published, job, rank = FLAGS_rank] { return tether::RenderWorkerMetrics(published.Get(), job, rank); },
      RunInputs(*config));
  if (!endpoint.ok()) {
    LOG(ERROR) << who << endpoint.status().message();
    return 2;
  }
  const tether::MetricsTargetWithdrawal withdrawal(who, endpoint->get());  // at every exit from here
  if (*endpoint != nullptr)
    options.on_progress = [&published, tables = TableNames(*config)](const tether::WorkerProgress& p) {
      published.Publish({true, p, tables});
    };
  if (!FLAGS_progress_file.empty()) WriteProgressFile(who, &options);
  options.stop_requested = [] { return g_stop.load(); };
  bool input_refused = false;
  options.input_refused = &input_refused;
  auto report = tether::RunWorker(*config, options);
  if (*endpoint != nullptr) {
    tether::WorkerMetricsSnapshot last = published.Get();
    last.running = false;
    published.Publish(std::move(last));
  }
  const int code = ExitCode(who, report, *config, input_refused);
  // A stop signal ends the process at once; one during the linger only cuts
  // the linger short (the job's exit code stands).
  if (g_signal.load() == 0) tether::LingerForScrapes(who, endpoint->get(), g_signal);
  return code;
}

namespace {
int ExitCode(const std::string& who, const tether::StatusOr<tether::TrainReport>& report,
             const tether::JobConfig& config, bool input_refused) {
  if (!report.ok()) {
    // Errors from the client already carry the "[worker R] " prefix.
    const std::string& msg = report.status().message();
    if (const int sig = g_signal.load(); sig != 0 && tether::CutShortByStop(msg)) {
      // Stopped before it had joined (HELLO cut short): nothing to say BYE to.
      LOG(WARNING) << (msg.rfind(who, 0) == 0 ? "" : who) << msg << " (stopped by signal " << sig
                   << " before joining the job): exit " << 128 + sig;
      return 128 + sig;
    } else if (sig != 0) {
      // It failed (a shard gone) and the stop came after, as a launcher
      // stops the job's other processes: the failure is the news.
      LOG(ERROR) << (msg.rfind(who, 0) == 0 ? "" : who) << msg << " (signal " << sig
                 << " came after it failed): exit " << 128 + sig;
      return 128 + sig;
    }
    LOG(ERROR) << (msg.rfind(who, 0) == 0 ? "" : who) << msg;
    if (input_refused) {
      // No restart reads other data: the launcher does not restart this.
      LOG(ERROR) << who << "the input data is bad (the error above names the file and what is wrong in it): exit "
                 << tether::kExitBadInput;
      return tether::kExitBadInput;
    }
    return 1;
  }
  if (report->left_early && g_signal.load() == 0 && report->stopped_by_shard >= 0) {
    // A server was told to stop (SIGTERM, a preempted node): the job stops
    // as on this worker's own SIGTERM, with its exit code.
    LOG(WARNING) << who << "left the job before the end of training (server shard " << report->stopped_by_shard
                 << " was told to stop)"
                 << (report->last_checkpoint.empty() ? std::string()
                                                      : "; resume with --resume_from=" + config.checkpoint().dir())
                 << ": exit " << 128 + SIGTERM;
    return 128 + SIGTERM;
  }
  if (report->left_early) {
    const int sig = g_signal.load();
    LOG(WARNING) << who << "left the job before the end of training (stop requested by signal " << sig
                 << "): exit " << 128 + sig;
    return 128 + sig;
  }
  if (const tether::RunVerdict verdict = tether::JudgeReport(*report, config); verdict.exit_code != 0) {
    LOG(ERROR) << who << verdict.why;
    return verdict.exit_code;
  }
  return 0;
}
}  // namespace
