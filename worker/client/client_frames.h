// What WorkerClient's two files (client.cc: connect, pull, replies, clock;
// client_push.cc: the push path) both use to build requests: CopyFrame (a
// ZeroMQ frame holding a copy of a buffer, from the client's frame pool when
// large), ForEachRowMessage (a row request cut into one message per shard
// and size limit) and FixedKeysInUse. Private to those files. Thread-safety: the client's (its
// own thread).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <vector>

#include <zmq.hpp>

#include "core/net/frame_pool.h"
#include "core/partition.h"
#include "worker/client/client.h"

namespace tether {

// A frame holding a copy of `bytes` bytes at `data`, in a pooled buffer
// when it is large (no page faults, sent zero-copy).
inline zmq::message_t CopyFrame(FramePool& pool, const void* data, size_t bytes) {
  zmq::message_t f = pool.Take(bytes);
  if (bytes > 0) std::memcpy(f.data(), data, bytes);
  return f;
}

// WorkerClient::fixed_keys_ for the length of one call: set to the call's
// FixedKeys, cleared when the call returns (or throws).
class FixedKeysInUse {
 public:
  FixedKeysInUse(KeyListCache::List* slot, const KeyListCache::List& keys) : slot_(slot) { *slot_ = keys; }
  ~FixedKeysInUse() { slot_->reset(); }
  FixedKeysInUse(const FixedKeysInUse&) = delete;
  FixedKeysInUse& operator=(const FixedKeysInUse&) = delete;

 private:
  KeyListCache::List* slot_;
};

// Calls piece(shard, c0, c1, keys + c0) for each message of a row request:
// `keys` split by shard (or, `whole`, all of them to each shard), cut into
// RowsPerMessage(table) rows at most.
template <typename Piece>
void WorkerClient::ForEachRowMessage(const std::vector<uint64_t>& keys, bool whole, uint32_t table, Piece&& piece) {
  if (!whole) SplitKeysByShard(keys, num_shards_, &split_keys_, &split_pos_);
  const size_t chunk = RowsPerMessage(table);
  for (int s = 0; s < num_shards_; ++s) {
    const std::vector<uint64_t>& shard_keys = whole ? keys : split_keys_[s];
    for (size_t c0 = 0; c0 < shard_keys.size(); c0 += chunk)
      piece(s, c0, std::min(shard_keys.size(), c0 + chunk), shard_keys.data() + c0);
  }
}

}  // namespace tether
