// Outbox: where a process's rooms put the messages they send to peers,
// without touching a socket. The server shard implements it on its ROUTER
// socket (server/shard_outbox.h: stamps the process id, counts the bytes
// and lost replies); a unit test implements it with a vector, so that a
// room's protocol logic (the shard's rooms, the job coordinator) runs
// without sockets. Header only.
//
// Ownership: a room holds an Outbox* it was given; the Outbox outlives it.
// Thread-safety: that of the implementation (the shard's is used on Run()'s
// thread only).
#pragma once

#include <string>

#include "core/net/message.h"

namespace tether {

class Outbox {
 public:
  virtual ~Outbox() = default;
  /// Sends `reply` to the peer at `identity` (its frames are moved out).
  /// `rank`: the worker's, or −1 for a peer not (yet) a worker. Never
  /// fails: a reply that cannot be delivered is the implementation's to
  /// log and count.
  virtual void Send(const std::string& identity, Message* reply, int rank) = 0;

  /// Whether Send may be given a reply of `values_bytes` whose values are
  /// still to be written (Message::write_values): Send then calls it,
  /// through values.size(), before it returns, whatever becomes of the
  /// reply (the shard's socket writes each chunk just before it queues
  /// it). An Outbox that cannot says false (the default): the caller
  /// writes the values before Send.
  virtual bool WritesValuesWhileSending(uint64_t /*values_bytes*/) const { return false; }

  /// Whether the peer at `identity` still has a live connection (a second
  /// claim on a rank is refused while the first holder's is; a worker
  /// removed for silence is told only when it can still hear it). An
  /// Outbox that cannot tell says true.
  virtual bool ConnectionLive(const std::string& /*identity*/) { return true; }

  /// An ERROR_REPLY to `request` (its request id and table id echoed) with
  /// `error` after the log prefix ("[server 0] "), sent to `identity` as
  /// worker request.sender_rank() (−1 when unset).
  void SendError(const std::string& identity, const MessageHeader& request, const std::string& error) {
    Message reply;
    reply.header.set_type(ERROR_REPLY);
    reply.header.set_request_id(request.request_id());
    reply.header.set_table_id(request.table_id());
    SetErrorText(request, log_prefix_ + error, &reply.header);
    Send(identity, &reply, request.has_sender_rank() ? request.sender_rank() : -1);
  }

  /// What starts the errors and log lines ("[server 0] ").
  const std::string& log_prefix() const { return log_prefix_; }

 protected:
  explicit Outbox(std::string log_prefix) : log_prefix_(std::move(log_prefix)) {}

 private:
  std::string log_prefix_;
};

}  // namespace tether
