#include "server/request_check.h"

#include <cmath>
#include <cstdint>

#include "core/finite_scan.h"
#include "core/partition.h"
#include "core/wire_codec.h"

namespace tether {
namespace {

#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
#define TETHER_SCAN_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define TETHER_SCAN_CLONES
#endif

// GCC's -O2 vectorises only loops of a constant trip count and simple
// operations, so the key scan works in whole blocks of kScanBlock keys,
// then a scalar tail.
constexpr uint64_t kScanBlock = 4096;

// Nonzero when keys[0, n) are not strictly increasing. An unsigned 64-bit
// compare has no SSE2 form, so its AVX2 clone (picked at load time) runs it
// 4 wide.
TETHER_SCAN_CLONES uint64_t KeysOutOfOrder(const uint64_t* keys, uint64_t n) {
  uint64_t bad = 0, i = 1;
  for (; i + kScanBlock <= n; i += kScanBlock) {
    const uint64_t* k = keys + i;
    for (uint64_t j = 0; j < kScanBlock; ++j) bad |= static_cast<uint64_t>(k[j] <= k[j - 1]);
  }
  for (; i < n; ++i) bad |= static_cast<uint64_t>(keys[i] <= keys[i - 1]);
  return bad;
}

}  // namespace

Status RequestCheck::Check(const std::string& identity, const Message& m) const {
  const MessageHeader& h = m.header;
  if (h.sender_rank() < 0 || h.sender_rank() >= max_workers_) {
    // A worker started for a larger job than this server's says so in its
    // HELLO: that count, not the rank, is the mismatch to name.
    if (h.type() == HELLO && !max_workers_set_ && h.hello().has_num_workers() &&
        h.hello().num_workers() != max_workers_)
      return Status::InvalidArgument("cluster.num_workers differs: worker " + std::to_string(h.sender_rank()) +
                                     " has " + std::to_string(h.hello().num_workers()) + ", server " +
                                     std::to_string(shard_) + " has " + std::to_string(max_workers_) +
                                     " (--num_workers must be the same on every server and worker)");
    return Status::InvalidArgument("sender rank " + std::to_string(h.sender_rank()) + " outside [0, " +
                                   std::to_string(max_workers_) + ") (cluster.max_workers = " +
                                   std::to_string(max_workers_) + (max_workers_set_ ? "" : ", i.e. cluster.num_workers") +
                                   "; raise it to let more workers join)");
  }
  if (h.sender_rank() >= members_->slots() && h.type() != HELLO)
    return Status::FailedPrecondition(TypeName(h.type()) + " from worker " + std::to_string(h.sender_rank()) +
                                      " before its HELLO");
  if (h.type() == PULL || h.type() == PUSH || h.type() == PUSH_DELTA)
    TETHER_RETURN_IF_ERROR(CheckTableRequest(m, "worker " + std::to_string(h.sender_rank())));
  return CheckPeer(identity, m);
}

Status RequestCheck::CheckTableRequest(const Message& m, const std::string& who) const {
  const MessageHeader& h = m.header;
  const bool push = h.type() != PULL;
  if (h.table_id() >= tables_->size())
    return Status::InvalidArgument(TypeName(h.type()) + " from " + who + ": unknown table id " +
                                   std::to_string(h.table_id()));
  const ServerTable& t = *(*tables_)[h.table_id()];
  if (IsDenseTable(t.spec())) {
    const uint64_t n = t.dense_end() - t.dense_begin();
    if (h.num_keys() != 0) return Status::InvalidArgument("dense table " + t.spec().name() + " takes no keys");
    if (push && h.num_values() != n)
      return Status::InvalidArgument(TypeName(h.type()) + " from " + who + " to dense table " + t.spec().name() +
                                     " has " + std::to_string(h.num_values()) + " values; this shard holds " +
                                     std::to_string(n));
    return Status::OK();
  }
  if (h.value_dim() != t.spec().dim())
    return Status::InvalidArgument(TypeName(h.type()) + " from " + who + " for table " + t.spec().name() +
                                   ": value_dim " + std::to_string(h.value_dim()) + " but the table has dim " +
                                   std::to_string(t.spec().dim()));
  // num_keys is bounded by its frame's size (ValidateFrames), dim by the
  // config: the product cannot wrap, and the reply is sized from it.
  if (push && h.num_values() != h.num_keys() * t.spec().dim())
    return Status::InvalidArgument(TypeName(h.type()) + " from " + who + " for table " + t.spec().name() + ": " +
                                   std::to_string(h.num_values()) + " values for " + std::to_string(h.num_keys()) +
                                   " keys of dim " + std::to_string(t.spec().dim()));
  if (!push && h.num_keys() * t.spec().dim() * sizeof(float) > kMaxFrameBytes)
    return Status::InvalidArgument("PULL from " + who + " for table " + t.spec().name() + ": " +
                                   std::to_string(h.num_keys()) + " keys of dim " + std::to_string(t.spec().dim()) +
                                   " make a " + std::to_string(h.num_keys() * t.spec().dim() * sizeof(float)) +
                                   "-byte reply, above the " + std::to_string(kMaxFrameBytes) +
                                   "-byte message limit; split the keys over several pulls");
  // A request naming a cached key list without its keys: they were
  // checked when the list was defined (the key-value service finds it).
  if (h.key_list() != 0 && m.keys.size() == 0) return Status::OK();
  return CheckKeys(m, t, who);
}

Status RequestCheck::CheckKeys(const Message& m, const ServerTable& t, const std::string& who) const {
  const MessageHeader& h = m.header;
  std::vector<uint64_t> scratch;
  const uint64_t* keys = m.KeyData(&scratch);
  const uint64_t n = h.num_keys();
  uint64_t bad = KeysOutOfOrder(keys, n);
  // With one shard every key is this shard's; no hash needed. For a power
  // of two, MixKey % S is MixKey & (S − 1): same owner, no division (the
  // division was half of this check's time at 2 shards).
  const uint64_t mask = static_cast<uint64_t>(num_shards_) - 1;
  if (num_shards_ > 1 && (num_shards_ & mask) == 0) {
    for (uint64_t i = 0; i < n; ++i) bad |= static_cast<uint64_t>((MixKey(keys[i]) & mask) != static_cast<uint64_t>(shard_));
  } else if (num_shards_ > 1) {
    for (uint64_t i = 0; i < n; ++i) bad |= static_cast<uint64_t>(ShardForKey(keys[i], num_shards_) != shard_);
  }
  for (uint64_t i = 0; bad != 0 && i < n; ++i) {
    if (i > 0 && keys[i] <= keys[i - 1])
      return Status::InvalidArgument(TypeName(h.type()) + " from " + who + " for table " + t.spec().name() +
                                     ": keys not sorted and unique at position " + std::to_string(i));
    if (ShardForKey(keys[i], num_shards_) != shard_)
      return Status::InvalidArgument(TypeName(h.type()) + " from " + who + ": key " + std::to_string(keys[i]) +
                                     " of table " + t.spec().name() + " belongs to shard " +
                                     std::to_string(ShardForKey(keys[i], num_shards_)));
  }
  // Sorted by now, so the last key is the largest: one comparison checks
  // the table's key range (TableSpec.num_keys; 0 = any key).
  const uint64_t num_keys = t.spec().num_keys();
  if (num_keys != 0 && n > 0 && keys[n - 1] >= num_keys)
    return Status::InvalidArgument(TypeName(h.type()) + " from " + who + ": key " + std::to_string(keys[n - 1]) +
                                   " of table " + t.spec().name() + " is outside its key range [0, " +
                                   std::to_string(num_keys) + ")");
  return Status::OK();
}

Status RequestCheck::CheckPeer(const std::string& identity, const Message& m) const {
  const MessageHeader& h = m.header;
  const std::string from = " from worker " + std::to_string(h.sender_rank());
  const PushBody& push = h.push();
  if (h.type() == PUSH && push.has_push_weight() && !(std::isfinite(push.push_weight()) && push.push_weight() > 0))
    return Status::InvalidArgument("PUSH" + from + ": push_weight " + std::to_string(push.push_weight()) +
                                   " must be a finite number > 0; nothing applied");
  if (h.type() == PUSH || h.type() == PUSH_DELTA) {
    // No non-finite value ever reaches a table (case C08). The inbox
    // scanned a joined message's float32 values as it joined them.
    std::vector<float> scratch;
    const bool scanned = m.first_non_finite != Message::kNotScanned && !IsHalfWire(h.value_encoding());
    const uint64_t i = scanned ? m.first_non_finite : FirstNonFinite(m.ValueData(&scratch), h.num_values());
    if (i < h.num_values()) {
      const ServerTable& t = *(*tables_)[h.table_id()];
      std::string where = "value " + std::to_string(i);
      if (IsRowTable(t.spec()) && m.keys.size() == 0) {
        where += " (row " + std::to_string(i / t.spec().dim()) + " of key list " + std::to_string(h.key_list()) +
                 ", column " + std::to_string(i % t.spec().dim()) + ")";
      } else if (IsRowTable(t.spec())) {
        std::vector<uint64_t> key_scratch;
        where += " (key " + std::to_string(m.KeyData(&key_scratch)[i / t.spec().dim()]) + ", column " +
                 std::to_string(i % t.spec().dim()) + ")";
      }
      return Status::InvalidArgument(TypeName(h.type()) + from + " to table " + t.spec().name() + ": " + where +
                                     " is " + (std::isnan(m.ValueData(&scratch)[i]) ? "NaN" : "infinite") + "; nothing applied");
    }
  }
  // Only the peer that said HELLO as rank r may speak for rank r: a stray
  // or confused peer must not move r's clock or pull under r's bound.
  if (h.type() != HELLO) {
    const Membership::Worker& w = members_->worker(h.sender_rank());
    if (!w.said_hello)
      return Status::FailedPrecondition(TypeName(h.type()) + from + " before its HELLO");
    if (w.identity != identity)
      return Status::FailedPrecondition(TypeName(h.type()) + " claims to come from worker " +
                                        std::to_string(h.sender_rank()) + ", which joined from another connection");
  }
  return Status::OK();
}

}  // namespace tether
