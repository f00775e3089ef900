// What a shard member shows a worker only once it is committed: a push's
// acknowledgement, a pull's reply. Each waits for the commit point of the
// shard's log (replication/replication_log.h) to reach the log position it
// depends on (the member's last applied entry when it was held), so no
// worker sees an update that a primary claiming the shard later could
// lack. With no replicas the commit point is the last applied entry and
// nothing waits.
//
// Holds are in log order (positions never decrease), so Release is a pop
// from the front. `id` is the caller's handle of the reply.
//
// Memory: one pair per reply held; the caller bounds the replies in flight.
// Not thread-safe: the shard's event loop owns it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <utility>
#include <vector>

namespace tether {

class CommitWaiters {
 public:
  /// Holds `id` until the commit point reaches `seq`. Requires `seq` ≥ the
  /// last one held.
  void Hold(uint64_t seq, uint64_t id);
  /// The ids whose position the commit point `commit` has reached, in the
  /// order they were held; they are no longer held.
  std::vector<uint64_t> Release(uint64_t commit);
  /// Every id still held (this member left the shard's chain: each one is
  /// answered with the newer view instead).
  std::vector<uint64_t> DropAll();
  size_t size() const { return held_.size(); }

 private:
  std::deque<std::pair<uint64_t, uint64_t>> held_;  // (seq, id), seq ascending
};

}  // namespace tether
