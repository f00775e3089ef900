#include "launch/server_deaths.h"

#include <glog/logging.h>

namespace tether {

ServerDeaths::ServerDeaths(int num_servers, int replicas) : replicas_(replicas), dead_(num_servers, false) {
  CHECK_GE(num_servers, 1);
  CHECK(replicas >= 0 && replicas < num_servers) << "replicas " << replicas << ", servers " << num_servers;
  for (int s = 0; s < num_servers; ++s) views_.push_back(InitialChain(s, num_servers, replicas));
}

ServerDeathVerdict ServerDeaths::Died(int process) {
  CHECK(process >= 0 && process < static_cast<int>(dead_.size())) << "server process " << process;
  ServerDeathVerdict verdict;
  verdict.process = process;
  dead_[process] = true;
  for (int shard = 0; shard < static_cast<int>(views_.size()); ++shard) {
    ChainView& view = views_[shard];
    if (!view.Contains(process)) continue;
    const bool served = view.primary() == process;
    view = Without(view, {process});
    if (view.members.empty()) continue;  // lost: listed below
    if (served) verdict.moved.push_back({shard, view.primary()});
    if (view.members.size() == 1) verdict.unreplicated.push_back(shard);
  }
  // Every lost shard, also one lost before (the job was not stopped then).
  for (int shard = 0; shard < static_cast<int>(views_.size()); ++shard)
    if (views_[shard].members.empty()) verdict.lost.push_back(shard);
  verdict.survivable = verdict.lost.empty();
  return verdict;
}

std::string DescribeServerDeath(const ServerDeathVerdict& verdict, const ServerDeaths& deaths) {
  std::string text;
  const auto add = [&text](const std::string& part) { text += (text.empty() ? "" : "; ") + part; };
  for (int shard : verdict.lost) {
    if (deaths.replicas() == 0) {
      add("shard " + std::to_string(shard) + " is lost: it had no replica (cluster.replicas=0)");
      continue;
    }
    const ChainView chain = InitialChain(shard, deaths.num_servers(), deaths.replicas());
    std::string holders;
    for (int p : chain.members) holders += (holders.empty() ? "" : ", ") + std::to_string(p);
    add("shard " + std::to_string(shard) + " is lost: every server process that held it (" + holders + ") is dead");
  }
  if (!verdict.lost.empty()) return text;
  for (const ServerDeathVerdict::Move& m : verdict.moved)
    add("shard " + std::to_string(m.shard) + " is served by server " + std::to_string(m.to) + "'s replica now");
  for (int shard : verdict.unreplicated) add("shard " + std::to_string(shard) + " has no replica left");
  if (text.empty()) add("every shard it held has another live holder");
  return text;
}

}  // namespace tether
