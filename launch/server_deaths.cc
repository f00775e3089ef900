#include "launch/server_deaths.h"

#include <glog/logging.h>

#include <algorithm>

namespace tether {

ServerDeaths::ServerDeaths(int num_servers, int replicas)
    : replicas_(replicas), num_servers_(num_servers), dead_(num_servers, false), full_refusals_(num_servers, 0) {
  CHECK_GE(num_servers, 1);
  CHECK(replicas >= 0 && replicas < num_servers) << "replicas " << replicas << ", servers " << num_servers;
  for (int s = 0; s < num_servers; ++s) {
    views_.push_back(InitialChain(s, num_servers, replicas));
    held_.push_back(views_.back().members);
  }
}

ServerDeathVerdict ServerDeaths::Died(int process) {
  CHECK(process >= 0 && process < num_processes()) << "server process " << process;
  ServerDeathVerdict verdict;
  verdict.process = process;
  dead_[process] = true;
  for (int shard = 0; shard < num_servers_; ++shard) {
    ChainView& view = views_[shard];
    if (!view.Contains(process)) continue;
    const bool served = view.primary() == process;
    view = Without(view, {process});
    full_refusals_[shard] = 0;
    if (view.members.empty()) continue;  // lost: listed below
    if (served) verdict.moved.push_back({shard, view.primary()});
    if (view.members.size() == 1) verdict.unreplicated.push_back(shard);
    if (static_cast<int>(view.members.size()) <= replicas_) verdict.short_chains.push_back(shard);
  }
  // Every lost shard, also one lost before (the job was not stopped then).
  for (int shard = 0; shard < num_servers_; ++shard)
    if (views_[shard].members.empty()) verdict.lost.push_back(shard);
  verdict.survivable = verdict.lost.empty();
  return verdict;
}

ReplacementPlan ServerDeaths::PlanReplacements(int max_replacements) const {
  ReplacementPlan plan;
  if (replicas_ == 0) return plan;
  int left = std::max(0, max_replacements - replacements_started());
  for (int shard = 0; shard < num_servers_; ++shard) {
    const int holders = static_cast<int>(views_[shard].members.size());
    if (holders == 0 || full_refusals_[shard] >= kFullRefusals) continue;
    // Several replacements of one shard join it one at a time, as do the
    // later copies of a chain whose primary died, which join the claim
    // again first: each joining process waits its turn (server/replica_host.h).
    const int missing = replicas_ + 1 - holders;
    const int now = std::min(missing, left);
    plan.start.insert(plan.start.end(), std::max(0, now), shard);
    left -= std::max(0, now);
    if (missing > now) plan.over_limit.push_back(shard);
  }
  return plan;
}

int ServerDeaths::Replaced(int shard) {
  CHECK(shard >= 0 && shard < num_servers_) << "shard " << shard;
  CHECK(!views_[shard].members.empty()) << "shard " << shard << " is lost";
  const int process = num_processes();
  dead_.push_back(false);
  copy_of_.push_back(shard);
  views_[shard] = WithLearnerAppended(WithLearner(views_[shard], process));
  held_[shard].push_back(process);
  return process;
}

bool ServerDeaths::NotNeeded(int process) {
  const int shard = CopyOf(process);
  CHECK(shard >= 0) << "process " << process << " is no replacement";
  dead_[process] = true;
  if (views_[shard].Contains(process)) views_[shard] = Without(views_[shard], {process});
  std::vector<int>& held = held_[shard];
  held.erase(std::remove(held.begin(), held.end(), process), held.end());
  return ++full_refusals_[shard] < kFullRefusals;
}

int ServerDeaths::CopyOf(int process) const { return process < num_servers_ ? -1 : copy_of_[process - num_servers_]; }

std::string ServerDeaths::ProcessName(int process) const {
  return (process < num_servers_ ? "server " : "replacement ") + std::to_string(process);
}

std::string DescribeServerDeath(const ServerDeathVerdict& verdict, const ServerDeaths& deaths) {
  std::string text;
  const auto add = [&text](const std::string& part) { text += (text.empty() ? "" : "; ") + part; };
  for (int shard : verdict.lost) {
    if (deaths.replicas() == 0) {
      add("shard " + std::to_string(shard) + " is lost: it had no replica (cluster.replicas=0)");
      continue;
    }
    std::string holders;
    for (int p : deaths.held(shard))
      holders += (holders.empty() ? "" : ", ") + (p < deaths.num_servers() ? std::to_string(p) : deaths.ProcessName(p));
    add("shard " + std::to_string(shard) + " is lost: every server process that held it (" + holders + ") is dead");
  }
  if (!verdict.lost.empty()) return text;
  for (const ServerDeathVerdict::Move& m : verdict.moved)
    add("shard " + std::to_string(m.shard) + " is served by " +
        (m.to < deaths.num_servers() ? deaths.ProcessName(m.to) + "'s replica" : deaths.ProcessName(m.to)) + " now");
  for (int shard : verdict.short_chains) {
    const int left = static_cast<int>(deaths.Holders(shard).size()) - 1;
    add("shard " + std::to_string(shard) +
        (left == 0 ? " has no replica left" : " has " + std::to_string(left) + " of " +
                                                  std::to_string(deaths.replicas()) + " replicas left"));
  }
  if (text.empty()) add("every shard it held has another live holder");
  return text;
}

std::vector<int> LeftOverReplacements(const ServerDeaths& deaths, const std::vector<bool>& running) {
  CHECK_EQ(static_cast<int>(running.size()), deaths.num_processes());
  std::vector<int> out;
  for (int p = deaths.num_servers(); p < deaths.num_processes(); ++p) {
    if (!running[p]) continue;
    const int serving = deaths.Serving(deaths.CopyOf(p));
    if (serving == p) continue;  // it claimed its shard: it ends the shard itself
    if (serving >= 0 && running[serving]) continue;  // its primary still runs: it ends with it
    out.push_back(p);
  }
  return out;
}

std::vector<int> ShardsOnStoppedHolders(const ServerDeaths& deaths, const std::vector<bool>& stopped) {
  CHECK_EQ(static_cast<int>(stopped.size()), deaths.num_processes());
  std::vector<int> out;
  for (int shard = 0; shard < deaths.num_servers(); ++shard) {
    const std::vector<int>& holders = deaths.Holders(shard);
    if (holders.empty()) continue;  // lost by deaths: ServerDeathVerdict::lost
    if (std::all_of(holders.begin(), holders.end(), [&](int p) { return stopped[p]; })) out.push_back(shard);
  }
  return out;
}

std::string DescribeStoppedShards(const std::vector<int>& shards, const ServerDeaths& deaths) {
  std::string out;
  for (int shard : shards) {
    std::string holders;
    for (int p : deaths.Holders(shard)) holders += (holders.empty() ? "" : ", ") + std::to_string(p);
    out += (out.empty() ? "" : "; ") + ("shard " + std::to_string(shard) + " is lost: every server process left " +
                                        "that holds it (" + holders + ") is stopped");
  }
  return out;
}

}  // namespace tether
