// Launcher's part for a job with replicated shards (launch/launcher_run.h):
// a server process that died or was superseded while training (the job
// goes on when every shard it held lives on in another process), the
// replacements that refill the chains it left short, and the ones left
// over at the job's end.
#include <signal.h>
#include <sys/wait.h>

#include <glog/logging.h>

#include <cstring>
#include <utility>

#include "core/net/rendezvous.h"
#include "launch/launcher_run.h"
#include "replication/chain_view.h"

namespace tether::launch_run {

std::string Launcher::WhatItHeld(const Child& c) const {
  if (c.role == "replacement" && server_deaths_)
    return "it joined shard " + std::to_string(server_deaths_->CopyOf(c.index)) + " as its replica";
  if (c.role == "server") return "it was shard " + std::to_string(c.index) + (c.endpoint.empty() ? "" : " at " + c.endpoint);
  return "";
}

bool Launcher::NotNeeded(const Child& c) {
  if (!WIFEXITED(c.wait_status) || WEXITSTATUS(c.wait_status) != kExitNothingToJoin || !server_deaths_) return false;
  // Its shard's primary counts every replica it wants: a process this
  // launcher did not start filled the chain. Not a death: it held nothing.
  // Asked again a few times: another death may have shortened it since.
  const int shard = server_deaths_->CopyOf(c.index);
  const bool again = server_deaths_->NotNeeded(c.index);
  LOG(WARNING) << "[launch] " << c.Name() << " exited with code " << kExitNothingToJoin << ": shard " << shard
               << "'s primary says its chain has all cluster.replicas=" << options_.replicas
               << " replicas; it was not needed"
               << (again ? "; another replacement asks again in " + std::to_string(kReplacementDelay.count()) + " s"
                         : "; shard " + std::to_string(shard) + " gets no other replacement until its chain changes (" +
                               std::to_string(ServerDeaths::kFullRefusals) + " refused so)");
  if (again && !replacements_at_) replacements_at_ = Clock::now() + kReplacementDelay;
  return true;
}

bool Launcher::ReplacementEnded(const Child& c) {
  if (StoppedLeftOver(c)) return true;
  if (c.Succeeded() && Training()) {
    // Its primary ended the shard (the job ends, or failed on a worker):
    // not a death that loses a holder of a running shard.
    LOG(INFO) << "[launch] " << c.Name() << " exited with code 0: shard " << server_deaths_->CopyOf(c.index)
              << " ended on its primary";
    return true;
  }
  if (!c.Succeeded() && !Training() && !ServesItsShard(c)) {
    // After the workers finished, a copy that never served is not needed.
    LOG(WARNING) << "[launch] " << c.Name() << " " << c.HowItEnded() << " after every worker finished; "
                 << WhatItHeld(c) << " and never served it: the job's result stands";
    return true;
  }
  return false;
}

void Launcher::StopLeftOverReplacements() {
  if (!server_deaths_ || Live("worker") > 0 || Live("replacement") == 0) return;
  std::vector<bool> running(server_deaths_->num_processes(), false);
  for (const Child& c : table_->children())
    if (c.running && c.role != "worker") running[c.index] = true;
  for (int process : LeftOverReplacements(*server_deaths_, running)) {
    for (const Child& c : table_->children()) {
      if (c.role != "replacement" || c.index != process || !c.running || left_over_.count(c.pid) > 0) continue;
      const int shard = server_deaths_->CopyOf(process);
      const int serving = server_deaths_->Serving(shard);
      LOG(INFO) << "[launch] stopping " << c.Name() << " (SIGTERM): every worker finished and shard " << shard
                << "'s primary" << (serving >= 0 ? " (" + server_deaths_->ProcessName(serving) + ")" : "")
                << " exited; " << WhatItHeld(c) << " and the job ended before it caught up or claimed it";
      kill(c.pid, SIGTERM);
      left_over_[c.pid] = Clock::now() + kServerStopGrace;
    }
  }
}

bool Launcher::StoppedLeftOver(const Child& c) {
  if (left_over_.count(c.pid) == 0) return false;
  LOG(INFO) << "[launch] " << c.Name() << " " << c.HowItEnded() << " as stopped at the job's end; "
            << WhatItHeld(c) << " and never served it: the job's result stands";
  return true;
}

std::string Launcher::StoppedShardsLost() const {
  // Without replicas, server process i holds shard i alone.
  const ServerDeaths unreplicated(options_.num_servers, 0);
  const ServerDeaths& deaths = server_deaths_ ? *server_deaths_ : unreplicated;
  std::vector<bool> stopped(deaths.num_processes(), false);
  for (const Child& c : table_->children())
    if (c.role != "worker" && c.running && c.RunState().rfind("stopped", 0) == 0) stopped[c.index] = true;
  return DescribeStoppedShards(ShardsOnStoppedHolders(deaths, stopped), deaths);
}

std::optional<int> Launcher::ServerDied(const Child& c) {
  // A process that ended by itself while a shard had no running holder
  // ended on the job's abort: the workers gave that shard up first. (Read
  // before its own end counts: the shards it leaves are lost after.)
  const std::string stopped = WIFSIGNALED(c.wait_status) ? "" : StoppedShardsLost();
  const ServerDeathVerdict verdict = server_deaths_->Died(c.index);
  const std::string what = DescribeServerDeath(verdict, *server_deaths_);
  if (!verdict.survivable && !stopped.empty()) {
    LOG(ERROR) << "[launch] " << stopped << " (SIGSTOP): the workers gave it up and the job failed on it; "
               << c.Name() << " " << c.HowItEnded() << " on the job's abort";
    Teardown(stopped);
    return 1;
  }
  if (!verdict.survivable) {
    LogFailure(c);
    LOG(ERROR) << "[launch] " << what << " (cluster.replicas=" << options_.replicas << ")";
    Teardown(c.Name() + " failed");
    return 1;
  }
  // Its replica noticed the closed connection and claimed the shard; the
  // workers follow it.
  const int replacements_live = Live("replacement");
  LOG(WARNING) << "[launch] " << c.Name() << " " << c.HowItEnded() << "; " << WhatItHeld(c) << ": " << what
               << " (cluster.replicas=" << options_.replicas << "); the job goes on with " << Live("server") << " of "
               << options_.num_servers << " server process(es)"
               << (replacements_live > 0 ? " and " + std::to_string(replacements_live) + " replacement(s)" : "");
  const std::string dead = (c.role == "server" ? "server process " : "replacement ") + std::to_string(c.index);
  for (int shard : verdict.short_chains) left_by_[shard] = dead;
  if (!replacements_at_) replacements_at_ = Clock::now() + kReplacementDelay;
  survived_.push_back(c.Name() + " (shard " +
                      std::to_string(c.role == "server" ? c.index : server_deaths_->CopyOf(c.index)) +
                      (c.role == "server" ? ")" : "'s replica)"));
  return std::nullopt;
}

void Launcher::WatchClaims() {
  if (!server_deaths_) return;
  if (!options_.rendezvous_readable) {
    LOG(INFO) << "[launch] the rendezvous store is a CURVE one, which admits the servers' and workers' keys only: "
              << "a server process stopped for good is not looked for there";
    return;
  }
  const std::string spec = options_.config_rendezvous ? options_.rendezvous
                                                      : rendezvous_flag_.substr(std::strlen("--rendezvous="));
  auto rdzv = Rendezvous::Open(spec);
  if (!rdzv.ok()) {
    LOG(WARNING) << "[launch] " << rdzv.status().message() << ": a server process stopped for good is not looked for";
    return;
  }
  ClaimWatch watch(options_.num_servers);
  for (const Child& c : table_->children())
    if (c.role == "server" && !c.endpoint.empty()) watch.Watch(c.index, c.index, c.endpoint);
  claims_.emplace(std::move(*rdzv), options_.job_id, options_.generation, std::move(watch));
}

void Launcher::KillSuperseded() {
  table_->ReapExited();  // a process that died meanwhile is judged as such
  std::vector<bool> running(server_deaths_->num_processes(), false);
  for (const Child& c : table_->children())
    if (c.running && c.role != "worker" && !server_deaths_->dead(c.index)) running[c.index] = true;
  for (const SupersededServer& s : claims_->Poll(Clock::now(), running)) {
    for (const Child& c : table_->children()) {
      if (c.role == "worker" || c.index != s.process || !c.running) continue;
      // A stopped process cannot act on SIGTERM; one cut off from its chain
      // must not serve on either.
      LOG(WARNING) << "[launch] " << c.Name() << " still runs, but shard " << s.shard
                   << "'s rendezvous entry moved from its " << s.endpoint << " to " << s.claimant
                   << ": another process claimed the shard (this one was stopped or cut off): killing it (SIGKILL); "
                   << "its end counts as a server death";
      kill(c.pid, SIGKILL);
      superseded_.insert(c.pid);
    }
  }
}

std::optional<int> Launcher::SupersededEnded(const Child& c) {
  superseded_.erase(c.pid);  // reaped: its pid may name another process later
  if (Training()) return ServerDied(c);
  // After every worker finished nothing needs its shards any more.
  (void)server_deaths_->Died(c.index);
  LOG(WARNING) << "[launch] " << c.Name() << " " << c.HowItEnded() << " after every worker finished; "
               << WhatItHeld(c) << ", which another process had claimed: the job's result stands";
  survived_.push_back(c.Name() + " (shard " + std::to_string(c.index) + ")");
  return std::nullopt;
}

void Launcher::StartReplacements() {
  // Workers that exited since the last look count as gone (their exits are
  // still judged in order): a replacement for a job whose workers all left
  // would only be stopped again.
  table_->ReapExited();
  if (Live("worker") == 0) return;  // the job is ending: nothing to copy for
  const ReplacementPlan plan = server_deaths_->PlanReplacements(options_.max_replacements);
  for (int shard : plan.start) {
    const std::string dead = left_by_.count(shard) > 0 ? left_by_[shard] : "a dead server process";
    const int process = server_deaths_->Replaced(shard);
    std::vector<std::string> args = {"--config=" + options_.config_path, "--join_as_replica",
                                     "--shard=" + std::to_string(shard), "--listen=tcp://127.0.0.1:0",
                                     kChildLogConfig};
    if (!rendezvous_flag_.empty()) args.push_back(rendezvous_flag_);
    AddMetricsFlags("replacement", process, &args);
    args.insert(args.end(), options_.forwarded.begin(), options_.forwarded.end());
    if (Status st = StartChild("replacement", process, "tether-server", std::move(args)); !st.ok()) {
      LOG(ERROR) << "[launch] could not start a replacement for " << dead << " to join shard " << shard << ": "
                 << st.ToString() << "; shard " << shard << " goes on one replica short";
      (void)server_deaths_->Died(process);  // it never ran
      continue;
    }
    LOG(WARNING) << "[launch] started a replacement for " << dead << ": joins shard " << shard
                 << " as its replica (replacement " << process << ", " << server_deaths_->replacements_started()
                 << " of at most " << options_.max_replacements << " over the job, --max_replacements; shard "
                 << shard << "'s chain with it: " << server_deaths_->Holders(shard).size() << " of "
                 << options_.replicas + 1 << " processes)";
  }
  if (plan.over_limit.empty()) return;
  std::string shards;
  for (int shard : plan.over_limit) shards += (shards.empty() ? "" : ", ") + std::to_string(shard);
  LOG(WARNING) << "[launch] " << server_deaths_->replacements_started() << " replacement(s) started over the job, "
               << "the most --max_replacements=" << options_.max_replacements << " allows: shard(s) " << shards
               << " go on short of cluster.replicas=" << options_.replicas << " replicas";
}

}  // namespace tether::launch_run
