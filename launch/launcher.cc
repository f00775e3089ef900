#include "launch/launcher.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glog/logging.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "core/net/endpoint_check.h"
#include "launch/claim_watch.h"
#include "launch/elastic_run.h"
#include "launch/failure_cause.h"
#include "launch/failure_metrics.h"
#include "launch/job_summary.h"
#include "launch/launch_events.h"
#include "launch/port_file.h"
#include "launch/process_table.h"
#include "launch/server_deaths.h"
#include "launch/launcher_run.h"
#include "launch/old_metrics.h"
#include "launch/temp_dir.h"
#include "launch/unrestartable.h"
#include "replication/chain_view.h"
#include "worker/trainer.h"

namespace tether {
namespace launch_run {

Launcher::~Launcher() {
  // Run() tears down on every path; this is the last line of defence for the
  // process group if a future early return forgets to.
  if (Live() > 0 && !torn_down_) Teardown("launcher exiting");
  if (devnull_fd_ >= 0) close(devnull_fd_);
  if (!tmp_dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(tmp_dir_, ec);
    if (ec) LOG(WARNING) << "[launch] could not remove " << tmp_dir_ << ": " << ec.message();
  }
}

Status Launcher::Setup() {
  start_ = Clock::now();
  deadline_ = start_ + options_.timeout;
  next_status_ = start_ + kStatusEvery;
  TETHER_RETURN_IF_ERROR(events_.Open());
  devnull_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (devnull_fd_ < 0) return Status::IOError(ErrnoText("/dev/null"));
  table_ = std::make_unique<ProcessTable>(options_.bin_dir, devnull_fd_);

  TETHER_ASSIGN_OR_RETURN(tmp_dir_, MakeLaunchTempDir());
  elastic_ = ElasticRun(options_.elastic, options_.num_workers, tmp_dir_);
  events_.Watch(tmp_dir_, kPortFilePoll);

  for (const char* binary : {"tether-server", "tether-worker"}) {
    const std::string path = options_.bin_dir + "/" + binary;
    if (access(path.c_str(), X_OK) != 0) return Status::NotFound(ErrnoText(path + " (expected next to tether-launch)"));
  }
  // A file left by an earlier run must not pass for this run's metrics; only
  // such a file is removed (launch/old_metrics.h).
  if (!options_.metrics_out.empty())
    TETHER_RETURN_IF_ERROR(RemoveOldMetrics(options_.metrics_out, "flag --metrics_out"));
  return Status::OK();
}

Status Launcher::StartChild(const std::string& role, int index, const std::string& binary,
                            std::vector<std::string> args) {
  return table_->Start(role, index, binary, std::move(args));
}

void Launcher::PrintStatusLine() {
  // Straight to stderr rather than through glog: a progress line, meant to be
  // seen whatever the log settings, between the children's own log lines.
  if (options_.transport == "inproc") {
    std::fprintf(stderr, "[launch] %s elapsed, %s: one process (%d worker(s), %d server(s) as threads) %s\n",
                 FormatDuration(Clock::now() - start_).c_str(), phase_.c_str(), options_.num_workers,
                 options_.num_servers, Live() > 0 ? "live" : "exited");
  } else {
    const std::string replacements =
        server_deaths_ && server_deaths_->replacements_started() > 0
            ? ", replacements " + std::to_string(Live("replacement")) + "/" +
                  std::to_string(server_deaths_->replacements_started()) + " live"
            : std::string();
    std::fprintf(stderr, "[launch] %s elapsed, %s: workers %d/%d live, servers %d/%d live%s\n",
                 FormatDuration(Clock::now() - start_).c_str(), phase_.c_str(), Live("worker"), options_.num_workers,
                 Live("server"), options_.num_servers, replacements.c_str());
  }
  std::fflush(stderr);
}

void Launcher::Pump(Clock::time_point until) {
  const Clock::time_point now = Clock::now();
  Clock::time_point wake = std::min(until, next_status_);
  if (!events_.watching() && (phase_ == "servers starting" || elastic_.pending()))
    wake = std::min(wake, now + kPortFilePoll);  // port and progress files
  const long timeout_ms =
      wake <= now ? 0 : static_cast<long>(std::chrono::ceil<std::chrono::milliseconds>(wake - now).count());
  events_.Wait(timeout_ms);
  table_->ReapExited();
  if (Clock::now() >= next_status_) {
    PrintStatusLine();
    next_status_ = Clock::now() + kStatusEvery;
  }
}

void Launcher::Teardown(const std::string& why) {
  if (failure_.empty()) failure_ = why;
  if (Live() == 0) return;
  const std::string old_phase = phase_;
  phase_ = "tearing down";
  const auto worker_grace = std::max(kWorkerStopGrace, options_.worker_stop_grace);
  LOG(WARNING) << "[launch] " << why << ": stopping " << Live() << " child process(es) (SIGTERM to the workers, "
               << "then after at most " << worker_grace.count() << " s to the servers, then SIGKILL after at most "
               << kServerStopGrace.count() << " s more)";
  events_.reset_escalate();
  // Workers first: a worker stopped gracefully says BYE, and a server that
  // went first would leave it waiting on a dead shard.
  const auto stop = [this](const std::vector<std::string>& roles, std::chrono::seconds grace) {
    const auto live = [&] {
      int n = 0;
      for (const std::string& role : roles) n += Live(role);
      return n;
    };
    if (events_.escalate() || live() == 0) return;
    for (const std::string& role : roles) table_->Terminate(role);
    const Clock::time_point grace_end = Clock::now() + grace;
    while (live() > 0 && !events_.escalate() && Clock::now() < grace_end) Pump(grace_end);
  };
  stop({"worker"}, worker_grace);
  stop({"server", "replacement"}, kServerStopGrace);
  if (Live() > 0) {
    std::string names;
    for (const auto& c : table_->children())
      if (c.running) names += " " + c.Name();
    LOG(WARNING) << "[launch] " << (events_.escalate() ? "second stop signal" : "still running after SIGTERM")
                 << "; sending SIGKILL to:" << names;
    table_->SignalAll(SIGKILL);
    const Clock::time_point kill_end = Clock::now() + kKillWait;
    while (Live() > 0 && Clock::now() < kill_end) Pump(kill_end);
  }
  for (const auto& c : table_->children())
    if (c.running) LOG(ERROR) << "[launch] " << c.Name() << " did not die after SIGKILL; giving up on it";
  phase_ = old_phase;
  torn_down_ = true;
}

std::optional<int> Launcher::StopBeforeSpawn(const std::string& what) {
  // A spawning loop never waits in Pump: without this look at the pending
  // signals a stop would wait for every child of a large job to start.
  events_.Wait(0);
  return Interrupted("starting " + what);
}

std::optional<int> Launcher::Interrupted(const std::string& phase) {
  if (const int sig = events_.stop_signal(); sig != 0) {
    Teardown(std::string("interrupted by ") + strsignal(sig) + " while " + phase);
    return 128 + sig;
  }
  if (Clock::now() >= deadline_) {
    const std::string timed_out =
        "timed out after " + std::to_string(options_.timeout.count()) + " s (--timeout_s) while " + phase;
    LOG(ERROR) << "[launch] job " << timed_out;
    Teardown(timed_out);
    return 124;
  }
  return std::nullopt;
}

void Launcher::AddMetricsFlags(const std::string& role, int index, std::vector<std::string>* args) const {
  if (options_.metrics_port < 0) return;
  const int offset = role == "server" ? index : options_.num_servers + index;
  // A replacement takes a free port: the fixed ones are the job's first processes'.
  const bool free_port = options_.metrics_port == 0 || role == "replacement";
  args->push_back("--metrics_port=" + std::to_string(free_port ? 0 : options_.metrics_port + offset));
  if (!options_.metrics_sd_dir.empty())
    args->push_back("--metrics_sd_file=" + options_.metrics_sd_dir + "/" + options_.metrics_sd_prefix + "-" + role +
                    "-" + std::to_string(index) + ".json");
}

std::vector<std::string> Launcher::WorkerArgs(int rank) const {
  std::vector<std::string> args = {"--config=" + options_.config_path, "--rank=" + std::to_string(rank),
                                   kChildLogConfig};
  // With replicas the workers look the servers up in the rendezvous: a
  // shard whose primary died before a worker reached it is published there
  // by the copy that claimed it, which the port files never name.
  if (options_.replicas == 0)
    args.push_back("--server_addresses=" + server_addresses_);
  else if (!rendezvous_flag_.empty())
    args.push_back(rendezvous_flag_);
  // Elastic: the evaluator is the lowest rank still there at the end (rank
  // 0 unless it left), so every worker is told where the metrics go; only
  // the evaluator writes them.
  if (!options_.metrics_out.empty() && (rank == 0 || !options_.elastic.empty() || options_.data_on_demand))
    args.push_back("--metrics_out=" + options_.metrics_out);
  if (elastic_.enabled()) args.push_back("--progress_file=" + elastic_.ProgressFile(rank));
  AddMetricsFlags("worker", rank, &args);
  args.insert(args.end(), options_.forwarded.begin(), options_.forwarded.end());
  return args;
}

std::optional<int> Launcher::StartServers() {
  if (options_.replicas > 0) {
    LOG(INFO) << "[launch] cluster.replicas=" << options_.replicas << ": a server process that dies is survived "
              << "while every shard has a live holder; "
              << (options_.max_replacements > 0
                      ? "a shard whose chain a death left short gets a replacement process per replica it "
                        "lacks, at most " +
                            std::to_string(options_.max_replacements) + " over the job (--max_replacements)"
                      : std::string("no replacement process is started (--max_replacements=0)"));
    server_deaths_.emplace(options_.num_servers, options_.replicas);
    if (!options_.config_rendezvous) {
      const std::string dir = tmp_dir_ + "/rendezvous";
      std::error_code ec;
      std::filesystem::create_directory(dir, ec);
      if (ec) {
        LOG(ERROR) << "[launch] cannot make " << dir << ": " << ec.message();
        Teardown("could not start the servers");
        return 1;
      }
      rendezvous_flag_ = "--rendezvous=file:" + dir;
    }
  }
  for (int i = 0; i < options_.num_servers; ++i) {
    if (auto code = StopBeforeSpawn("server " + std::to_string(i))) return code;
    const std::string listen = options_.transport == "ipc"
                                   ? "ipc://" + tmp_dir_ + "/server_" + std::to_string(i) + ".ipc"
                                   : std::string("tcp://127.0.0.1:0");
    // A socket path too long for a Unix socket address (a long TMPDIR) is
    // refused here, with the fix, rather than by each server's bind.
    if (Status st = CheckEndpoint(listen, "--transport=ipc (under TMPDIR)", EndpointUse::kBind); !st.ok()) {
      LOG(ERROR) << "[launch] " << st.message();
      Teardown("could not start server " + std::to_string(i));
      return 2;
    }
    std::vector<std::string> args = {"--config=" + options_.config_path, "--shard=" + std::to_string(i),
                                     "--listen=" + listen, kChildLogConfig,
                                     "--port_file=" + tmp_dir_ + "/server_" + std::to_string(i) + ".port"};
    if (!rendezvous_flag_.empty()) args.push_back(rendezvous_flag_);
    AddMetricsFlags("server", i, &args);
    args.insert(args.end(), options_.forwarded.begin(), options_.forwarded.end());
    if (Status st = StartChild("server", i, "tether-server", std::move(args)); !st.ok()) {
      LOG(ERROR) << "[launch] " << st.ToString();
      Teardown("could not start server " + std::to_string(i));
      return 1;
    }
  }
  return std::nullopt;
}

std::optional<int> Launcher::WaitForPortFiles(std::vector<std::string>* endpoints) {
  phase_ = "servers starting";
  endpoints->assign(options_.num_servers, "");
  const Clock::time_point port_deadline = std::min(deadline_, Clock::now() + kPortFileWait);
  while (true) {
    int missing = 0;
    for (int i = 0; i < options_.num_servers; ++i) {
      if (!(*endpoints)[i].empty()) continue;
      auto ep = ReadPortFile(tmp_dir_ + "/server_" + std::to_string(i) + ".port");
      if (!ep.ok()) {
        LOG(ERROR) << "[launch] server " << i << ": " << ep.status().message();
        Teardown("bad port file");
        return 1;
      }
      if (ep->has_value()) {
        (*endpoints)[i] = **ep;
        // The server logs its own "listening on" line; this one is for --v=1.
        VLOG(1) << "[launch] server " << i << " listening on " << (*endpoints)[i];
      } else {
        ++missing;
      }
    }
    // Any exit before the job runs is a failure, even with code 0.
    if (Child* c = table_->NextExited()) {
      LOG(ERROR) << "[launch] " << c->Name() << " " << c->HowItEnded() << " before the job started";
      Teardown(c->Name() + " failed");
      return 1;
    }
    if (missing == 0) return std::nullopt;
    if (auto code = Interrupted("waiting for servers")) return code;
    if (Clock::now() >= port_deadline) {
      LOG(ERROR) << "[launch] " << missing << " server(s) did not write their port file within "
                 << kPortFileWait.count() << " s";
      Teardown("servers did not start");
      return 1;
    }
    Pump(port_deadline);
  }
}

std::optional<int> Launcher::StartWorkers() {
  std::vector<std::string> endpoints;
  if (auto code = WaitForPortFiles(&endpoints)) return code;
  std::string addresses;
  for (const auto& ep : endpoints) addresses += (addresses.empty() ? "" : ",") + ep;
  for (auto& c : table_->children())
    if (c.role == "server") c.endpoint = endpoints[c.index];
  server_addresses_ = addresses;
  WatchClaims();
  for (int r = 0; r < options_.num_workers; ++r) {
    if (auto code = StopBeforeSpawn("worker " + std::to_string(r))) return code;
    if (Status st = StartChild("worker", r, "tether-worker", WorkerArgs(r)); !st.ok()) {
      LOG(ERROR) << "[launch] " << st.ToString();
      Teardown("could not start worker " + std::to_string(r));
      return 1;
    }
  }
  return std::nullopt;
}

void Launcher::LogFailure(const Child& c) {
  const std::string held = c.role == "worker" || (c.role == "server" && c.endpoint.empty()) ? "" : WhatItHeld(c);
  const std::string what = c.Name() + " " + c.HowItEnded() + (held.empty() ? "" : "; " + held);
  LOG(ERROR) << "[launch] " << what;
  // The first is the cause (Exited logs a signalled cause first): the
  // failure the metrics JSON records.
  if (failed_process_.empty()) failed_process_ = what;
}

EndedProcess Launcher::Judged(const Child& c, bool in_teardown) const {
  EndedProcess p;
  p.name = c.Name();
  p.role = c.role;
  p.wait_status = c.wait_status;
  p.in_teardown = in_teardown;
  return p;
}

int Launcher::JobFailed(const Child& failed) {
  // Those that failed with it: a child killed meanwhile (it is the cause:
  // ProcessTable::AwaitSignalled), the servers held back (kAbortSettle),
  // any other exit reaped and not looked at yet, and a worker stopped by
  // SIGSTOP (it never exits: the servers removed it for silence).
  const Child* signalled = WIFSIGNALED(failed.wait_status) ? nullptr : table_->AwaitSignalled(kCauseSettle);
  std::vector<Child> ended;
  for (const HeldExit& h : held_exits_) ended.push_back(h.child);
  held_exits_.clear();
  if (signalled != nullptr) ended.push_back(*signalled);
  ended.push_back(failed);
  while (Child* other = table_->NextExited())
    if (!other->Succeeded()) ended.push_back(*other);
  std::vector<EndedProcess> judged;
  for (const Child& c : ended) judged.push_back(Judged(c, false));
  for (const Child& c : table_->children()) {
    if (!c.running || c.role != "worker" || c.RunState().rfind("stopped", 0) != 0) continue;
    EndedProcess p = Judged(c, false);
    p.stopped = true;
    judged.push_back(p);
  }
  FailureCause verdict = JudgeFailure(judged);
  const EndedProcess& cause = judged[verdict.cause];
  // A shard no running process holds (its server stopped: SIGSTOP) is
  // what the job failed on, whichever process then exited first on the
  // workers' abort: the failure the metrics JSON records.
  const bool signal_cause = !cause.stopped && WIFSIGNALED(cause.wait_status);
  const std::string stopped_shards = signal_cause || !verdict.why.empty() ? "" : StoppedShardsLost();
  if (!stopped_shards.empty() && failed_process_.empty()) failed_process_ = stopped_shards + " (SIGSTOP)";
  if (cause.stopped) {
    const std::string what = cause.name + " is stopped (SIGSTOP, state T): the servers removed it for silence";
    LOG(ERROR) << "[launch] " << what;
    if (failed_process_.empty()) failed_process_ = what;
  }
  for (const Child& c : ended)
    if (c.Name() == cause.name) LogFailure(c);
  for (const Child& c : ended)
    if (c.Name() != cause.name)
      LOG(ERROR) << "[launch] " << c.Name() << " " << c.HowItEnded() << " as " << cause.name << " failed";
  if (!stopped_shards.empty())
    LOG(ERROR) << "[launch] " << stopped_shards << " (SIGSTOP): " << cause.name << " failed on it";
  Teardown(!stopped_shards.empty() ? stopped_shards
                                   : cause.name + (cause.stopped ? " is stopped (SIGSTOP)" : " failed"));
  if (verdict.why.empty()) {
    // A refusal no restart cures may come out in the teardown: a worker
    // still sending its ABORTs when the servers' exits were judged.
    for (Child& c : table_->children()) {
      if (c.running || c.reported) continue;
      c.reported = true;
      judged.push_back(Judged(c, true));
    }
    verdict = JudgeFailure(judged);
    if (!verdict.why.empty()) {
      const Child* late = nullptr;
      for (const Child& c : table_->children())
        if (c.Name() == judged[verdict.cause].name) late = &c;
      failed_process_.clear();
      if (late != nullptr) LogFailure(*late);
      failure_ = judged[verdict.cause].name + " failed";
    }
  }
  if (!verdict.why.empty()) LOG(ERROR) << "[launch] " << verdict.why;
  return verdict.job_exit;
}

std::optional<int> Launcher::Exited(Child* c) {
  if (superseded_.count(c->pid) > 0) return SupersededEnded(*c);
  if (c->role == "replacement" && NotNeeded(*c)) return std::nullopt;
  if (c->role == "worker" && WIFEXITED(c->wait_status) && WEXITSTATUS(c->wait_status) == kExitDiverged) {
    LOG(WARNING) << "[launch] " << c->Name() << " finished, but its training loss diverged "
                 << "(train.fail_on_divergence): the job will exit " << kExitDiverged;
    diverged_.push_back(c->Name());
    return std::nullopt;
  }
  if (c->role == "worker" && WIFEXITED(c->wait_status) && WEXITSTATUS(c->wait_status) == kExitPartialEval) {
    LOG(WARNING) << "[launch] " << c->Name() << " finished, but its evaluation covered only part of the test set "
                 << "(train.accept_partial_eval is false): the job will exit " << kExitPartialEval;
    partial_eval_.push_back(c->Name());
    return std::nullopt;
  }
  // A scheduled stop: the worker leaves on SIGTERM (exit 143), or dies of
  // it when it came before the worker's handler was in place.
  if (c->leaving && ((WIFEXITED(c->wait_status) && WEXITSTATUS(c->wait_status) == 128 + SIGTERM) ||
                     (WIFSIGNALED(c->wait_status) && WTERMSIG(c->wait_status) == SIGTERM))) {
    LOG(INFO) << "[launch] " << c->Name() << " left the job as scheduled (--elastic_schedule)";
    return std::nullopt;
  }
  if (options_.data_on_demand && c->role == "worker" && WIFSIGNALED(c->wait_status) && Live("worker") > 0) {
    // Its held chunks go to the others once the servers declare it
    // gone (cluster.worker_timeout_ms); every row is still trained.
    LOG(WARNING) << "[launch] " << c->Name() << " " << c->HowItEnded()
                 << ": the job goes on without it (train.data_on_demand: its chunks are dealt again)";
    return std::nullopt;
  }
  // Once every worker finished, nobody needs a dead server's shard: a server
  // failing then failed at its own end (its files), which fails the job.
  if (c->role != "worker" && !c->Succeeded() && Training()) {
    // It ended by itself: if a worker's ABORT told it the job failed, that
    // worker's failure comes within kAbortSettle and is the job's. With
    // replicas, a death that loses a shard is judged at once (the workers
    // fail of it); without, a death by a signal is.
    if (!server_deaths_) {
      if (WIFSIGNALED(c->wait_status)) return JobFailed(*c);
      held_exits_.push_back({*c, Clock::now() + kAbortSettle});
      return std::nullopt;
    }
    ServerDeaths if_dead = *server_deaths_;
    if (WIFSIGNALED(c->wait_status) || !if_dead.Died(c->index).survivable) return ServerDied(*c);
    held_exits_.push_back({*c, Clock::now() + kAbortSettle});
    return std::nullopt;
  }
  if (c->role == "replacement" && ReplacementEnded(*c)) return std::nullopt;
  if (!c->Succeeded()) return JobFailed(*c);
  VLOG(1) << "[launch] " << c->Name() << " finished";
  if (c->role == "worker") elastic_.WorkerFinished();
  return std::nullopt;
}

std::optional<int> Launcher::RunTimers(bool all) {
  const Clock::time_point now = Clock::now();
  while (!held_exits_.empty() && (all || held_exits_.front().judge_at <= now)) {
    const Child child = held_exits_.front().child;
    held_exits_.erase(held_exits_.begin());
    if (!server_deaths_) return JobFailed(child);
    if (auto code = ServerDied(child)) return code;
  }
  for (auto& [pid, kill_at] : left_over_) {
    if (!kill_at || (!all && *kill_at > now)) continue;
    kill_at.reset();
    for (const Child& c : table_->children()) {
      if (c.pid != pid || !c.running) continue;
      LOG(WARNING) << "[launch] " << c.Name() << " still runs " << kServerStopGrace.count()
                   << " s after SIGTERM: SIGKILL";
      kill(pid, SIGKILL);
    }
  }
  if (replacements_at_ && (all || *replacements_at_ <= now)) {
    replacements_at_.reset();
    StartReplacements();
  }
  if (claims_ && claims_->next() <= now) KillSuperseded();
  return std::nullopt;
}

Clock::time_point Launcher::NextWake(Clock::time_point until) const {
  if (!held_exits_.empty()) until = std::min(until, held_exits_.front().judge_at);
  if (replacements_at_) until = std::min(until, *replacements_at_);
  if (claims_) until = std::min(until, claims_->next());
  for (const auto& [pid, kill_at] : left_over_)
    if (kill_at) until = std::min(until, *kill_at);
  return until;
}

std::optional<int> Launcher::Monitor() {
  phase_ = "training";
  std::optional<Clock::time_point> servers_deadline;
  const auto start_worker = [this](int rank) { return StartChild("worker", rank, "tether-worker", WorkerArgs(rank)); };
  while (true) {
    while (Child* c = table_->NextExited())
      if (auto code = Exited(c)) return code;
    StopLeftOverReplacements();
    if (auto code = RunTimers(Live() == 0)) return code;
    if (auto failed = elastic_.Poll(table_.get(), Live("worker") > 0, start_worker)) {
      LOG(ERROR) << "[launch] " << failed->second.ToString();
      Teardown("could not start worker " + std::to_string(failed->first));
      return 1;
    }
    if (Live() == 0) return std::nullopt;
    if (Live("worker") == 0 && !servers_deadline) {
      phase_ = "waiting for servers to exit";
      // Servers serving /metrics stay up --metrics_linger_s more.
      servers_deadline = Clock::now() + kServerExitWait + options_.metrics_linger;
      LOG(INFO) << "[launch] all workers finished; waiting up to "
                << (kServerExitWait + options_.metrics_linger).count() << " s for the servers to exit";
    }
    if (auto code = Interrupted(phase_)) return code;
    if (servers_deadline && Clock::now() >= *servers_deadline) {
      const std::string still = ServersStillRunning() + " still running " + std::to_string(kServerExitWait.count()) +
                                " s after the last worker finished";
      LOG(ERROR) << "[launch] " << still;
      Teardown(still);
      return 1;
    }
    Pump(NextWake(servers_deadline ? std::min(deadline_, *servers_deadline) : deadline_));
  }
}

std::string Launcher::ServersStillRunning() const {
  int n = 0;
  std::string which;
  for (const Child& c : table_->children()) {
    if (!c.running || c.role == "worker") continue;
    const std::string state = c.RunState();
    which += (which.empty() ? "" : "; ") + c.Name() + (state.empty() ? "" : ", " + state);
    ++n;
  }
  return std::to_string(n) + " server process(es) (" + which + ")";
}

int Launcher::PrintSummary() {
  JobSummary summary;
  summary.metrics_out = options_.metrics_out;
  summary.print_metrics = options_.print_metrics;
  summary.diverged = diverged_;
  summary.partial_eval = partial_eval_;
  summary.num_servers = options_.num_servers;
  summary.num_workers = options_.num_workers;
  summary.wall = Clock::now() - start_;
  const int code = PrintJobSummary(summary);
  // Every process succeeded, but the metrics cannot be read (logged).
  if (code == 1 && failure_.empty())
    failure_ = "every process finished, but the evaluating worker left no readable metrics JSON at " +
               options_.metrics_out;
  return code;
}

void Launcher::RecordFailure(int code) {
  // A signal stopped the launcher (the user did), or nothing started: no
  // metrics JSON (docs/ERRORS.md, "Exit codes").
  if (options_.metrics_out.empty() || !job_started_ || code == 0 || code == 2 || code >= 128) return;
  // Exits 3 and 4 are a job that ran to its end, which the evaluator wrote
  // up ("diverged", a partial evaluation).
  if (code == kExitDiverged || code == kExitPartialEval) return;
  const std::string why = !failed_process_.empty() ? failed_process_ : failure_.empty() ? "the job failed" : failure_;
  const StatusOr<FailureRecord> record = RecordJobFailure(options_.metrics_out, why, code);
  if (!record.ok()) {
    LOG(ERROR) << "[launch] the job's failure is not recorded in the metrics JSON: " << record.status().message();
    return;
  }
  switch (*record) {
    case FailureRecord::kAdded:
      LOG(WARNING) << "[launch] " << options_.metrics_out << ": the metrics the job wrote now carry its failure";
      break;
    case FailureRecord::kKept:
      break;  // the evaluator's own reason stands
    case FailureRecord::kWritten:
      LOG(WARNING) << "[launch] " << options_.metrics_out << ": no metrics were written; it holds the job's failure";
      break;
    case FailureRecord::kSkipped:
      LOG(WARNING) << "[launch] " << options_.metrics_out << " is a device or pipe: the job's failure is not written "
                   << "there";
      break;
  }
}

int Launcher::Run() {
  const int code = RunJob();
  RecordFailure(code);
  if (code > 128) {
    LOG(WARNING) << "[launch] job stopped by " << strsignal(code - 128) << " after "
                 << FormatDuration(Clock::now() - start_) << " (exit code " << code << ")";
  } else if (code != 0) {
    LOG(ERROR) << "[launch] job failed after " << FormatDuration(Clock::now() - start_) << " (exit code " << code
               << ")" << (failure_.empty() ? "" : ": " + failure_);
  }
  return code;
}

int Launcher::RunInProcess() {
  // One child runs the whole job; it is monitored like a worker, and there
  // are no server processes to wait for.
  std::vector<std::string> args = {"--config=" + options_.config_path, "--in_process", kChildLogConfig};
  if (!options_.metrics_out.empty()) args.push_back("--metrics_out=" + options_.metrics_out);
  if (!options_.model_out.empty()) args.push_back("--model_out=" + options_.model_out);
  args.insert(args.end(), options_.forwarded.begin(), options_.forwarded.end());
  LOG(INFO) << "[launch] transport inproc: one tether-worker process runs the " << options_.num_servers
            << " shard(s) and " << options_.num_workers << " worker(s) as threads";
  if (Status st = StartChild("worker", 0, "tether-worker", std::move(args)); !st.ok()) {
    LOG(ERROR) << "[launch] " << st.ToString();
    Teardown("could not start the in-process job");
    return 1;
  }
  if (auto code = Monitor()) return *code;
  return PrintSummary();
}

int Launcher::RunJob() {
  if (Status st = Setup(); !st.ok()) {
    LOG(ERROR) << "[launch] " << st.ToString();
    return 1;
  }
  job_started_ = true;
  LOG(INFO) << "[launch] " << options_.num_servers << " server(s), " << options_.num_workers
            << " worker(s), timeout " << options_.timeout.count() << " s, binaries from " << options_.bin_dir
            << ", port files in " << tmp_dir_;
  if (options_.transport == "inproc") return RunInProcess();
  if (auto code = StartServers()) return *code;
  if (auto code = StartWorkers()) return *code;
  if (auto code = Monitor()) return *code;
  if (!survived_.empty()) {
    std::string names;
    for (const std::string& n : survived_) names += (names.empty() ? "" : ", ") + n;
    LOG(WARNING) << "[launch] the job ran to its end without " << survived_.size()
                 << " server process(es) that died, their shards served by other holders: " << names << "; "
                 << server_deaths_->replacements_started() << " replacement(s) started";
  }
  return PrintSummary();
}

}  // namespace launch_run

int RunLaunch(const LaunchOptions& options) {
  launch_run::Launcher launcher(options);
  return launcher.Run();
}

}  // namespace tether
