#include "core/wait_report.h"

namespace tether {

void WaitReport::Start(Clock::time_point now) {
  running_ = true;
  start_ = now;
  next_ms_ = options_.first_ms;
}

bool WaitReport::Due(Clock::time_point now, int64_t* waited_ms) {
  if (!running_) return false;
  const int64_t waited = std::chrono::duration_cast<std::chrono::milliseconds>(now - start_).count();
  if (waited < next_ms_) return false;
  // The next multiple of every_ms past `waited`: a late wake-up says one
  // line, not one per tick it slept through.
  const int64_t every = options_.every_ms > 0 ? options_.every_ms : 1;
  next_ms_ = (waited / every + 1) * every;
  if (waited_ms != nullptr) *waited_ms = waited;
  return true;
}

std::string WaitReport::Seconds(int64_t ms) { return std::to_string(ms < 0 ? 0 : ms / 1000) + " s"; }

std::string WaitReport::List(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size() && i < kListed; ++i) out += (i == 0 ? "" : ", ") + items[i];
  if (items.size() > kListed) out += " and " + std::to_string(items.size() - kListed) + " more";
  return out;
}

std::string WaitingForShardsLine(const std::vector<std::string>& shards, int64_t waited_ms, int64_t limit_ms) {
  return std::string("waiting for server ") + (shards.size() == 1 ? "shard " : "shards ") + WaitReport::List(shards) +
         " (no connection yet; " + WaitReport::Seconds(waited_ms) +
         " of cluster.startup_timeout_ms=" + std::to_string(limit_ms) + ")";
}

std::string WaitingForRepliesLine(const std::vector<std::string>& shards, int requests, int64_t waited_ms,
                                  int64_t limit_ms) {
  return std::string("waiting for server ") + (shards.size() == 1 ? "shard " : "shards ") + WaitReport::List(shards) +
         " to answer " + std::to_string(requests) + " request(s) (" + WaitReport::Seconds(waited_ms) +
         "; a server holds its answer while a worker of the job has not joined or is behind the staleness bound: "
         "the servers' logs name it; gives up after cluster.request_timeout_ms=" +
         std::to_string(limit_ms) + ")";
}

std::string WaitingForWorkersLine(const std::vector<std::string>& ranks, int of, int64_t waited_ms,
                                  int64_t limit_ms) {
  return std::string("waiting for ") + (ranks.size() == 1 ? "worker " : "workers ") + WaitReport::List(ranks) +
         " (of " + std::to_string(of) + ") to join: " + WaitReport::Seconds(waited_ms) +
         " of cluster.startup_timeout_ms=" + std::to_string(limit_ms);
}

}  // namespace tether
