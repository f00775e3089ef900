// A worker's updates to one shard (its pushes and clocks) that the shard
// has not yet acknowledged as committed: numbered 1, 2, ... in the order
// they are sent, kept until acknowledged, and sent again, in the same order,
// to the primary that claims the shard after a failover
// (replication/chain_view.h). The shard applies each number once
// (replication/update_dedup.h), so a resend of an update the new primary
// already has changes nothing.
//
// Acknowledgements are cumulative: Ack(n) says every update up to n is
// committed (on every member of the shard's chain).
//
// Memory: the updates in flight, each a `T` (the message's frames); the
// caller bounds them with its in-flight window. Not thread-safe: the
// worker's request loop owns it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <utility>

namespace tether {

template <typename T>
class UpdateWindow {
 public:
  /// Keeps `update` and returns its number (1 for the first).
  uint64_t Add(T update) {
    unacked_.emplace_back(next_, std::move(update));
    return next_++;
  }
  /// Every update numbered ≤ `upto` is committed: they are dropped. An
  /// older acknowledgement than one seen before changes nothing. Returns
  /// how many were dropped.
  size_t Ack(uint64_t upto) {
    size_t dropped = 0;
    while (!unacked_.empty() && unacked_.front().first <= upto) {
      unacked_.pop_front();
      ++dropped;
    }
    if (upto > acked_ && upto < next_) acked_ = upto;
    return dropped;
  }
  /// The updates to send again after a failover, oldest first:
  /// (number, update).
  const std::deque<std::pair<uint64_t, T>>& unacked() const { return unacked_; }
  /// The highest number acknowledged (0: none).
  uint64_t acked() const { return acked_; }
  /// The number the next Add returns.
  uint64_t next() const { return next_; }
  bool empty() const { return unacked_.empty(); }

 private:
  uint64_t next_ = 1;
  uint64_t acked_ = 0;
  std::deque<std::pair<uint64_t, T>> unacked_;
};

}  // namespace tether
