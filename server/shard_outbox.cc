#include "server/shard_outbox.h"

#include <glog/logging.h>

#include "core/wire_limits.h"

namespace tether {

void ShardOutbox::set_socket(zmq::socket_t* socket) {
  socket_ = socket;
  inproc_ = false;
  if (socket_ == nullptr) return;
  try {
    inproc_ = socket_->get(zmq::sockopt::last_endpoint).rfind("inproc://", 0) == 0;
  } catch (const zmq::error_t&) {
    inproc_ = true;  // cannot tell: sent whole, as every peer takes it
  }
}

bool ShardOutbox::WritesValuesWhileSending(uint64_t values_bytes) const {
  return socket_ != nullptr && !inproc_ && replies_ == nullptr && link_ == nullptr && values_bytes > kReplyChunkBytes;
}

void ShardOutbox::WriteNow(Message* reply) {
  if (!reply->write_values) return;
  reply->write_values(reply->values.size());
  reply->write_values = nullptr;
}

void ShardOutbox::Send(const std::string& identity, Message* reply, int rank) {
  // Muted too: a copy of the shard records what its primary sent.
  if (replies_ != nullptr) {
    WriteNow(reply);
    replies_->Sent(identity, *reply, rank);
  }
  Deliver(identity, reply, rank);
}

void ShardOutbox::Resend(const std::string& identity, Message* reply, int rank) { Deliver(identity, reply, rank); }

void ShardOutbox::Deliver(const std::string& identity, Message* reply, int rank) {
  if (socket_ == nullptr) {
    WriteNow(reply);  // its owner's state is read now or never
    ++muted_;
    return;
  }
  if (link_ != nullptr && (link_->log().commit() < link_->log().applied() || !held_.empty())) {
    WriteNow(reply);  // the rows as they are at the pull, not at the release
    held_.push_back(Held{link_->log().applied(), identity, std::move(*reply), rank});
    return;
  }
  SendNow(identity, reply, rank);
}

void ShardOutbox::ReleaseCommitted() {
  const uint64_t commit = link_ != nullptr ? link_->log().commit() : ~uint64_t{0};
  while (!held_.empty() && held_.front().seq <= commit) {
    Held& h = held_.front();
    SendNow(h.identity, &h.message, h.rank);
    held_.pop_front();
  }
}

void ShardOutbox::ReleaseAll() {
  for (Held& h : held_) SendNow(h.identity, &h.message, h.rank);
  held_.clear();
}

void ShardOutbox::SendNow(const std::string& identity, Message* reply, int rank) {
  if (const uint64_t g = generation(); g != 0) {
    reply->header.set_shard_generation(g);
    if (link_ != nullptr && reply->header.has_hello_reply()) {
      for (const std::string& ep : link_->chain_endpoints()) reply->header.mutable_hello_reply()->add_chain_endpoints(ep);
      chain_told_[identity] = link_->chain_generation();
    } else if (link_ != nullptr && rank >= 0 && !link_->chain_endpoints().empty()) {
      uint64_t& told = chain_told_[identity];
      if (told < link_->chain_generation()) {
        for (const std::string& ep : link_->chain_endpoints()) reply->header.add_chain_endpoints(ep);
        told = link_->chain_generation();
      }
    }
  }
  stats_->bytes_out += reply->keys.size() + reply->values.size();
  reply->header.set_server_incarnation(incarnation_);
  // A reply's server_stopping: this shard was told to stop (TellStopping).
  if (stopping_->load()) reply->header.set_server_stopping(true);
  const std::string peer = rank >= 0 ? "worker " + std::to_string(rank) : "unregistered peer";
  // A reply whose values are still to be written (a large float32 pull:
  // KvService::FillWhileSent) goes in chunks, each written just before it
  // is queued, so the copy overlaps the transfer; inproc:// has no wire.
  Status st = reply->write_values && !inproc_ ? SendMessageInChunks(*socket_, reply, identity, peer)
                                              : SendMessage(*socket_, reply, &identity, peer);
  if (!st.ok()) {
    ++stats_->send_failures;
    if (rank >= 0) {
      LOG(ERROR) << log_prefix() << "reply " << TypeName(reply->header.type()) << " lost: " << st.message();
      return;
    }
    // A peer that never said HELLO (a scanner, random ZMTP traffic) is
    // usually gone before its ERROR_REPLY leaves: logged as the shard logs
    // its refused messages (ServerShard::LogRefusal), the first 10, then
    // every 1,000th, with the count, so it cannot flood the log.
    ++lost_unregistered_;
    if (lost_unregistered_ <= 10 || lost_unregistered_ % 1000 == 0)
      LOG(ERROR) << log_prefix() << "reply " << TypeName(reply->header.type()) << " lost: " << st.message() << " ("
                 << lost_unregistered_ << " repl(ies) to unregistered peers lost so far)";
  }
}

void ShardOutbox::TellStopping(const std::string& identity) {
  // RequestChannel::DrainReplies reads server_stopping before dropping the probe.
  Message probe;
  probe.header.set_type(HEARTBEAT);
  probe.header.set_server_incarnation(incarnation_);
  probe.header.set_server_stopping(true);
  if (socket_ == nullptr) return;
  if (Status st = SendMessage(*socket_, &probe, &identity, "worker"); !st.ok())
    LOG(WARNING) << log_prefix() << "could not tell a worker of the stop: " << st.message();
}

bool ShardOutbox::ConnectionLive(const std::string& identity) {
  if (socket_ == nullptr) return true;  // muted: cannot tell
  // A HEARTBEAT the worker drops (RequestChannel::DrainReplies).
  MessageHeader probe;
  probe.set_type(HEARTBEAT);
  probe.set_server_incarnation(incarnation_);
  return ProbeRouterPeer(*socket_, identity, probe);
}

void ShardOutbox::LingerOnClose() {
  if (socket_ == nullptr) return;
  try {
    socket_->set(zmq::sockopt::linger, 1000);
  } catch (const zmq::error_t&) {
  }
}

}  // namespace tether
