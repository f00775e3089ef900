#include "core/net/server_lookup.h"

#include <algorithm>
#include <utility>

#include <glog/logging.h>

#include "core/net/endpoint_check.h"
#include "core/net/rendezvous.h"

namespace tether {

ServerLookup::ServerLookup(std::vector<std::string> endpoints, ReadEntry read, Options options)
    : read_(std::move(read)), options_(std::move(options)), shards_(endpoints.size()) {
  CHECK(read_) << "ServerLookup needs a reader";
  options_.interval_ms = std::max(1, options_.interval_ms);
  options_.max_interval_ms = std::max(options_.interval_ms, options_.max_interval_ms);
  for (size_t s = 0; s < endpoints.size(); ++s) {
    shards_[s].endpoint = std::move(endpoints[s]);
    shards_[s].interval_ms = options_.interval_ms;
  }
}

std::unique_ptr<ServerLookup> ServerLookup::FromRendezvous(std::unique_ptr<Rendezvous> rdzv,
                                                           const std::string& job_id, uint64_t generation,
                                                           std::vector<std::string> endpoints, Options options,
                                                           int read_timeout_ms) {
  ReadEntry read = ReadServerEntry(std::shared_ptr<Rendezvous>(std::move(rdzv)), job_id, generation, read_timeout_ms);
  return std::make_unique<ServerLookup>(std::move(endpoints), std::move(read), std::move(options));
}

std::optional<std::string> ServerLookup::Poll(int shard, Clock::time_point now) {
  Shard& s = shards_[shard];
  // The first ask starts the clock: the entry was just read at start-up,
  // and most shards connect before an interval has passed.
  if (!s.asked) {
    s.asked = true;
    s.last_read = now;
    return std::nullopt;
  }
  if (now - s.last_read < std::chrono::milliseconds(s.interval_ms)) return std::nullopt;
  s.last_read = now;
  ++reads_;
  StatusOr<std::string> value = read_(shard);
  if (!value.ok()) {
    ReadFailed(shard, value.status());
    return std::nullopt;
  }
  if (*value != s.endpoint) {
    // Checked only when it changed: resolving a host name may block.
    Status st = CheckServerEntry(*value, options_.source + ", entry " + ServerEntryName(shard));
    if (!st.ok()) {
      ReadFailed(shard, st);
      return std::nullopt;
    }
  }
  if (s.failing)
    LOG(INFO) << options_.log_prefix << options_.source << ": the entry of server shard " << shard
              << " reads again";
  s.failing = false;
  s.interval_ms = options_.interval_ms;
  if (*value == s.endpoint) return std::nullopt;
  s.endpoint = *value;
  return s.endpoint;
}

void ServerLookup::ReadFailed(int shard, const Status& why) {
  Shard& s = shards_[shard];
  if (!s.failing)
    LOG(WARNING) << options_.log_prefix << options_.source << ": cannot read the entry of server shard " << shard
                 << " again (" << why.message() << "); keeping " << s.endpoint << "; reading it again less often, every "
                 << options_.max_interval_ms << " ms at most";
  s.failing = true;
  s.interval_ms = std::min(options_.max_interval_ms, s.interval_ms * 2);
}

ServerLookup::ReadEntry ReadServerEntry(std::shared_ptr<Rendezvous> rdzv, const std::string& job_id,
                                        uint64_t generation, int read_timeout_ms) {
  return [store = std::move(rdzv), job_id, generation, read_timeout_ms](int shard) -> StatusOr<std::string> {
    const RendezvousKey key{job_id, generation, ServerEntryName(shard)};
    TETHER_ASSIGN_OR_RETURN(std::vector<std::string> values, store->WaitAll({key}, read_timeout_ms, nullptr));
    return values[0];
  };
}

Status CheckServerEntry(const std::string& value, const std::string& where) {
  if (value.rfind("tcp://", 0) != 0 && value.rfind("ipc://", 0) != 0)
    return Status::DataLoss(where + ": '" + value + "' is not a tcp:// or ipc:// endpoint");
  return CheckEndpoint(value, where, EndpointUse::kConnect);
}

}  // namespace tether
