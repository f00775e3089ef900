// The launcher behind RunLaunch (launch/launcher.h), shared by its two
// sources only: launcher.cc starts the job's processes, watches them and
// tears them down; launcher_chains.cc keeps a job with replicated shards
// going when server processes die or are superseded (their verdicts,
// replacements and claims). Not a public interface.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/status.h"
#include "launch/claim_watch.h"
#include "launch/elastic_run.h"
#include "launch/failure_cause.h"
#include "launch/launch_events.h"
#include "launch/launcher.h"
#include "launch/process_table.h"
#include "launch/server_deaths.h"

namespace tether::launch_run {


using Clock = std::chrono::steady_clock;

// How long each bounded wait of the launcher lasts. Not flags: they bound
// local process start-up and shutdown, not training, which --timeout_s covers.
inline constexpr std::chrono::seconds kPortFileWait{30};     // server start → port file written
inline constexpr std::chrono::seconds kServerExitWait{60};   // last worker done → servers gone
inline constexpr std::chrono::seconds kWorkerStopGrace{3};   // workers: SIGTERM → BYE → exit (≈ 1 s)
inline constexpr std::chrono::seconds kServerStopGrace{2};   // then servers: SIGTERM → exit (≈ 0.1 s)
inline constexpr std::chrono::seconds kKillWait{5};          // SIGKILL → reaped
inline constexpr std::chrono::seconds kStatusEvery{10};      // progress line period
inline constexpr std::chrono::milliseconds kPortFilePoll{200};  // only where inotify is unavailable
inline constexpr std::chrono::milliseconds kCauseSettle{300};  // a failure by exit code: how long a signalled death may still surface as its cause
// A server that exits by itself (a code, not a signal) while training is
// judged this much later: a worker whose ABORT ended it exits meanwhile
// (its ABORTs take at most 1 s), and then the job failed on that worker.
inline constexpr std::chrono::seconds kAbortSettle{3};
// A survived death's replacements start this much later: a primary probes
// its replica's connection every 100 ms (a replacement that comes before
// is refused for now, and asks again every 500 ms).
inline constexpr std::chrono::seconds kReplacementDelay{1};
// The launcher logs the config in force once for the job (tools/launch_main.cc).
inline constexpr const char* kChildLogConfig = "--log_config=false";

class Launcher {
 public:
  explicit Launcher(const LaunchOptions& options) : options_(options) {}
  ~Launcher();

  int Run();

 private:
  // With --metrics_out, a job that failed (exit 1, 6 or 124) after its
  // processes started: its failure recorded in the
  // metrics JSON (launch/failure_metrics.h), logged.
  void RecordFailure(int code);
  int RunJob();
  int RunInProcess();
  Status Setup();
  Status StartChild(const std::string& role, int index, const std::string& binary, std::vector<std::string> args);

  // Waits until a signal arrives, the folder changes, or `until` (whichever
  // is first), then reaps every child that exited and prints the progress
  // line when due.
  void Pump(Clock::time_point until);
  void PrintStatusLine();
  int Live(const std::string& role) const { return table_ ? table_->Live(role) : 0; }
  int Live() const { return table_ ? table_->Live() : 0; }
  // Workers still train (as of the last reap): a server's shard is needed.
  bool Training() const { return phase_ == "training" && Live("worker") > 0; }

  // SIGTERM to the workers, up to kWorkerStopGrace (each says BYE, so the
  // servers stop waiting for it), then to the servers, up to
  // kServerStopGrace, then SIGKILL to the group and up to kKillWait. A second
  // stop signal meanwhile skips straight to SIGKILL.
  void Teardown(const std::string& why);

  // Phases; each returns the exit code to end with, or nullopt to go on.
  std::optional<int> StartServers();
  std::optional<int> WaitForPortFiles(std::vector<std::string>* endpoints);
  std::optional<int> StartWorkers();
  std::optional<int> Monitor();
  // A child that exited while training: nullopt to go on, or the exit code.
  std::optional<int> Exited(Child* c);
  // With replicas: a server process (or a replacement) that failed while
  // training; nullopt when its shards live on in other processes (the
  // replacements it calls for started), else 1 (the job stopped).
  std::optional<int> ServerDied(const Child& c);
  // Judges the server exits held back (kAbortSettle) whose time came, all
  // of them with `all`, and starts the replacements due: nullopt to go on,
  // or the exit code.
  std::optional<int> RunTimers(bool all);
  // The earliest of `until` and the timers RunTimers runs.
  Clock::time_point NextWake(Clock::time_point until) const;
  // Starts a replacement per replica each shard's chain lacks, up to
  // --max_replacements over the job.
  void StartReplacements();
  // Once every worker finished: SIGTERM to each replacement that does not
  // serve its shard and whose shard's serving process exited
  // (LeftOverReplacements), logged; SIGKILL after kServerStopGrace.
  void StopLeftOverReplacements();
  // A replacement this launcher stopped so: logged; true.
  bool StoppedLeftOver(const Child& c);
  // With replicas, once the servers' endpoints are known: watches each
  // server's shard in the rendezvous (launch/claim_watch.h).
  void WatchClaims();
  // SIGKILL to each server process that runs while another process claimed
  // its shard (ClaimPoll, when due), logged.
  void KillSuperseded();
  // The end of a process KillSuperseded killed: a server death while
  // training (ServerDied), else logged; nullopt to go on, or the exit code.
  std::optional<int> SupersededEnded(const Child& c);
  // A replacement refused because its shard's chain is full
  // (kExitNothingToJoin): logged and recorded; true. Not a failure.
  bool NotNeeded(const Child& c);
  // A replacement that ended without need of more: exit 0 while training
  // (its shard ended), or a failure after every worker finished of one that
  // never served. True when logged and recorded; false: judge it as any child.
  bool ReplacementEnded(const Child& c);
  // "it was shard 0 at tcp://..." or "it joined shard 2 as its replica".
  std::string WhatItHeld(const Child& c) const;
  // The shards whose every server process left is stopped
  // (SIGSTOP; DescribeStoppedShards, launch/server_deaths.h), "" for none.
  std::string StoppedShardsLost() const;
  // A replacement serving the shard it joined (it claimed it).
  bool ServesItsShard(const Child& c) const {
    return server_deaths_ && server_deaths_->Serving(server_deaths_->CopyOf(c.index)) == c.index;
  }
  void LogFailure(const Child& c);
  // The job failed: `failed` ended so (not code 0) while training. Judges
  // which process it failed on among those that ended with it, held back
  // or reaped meanwhile, and a worker stopped by SIGSTOP (JudgeFailure,
  // launch/failure_cause.h), logs it as the failure, tears the job down and
  // returns the exit code: 1, or the code of a refusal no restart cures
  // (exit 2, 6; also one that ended in the teardown), which --max_restarts
  // never restarts.
  int JobFailed(const Child& failed);
  EndedProcess Judged(const Child& c, bool in_teardown) const;
  // "2 server process(es) (server 1 (pid 4711), stopped (SIGSTOP); ...)":
  // the server processes and replacements still running, with their state.
  std::string ServersStillRunning() const;
  std::optional<int> Interrupted(const std::string& phase);
  // Interrupted, after reading the signals pending now: called before each
  // child a starting loop spawns, so a stop signal ends the start within a
  // spawn. `what`: "worker 3".
  std::optional<int> StopBeforeSpawn(const std::string& what);
  // --metrics_port (and --metrics_sd_file) of one child.
  void AddMetricsFlags(const std::string& role, int index, std::vector<std::string>* args) const;
  std::vector<std::string> WorkerArgs(int rank) const;
  int PrintSummary();

  const LaunchOptions& options_;
  std::unique_ptr<ProcessTable> table_;  // made once the signal mask is known
  LaunchEvents events_;
  ElasticRun elastic_{options_.elastic, options_.num_workers, ""};
  std::string tmp_dir_;
  int devnull_fd_ = -1;
  bool torn_down_ = false;
  std::string failure_;  // why the job failed: the first Teardown's reason, on the final line
  std::string failed_process_;  // the first LogFailure: "server 1 (pid 7) was killed by ...; it was shard 1 at ..."
  bool job_started_ = false;    // Setup passed: processes may have started    // Teardown ran; what it could not kill, a second try will not either
  std::vector<std::string> diverged_;  // workers that exited kExitDiverged (C24)
  std::vector<std::string> partial_eval_;  // the evaluator, when it exited kExitPartialEval
  std::optional<ServerDeaths> server_deaths_;  // with replicas, from the servers' start
  std::vector<std::string> survived_;  // server processes that died while their shards went on
  std::string rendezvous_flag_;  // with replicas: --rendezvous=file:DIR of the launcher's folder, or "" (the config's)
  struct HeldExit {
    Child child;  // a copy: the table's records move when a child starts
    Clock::time_point judge_at;
  };
  std::vector<HeldExit> held_exits_;  // servers that exited by themselves while training, not judged yet
  std::optional<Clock::time_point> replacements_at_;  // when the replacements a death calls for start
  std::map<int, std::string> left_by_;  // shard whose chain is short → the process whose death left it so
  // Replacements stopped at the job's end (StopLeftOverReplacements): pid →
  // when SIGKILL follows if it still runs (nullopt: sent already).
  std::map<pid_t, std::optional<Clock::time_point>> left_over_;
  std::optional<ClaimPoll> claims_;  // with replicas and a rendezvous it can read, from the workers' start
  std::set<pid_t> superseded_;       // killed by KillSuperseded
  std::string phase_ = "starting";
  std::string server_addresses_;  // the shards' endpoints, for workers started later
  Clock::time_point start_ = Clock::now();
  Clock::time_point deadline_;
  Clock::time_point next_status_;
};

}  // namespace tether::launch_run
