#include "launch/server_deaths.h"

#include <glog/logging.h>

#include <algorithm>

namespace tether {

ServerDeaths::ServerDeaths(int num_servers, int replicas)
    : replicas_(replicas), num_servers_(num_servers), dead_(num_servers, false) {
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
    if (view.members.empty()) continue;  // lost: listed below
    if (served) verdict.moved.push_back({shard, view.primary()});
    if (view.members.size() == 1) verdict.unreplicated.push_back(shard);
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
    // Only a shard with no replica left gets a replacement. A shard takes
    // one joining process at a time (server/replica_link.h), and a chain
    // whose primary died regrows first with its later copies, which join
    // the claim again: a replacement started beside them would be refused.
    // A shard of two replicas that lost one keeps one; a process started
    // with --join_as_replica may fill it.
    if (views_[shard].members.size() != 1) continue;
    if (left > 0) {
      plan.start.push_back(shard);
      --left;
    } else {
      plan.over_limit.push_back(shard);
    }
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
  for (int shard : verdict.unreplicated) add("shard " + std::to_string(shard) + " has no replica left");
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

}  // namespace tether
