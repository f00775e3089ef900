// ResendWindow: the messages a worker sent to one replicated shard
// (cluster.replicas > 0) that no reply has acknowledged yet, kept so that
// they can be sent again, byte-identical and in the original order, to the
// replica that claims the shard when its primary process is gone
// (RequestChannel, "A replicated shard"; replication/chain_view.h).
//
// Acknowledgement by request id: a shard's server holds every reply until
// the shard's replicas have every input it took in before making it, and it
// handles one worker's messages in order, so a reply to request id r says
// that every message of this worker to this shard with an id <= r is
// committed. Committed is not answered: a request sent before r (a pull
// deferred on the staleness bound, a barrier) may still wait for its own
// reply, which a primary that dies takes with it. So a message that is owed
// a reply is kept until that reply arrives; one owed none (a CLOCK) until a
// reply to a later request. Request ids grow with every send
// (RequestChannel: a sequence number in the high bits), so the window is
// ordered by id.
//
// Memory: the copies share their frames' data with the messages sent
// (ZeroMQ reference counts: no bytes copied, except frames under 34 bytes,
// which ZeroMQ stores inline); what is kept is at most the requests in
// flight to the shard (the channel's window) plus the reply-less messages
// (CLOCK) sent since the last reply. Not thread-safe: the channel's thread
// owns it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>

#include "core/net/message.h"

namespace tether {

/// A copy of `m` (header and frames) whose frames share `m`'s data;
/// `m` itself is left as it was. Sending the copy sends the same bytes.
Message SharedCopy(Message* m);

class ResendWindow {
 public:
  /// Keeps a copy of `m` (stamped with its request id, which must be above
  /// every id kept before); `owed_reply`: the shard answers it.
  void Keep(Message* m, bool owed_reply);
  /// Forgets the newest message kept (its send failed: it was never sent).
  void DropNewest();
  /// A reply to `request_id` arrived: that request, and every message owed
  /// no reply with a smaller id, are forgotten (requests before it still
  /// owed a reply stay). Returns how many were forgotten.
  size_t Ack(uint64_t request_id);
  /// The messages to send again, oldest first.
  std::deque<Message>& messages() { return kept_; }
  size_t size() const { return kept_.size(); }
  bool empty() const { return kept_.empty(); }
  void Clear() {
    std::deque<Message>().swap(kept_);
    owed_reply_.clear();
  }

 private:
  std::deque<Message> kept_;
  std::deque<bool> owed_reply_;  // parallel to kept_
};

}  // namespace tether
