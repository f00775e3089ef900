#include "worker/client/claim_lookup.h"

#include <algorithm>
#include <utility>

#include <glog/logging.h>

#include "core/net/rendezvous.h"

namespace tether {

ClaimLookup::ClaimLookup(int num_shards, ReadEntry read, Options options)
    : read_(std::move(read)), options_(std::move(options)), shards_(static_cast<size_t>(std::max(0, num_shards))) {
  CHECK(read_) << "ClaimLookup needs a reader";
  options_.interval_ms = std::max(1, options_.interval_ms);
}

void ClaimLookup::Known(int shard, const std::string& endpoint) {
  if (shard < 0 || shard >= num_shards()) return;
  shards_[static_cast<size_t>(shard)].known.insert(endpoint);
}

std::optional<std::string> ClaimLookup::Poll(int shard, Clock::time_point now) {
  if (shard < 0 || shard >= num_shards()) return std::nullopt;
  Shard& s = shards_[static_cast<size_t>(shard)];
  if (s.read_once && now - s.last_read < std::chrono::milliseconds(options_.interval_ms)) return std::nullopt;
  s.read_once = true;
  s.last_read = now;
  ++reads_;
  const std::string where = options_.source + ", entry " + ServerEntryName(shard);
  StatusOr<std::string> value = read_(shard);
  Status st = value.ok() ? Status::OK() : value.status();
  // Only a new value is checked: resolving a host name may block.
  if (st.ok() && s.known.count(*value) == 0) st = CheckServerEntry(*value, where);
  if (!st.ok()) {
    if (!s.failing)
      LOG(WARNING) << options_.log_prefix << "server shard " << shard << ": cannot read its claimant from " << where
                   << " (" << st.message() << "); reading it again every " << options_.interval_ms << " ms";
    s.failing = true;
    return std::nullopt;
  }
  s.failing = false;
  if (!s.known.insert(*value).second) return std::nullopt;
  return *value;
}

}  // namespace tether
