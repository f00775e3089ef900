#include "launch/claim_watch.h"

#include <glog/logging.h>

#include <algorithm>
#include <utility>

namespace tether {
namespace {

bool IsEndpointValue(const std::string& value) {
  return value.rfind("tcp://", 0) == 0 || value.rfind("ipc://", 0) == 0;
}

// A store that does not answer takes a second to say so; a missing entry is
// answered at once (file backend: no wait at all).
constexpr std::chrono::milliseconds kSlowRead{500};

}  // namespace

void ClaimWatch::Watch(int process, int shard, std::string endpoint) {
  watched_.push_back(Watched{process, shard, std::move(endpoint)});
}

std::vector<SupersededServer> ClaimWatch::Check(const std::vector<std::string>& entries,
                                                const std::vector<bool>& running) {
  std::vector<SupersededServer> out;
  for (Watched& w : watched_) {
    if (w.shard < 0 || w.shard >= static_cast<int>(entries.size())) continue;
    const std::string& entry = entries[w.shard];
    if (entry == w.endpoint) {
      w.published = true;
      continue;
    }
    // Absent (withdrawn at a clean exit, or not published yet) or not an
    // endpoint: no word on who serves the shard.
    if (!IsEndpointValue(entry) || !w.published || w.reported) continue;
    const bool runs = w.process >= 0 && w.process < static_cast<int>(running.size()) && running[w.process];
    if (!runs) continue;  // its death is the launcher's already
    w.reported = true;
    out.push_back(SupersededServer{w.process, w.shard, w.endpoint, entry});
  }
  return out;
}

ClaimPoll::ClaimPoll(std::unique_ptr<Rendezvous> rdzv, std::string job_id, uint64_t generation, ClaimWatch watch)
    : rdzv_(std::move(rdzv)),
      job_id_(std::move(job_id)),
      generation_(generation),
      watch_(std::move(watch)),
      next_(Clock::now()) {}

std::vector<SupersededServer> ClaimPoll::Poll(Clock::time_point now, const std::vector<bool>& running) {
  if (now < next_) return {};
  std::vector<std::string> entries(watch_.num_shards());
  for (int s = 0; s < watch_.num_shards(); ++s) {
    const RendezvousKey key{job_id_, generation_, ServerEntryName(s)};
    const Clock::time_point start = Clock::now();
    StatusOr<std::vector<std::string>> value = rdzv_->WaitAll({key}, 0, nullptr);
    if (value.ok()) {
      entries[s] = (*value)[0];
      continue;
    }
    if (value.status().code() == Status::Code::kDeadlineExceeded && Clock::now() - start < kSlowRead) continue;
    // The store is down or the folder unreadable: ask less and less often.
    if (!failing_)
      LOG(WARNING) << "[launch] cannot read the servers' rendezvous entries to find stopped servers whose shard "
                   << "another process claimed (asking again, less often): " << value.status().message();
    failing_ = true;
    interval_ = std::min(interval_ * 2, kMaxInterval);
    next_ = Clock::now() + interval_;
    return {};
  }
  failing_ = false;
  interval_ = kInterval;
  next_ = Clock::now() + interval_;
  return watch_.Check(entries, running);
}

}  // namespace tether
