// ShardOutbox: the shard's Outbox on its ROUTER socket. Every message it
// sends carries the shard's process start id (MessageHeader.
// server_incarnation), and, once the shard was told to stop
// (ServerShard::StopAfterWorkers), server_stopping, so each worker learns
// of the stop from any reply. It counts the bytes of keys and values
// frames sent and the replies it could not deliver (ServerStats). A
// replicated shard's replies, sent or muted, are recorded in its reply
// cache (server/reply_cache.h) as the shard's rooms made them, before any
// stamp.
//
// A replicated shard (server/replica_link.h): each message carries the
// generation of the shard's view (MessageHeader.shard_generation), a
// HELLO_REPLY the serving endpoints of its replicas (and the first message
// to a worker after they changed, MessageHeader.chain_endpoints: a replica
// joined), and a message made
// while entries were not yet acknowledged by the replica waits until they
// are (ReleaseCommitted): the worker sees nothing a claiming replica could
// lack. Held messages are bounded by the replies in flight (each worker's
// window).
//
// Ownership: the shard owns it; the socket, the stats, the stop flag and
// the replica link it is given are the shard's and outlive it.
// Thread-safety: Run()'s thread only.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <string>
#include <unordered_map>

#include <zmq.hpp>

#include "core/net/outbox.h"
#include "server/replica_link.h"
#include "server/reply_cache.h"
#include "server/shard_stats.h"

namespace tether {

class ShardOutbox final : public Outbox {
 public:
  /// `stopping`: set when the shard was told to stop (read at each send).
  ShardOutbox(std::string log_prefix, uint64_t incarnation, const std::atomic<bool>* stopping, ServerStats* stats)
      : Outbox(std::move(log_prefix)), incarnation_(incarnation), stopping_(stopping), stats_(stats) {}

  /// The socket to send on (the shard's, once bound); null: muted.
  void set_socket(zmq::socket_t* socket);
  /// Messages dropped because there is no socket.
  uint64_t muted() const { return muted_; }
  /// The primary's replica link (null: the shard is not replicated, or is a
  /// copy that claimed the shard and has no replica left).
  void set_replica_link(const ReplicaLink* link) { link_ = link; }
  /// The generation stamped when there is no link (a copy that claimed the
  /// shard); 0: none.
  void set_generation(uint64_t generation) { generation_ = generation; }
  /// Sends the held messages the replica has acknowledged.
  void ReleaseCommitted();
  /// Sends every held message (the shard ends, or has no replica left).
  void ReleaseAll();
  size_t held() const { return held_.size(); }
  /// Replies to peers that never said HELLO (rank < 0) that could not be
  /// sent; the first 10 are logged, then every 1,000th.
  uint64_t lost_unregistered() const { return lost_unregistered_; }

  /// The reply cache every reply is recorded in (the shard's; null: none).
  void set_reply_cache(ReplyCache* cache) { replies_ = cache; }

  void Send(const std::string& identity, Message* reply, int rank) override;
  /// True on a tcp:// or ipc:// socket of a shard that is not replicated:
  /// a large reply whose values are written while it is sent goes in
  /// chunks (SendMessageInChunks), each chunk's rows written just before
  /// it is queued. A replicated shard records each reply in its reply
  /// cache and may hold it for the replicas' acknowledgements: it is
  /// written at once there, as on a muted or inproc:// socket.
  bool WritesValuesWhileSending(uint64_t values_bytes) const override;
  /// Sends a reply the reply cache kept (ReplyCache::Take's kResend) again:
  /// held and stamped as any reply is now, not recorded a second time.
  void Resend(const std::string& identity, Message* reply, int rank);
  /// Tells the worker at `identity`, unasked, that this shard was told to
  /// stop: a HEARTBEAT with server_stopping set (the worker reads it before
  /// dropping the probe). A failure is logged, nothing more.
  void TellStopping(const std::string& identity);
  /// Whether the ROUTER still has a connection for `identity`: a HEARTBEAT
  /// the worker drops is sent to it; with ROUTER_MANDATORY it fails with
  /// EHOSTUNREACH once the peer's connection is gone.
  bool ConnectionLive(const std::string& identity) override;
  /// Gives the replies still queued up to 1 s to leave once the socket
  /// closes (its linger is 0 otherwise).
  void LingerOnClose();

 private:
  struct Held {
    uint64_t seq;  // the log entry the message waits for
    std::string identity;
    Message message;
    int rank;
  };
  // Send less the record: muted, held until committed, or sent now.
  void Deliver(const std::string& identity, Message* reply, int rank);
  void SendNow(const std::string& identity, Message* reply, int rank);
  // Writes the values of a reply not sent while it is written.
  static void WriteNow(Message* reply);
  uint64_t generation() const { return link_ != nullptr ? link_->generation() : generation_; }

  uint64_t incarnation_;
  const std::atomic<bool>* stopping_;
  ServerStats* stats_;
  zmq::socket_t* socket_ = nullptr;
  bool inproc_ = false;  // socket_ is bound to inproc:// (no wire: sent whole)
  ReplyCache* replies_ = nullptr;
  uint64_t muted_ = 0;
  uint64_t lost_unregistered_ = 0;
  const ReplicaLink* link_ = nullptr;
  uint64_t generation_ = 0;
  std::deque<Held> held_;
  // The chain generation each worker connection was last told of (one
  // entry per worker identity that got a reply of a replicated shard).
  std::unordered_map<std::string, uint64_t> chain_told_;
};

}  // namespace tether
