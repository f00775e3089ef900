#include "server/replica_link.h"

#include <algorithm>
#include <utility>

#include <glog/logging.h>

#include "replication/chain_view.h"
#include "server/shard_input.h"

namespace tether {
namespace {

constexpr int64_t kProbeMs = 100;

int64_t MsBetween(ReplicaLink::Clock::time_point a, ReplicaLink::Clock::time_point b) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(b - a).count();
}

}  // namespace

ReplicaLink::ReplicaLink(const JobConfig& config, int shard, std::string log_prefix)
    : config_(config),
      shard_(shard),
      replica_process_((shard + 1) % config.cluster().num_servers()),
      log_prefix_(std::move(log_prefix)),
      log_(shard),
      started_(Clock::now()),
      last_heard_(started_),
      last_tick_(started_) {
  next_learner_slot_ = config.cluster().num_servers();
  log_.Adopt(InitialChain(shard, config.cluster().num_servers(), config.cluster().replicas()));
  chain_generation_ = generation();
}

ReplicaLink::ReplicaLink(const JobConfig& config, int shard, std::string log_prefix, Claimed claimed)
    : config_(config),
      shard_(shard),
      replica_process_(-1),
      log_prefix_(std::move(log_prefix)),
      log_(claimed.process),
      started_(Clock::now()),
      last_heard_(started_),
      last_tick_(started_) {
  next_learner_slot_ = config.cluster().num_servers();
  ChainView alone;
  alone.generation = claimed.generation;
  alone.members = {claimed.process};
  log_.Adopt(alone);
  replica_gone_ = true;
  chain_generation_ = generation();
}

bool ReplicaLink::Take(const std::string& identity, const Message& m, const std::string& peer_key,
                       Clock::time_point now) {
  const MessageType type = m.header.type();
  if (type != REPLICA_HELLO && type != REPLICATE_ACK) return false;
  if (!replica_key_.empty() && peer_key != replica_key_)
    RefuseKey(identity, m, peer_key);
  else if (type == REPLICA_HELLO)
    OnReplicaHello(identity, m, now);
  else if (!identity.empty() && identity == replica_identity_)
    OnAck(m, now);
  else if (!identity.empty() && identity == learner_identity_)
    OnLearnerAck(m, now);
  else if (type == REPLICATE_ACK && !m.header.replicate_ack().refused())
    // A replica or learner this shard dropped (its refusal may not have
    // reached it while its queue was full): told again, now it reads.
    Refuse(identity, "shard " + std::to_string(shard_) + " no longer keeps this process as its replica");
  return true;
}

void ReplicaLink::RefuseKey(const std::string& identity, const Message& m, const std::string& peer_key) {
  const std::string key = peer_key.empty() ? std::string("(none)") : peer_key;
  const std::string why = TypeName(m.header.type()) + " from a connection whose CURVE key " + key +
                          " is not the servers' key: only a server process (security.curve."
                          "server_secret_key_file) may hold a copy of shard " + std::to_string(shard_) +
                          "; a worker's key (security.curve.authorized_keys) may not";
  // A peer may repeat this as often as it likes: the 1st, 10th, 100th ... are logged.
  ++keys_refused_;
  uint64_t p = 1;
  while (p < keys_refused_) p *= 10;
  if (p == keys_refused_)
    LOG(WARNING) << log_prefix_ << "replication refused: " << why
                 << (keys_refused_ > 1 ? " (" + std::to_string(keys_refused_) + " times)" : std::string());
  Refuse(identity, why);
}

void ReplicaLink::OnReplicaHello(const std::string& identity, const Message& m, Clock::time_point now) {
  const ReplicaHelloBody& b = m.header.replica_hello();
  if (b.join()) {
    OnJoin(identity, m, now);
    return;
  }
  std::string refused;
  if (b.shard() != shard_ || b.process() != replica_process_)
    refused = "this process is shard " + std::to_string(shard_) + "'s primary, whose replica is process " +
              std::to_string(replica_process_) + ", not process " + std::to_string(b.process()) + " for shard " +
              std::to_string(b.shard());
  else if (replica_gone_)
    refused = "shard " + std::to_string(shard_) + " goes on without a replica (" + log_.view().ToString() + ")";
  else if (!replica_identity_.empty() && identity != replica_identity_)
    refused = "shard " + std::to_string(shard_) + " already has its replica";
  else if (b.applied() != 0 || b.endpoint().empty())
    refused = "a replica must start empty and name the endpoint it serves on";
  if (!refused.empty()) {
    LOG(WARNING) << log_prefix_ << "replica refused: " << refused;
    Refuse(identity, refused);
    return;
  }
  replica_identity_ = identity;
  chain_endpoints_ = {b.endpoint()};
  chain_generation_ = generation();
  last_heard_ = now;
  LOG(INFO) << log_prefix_ << "replica of shard " << shard_ << " joined: process " << b.process() << " at "
            << b.endpoint() << " (" << log_.view().ToString() << "); sending it " << log_.applied() << " entries";
  Forward();
}

void ReplicaLink::Refuse(const std::string& identity, const std::string& why) {
  if (socket_ == nullptr || identity.empty()) return;
  Message no;
  no.header.set_type(REPLICATE_ACK);
  no.header.set_shard_generation(generation());
  no.header.mutable_replicate_ack()->set_shard(shard_);
  no.header.mutable_replicate_ack()->set_refused(true);
  no.header.mutable_replicate_ack()->set_reason(log_prefix_ + why);
  (void)SendMessageNoWait(*socket_, &no, identity, "replica");
}

void ReplicaLink::OnAck(const Message& m, Clock::time_point now) {
  last_heard_ = now;
  const ReplicateAckBody& b = m.header.replicate_ack();
  if (b.refused()) {
    stepped_down_ = Status::FailedPrecondition(
        log_prefix_ + "shard " + std::to_string(shard_) + "'s replica (process " + std::to_string(replica_process_) +
        ") refused this primary: " + b.reason() + "; this process holds an older copy of the shard and stops");
    return;
  }
  log_.OnAck(replica_process_, log_.view(), b.applied());
}

void ReplicaLink::Append(const std::string& identity, const Message& m) {
  log_.Append(EncodeShardInput(identity, m));
  Forward();
}

void ReplicaLink::Forward() {
  if (socket_ == nullptr) return;
  const int next = log_.successor();
  if (next < 0) return;
  const bool to_learner = next == learner_slot_ && !learner_identity_.empty();
  if (!to_learner && (replica_identity_.empty() || replica_gone_)) return;
  for (const LogEntry& e : log_.TakeForward()) SendEntry(e, to_learner ? learner_identity_ : replica_identity_);
}

void ReplicaLink::SendEntry(const LogEntry& e, const std::string& to) {
  Message m;
  m.header.set_type(REPLICATE);
  m.header.set_shard_generation(generation());
  ReplicateBody* b = m.header.mutable_replicate();
  b->set_shard(shard_);
  b->set_seq(e.seq);
  b->set_commit(log_.commit());
  b->set_payload_bytes(e.payload.size());
  b->set_member(to == replica_identity_);
  const size_t padded = (e.payload.size() + 7) / 8 * 8;
  m.header.set_num_keys(padded / 8);
  m.keys.rebuild(padded);
  std::copy(e.payload.begin(), e.payload.end(), static_cast<char*>(m.keys.data()));
  std::fill(static_cast<char*>(m.keys.data()) + e.payload.size(), static_cast<char*>(m.keys.data()) + padded, 0);
  // A failed send is judged at the next Tick, after this process's own
  // stalls: a process that was stopped finds its replica's connection gone
  // because the replica claimed the shard meanwhile.
  const Status st = SendMessageNoWait(*socket_, &m, to, "replica of shard " + std::to_string(shard_));
  if (st.ok()) return;
  if (to == replica_identity_) {
    if (send_failure_.empty()) send_failure_ = "an entry could not be sent (" + st.message() + ")";
  } else {
    learner_failure_ = "an entry could not be sent (" + st.message() + ")";
  }
}

void ReplicaLink::Tick(Clock::time_point now) {
  TickLearner(now);
  if (replica_gone_) {
    last_tick_ = now;
    return;
  }
  if (replica_identity_.empty()) {
    const int startup_ms = config_.cluster().startup_timeout_ms();
    if (MsBetween(started_, now) > startup_ms)
      DropReplica("it did not introduce itself within cluster.startup_timeout_ms=" + std::to_string(startup_ms));
    last_tick_ = now;
    return;
  }
  if (Suspect(now)) return;
  const int liveness_ms = config_.cluster().liveness_timeout_ms();
  // The connection is probed at most every kProbeMs (the loop turns after
  // every drain, far more often under load).
  const bool probe = MsBetween(last_probe_, now) >= kProbeMs;
  if (probe) last_probe_ = now;
  if (!send_failure_.empty())
    DropReplica(send_failure_);
  else if (probe && !ReplicaReachable())
    DropReplica("its connection closed");
  else if (liveness_ms > 0 && MsBetween(last_heard_, now) > liveness_ms)
    DropReplica("it was silent for cluster.liveness_timeout_ms=" + std::to_string(liveness_ms));
}

bool ReplicaLink::Suspect(Clock::time_point now) {
  const int liveness_ms = config_.cluster().liveness_timeout_ms();
  const int64_t gap_ms = MsBetween(last_tick_, now);
  last_tick_ = now;
  if (liveness_ms <= 0) return false;
  if (gap_ms > liveness_ms / 2) {
    if (!suspect_)
      LOG(WARNING) << log_prefix_ << "this process did not run for " << gap_ms
                   << " ms: shard " << shard_ << " waits to hear from its replica (process " << replica_process_
                   << ") before it goes on";
    suspect_ = true;
    stalled_at_ = now;
    // Only an acknowledgement of an entry made now shows the replica still
    // follows this process (older ones may have waited in the queue).
    Message mark;
    mark.header.set_type(SHARD_DECISION);
    mark.header.mutable_shard_decision()->set_remove_rank(-1);
    Append("", mark);
    mark_seq_ = log_.applied();
    return true;
  }
  if (!suspect_) return false;
  if (log_.commit() >= mark_seq_) {
    suspect_ = false;
    LOG(INFO) << log_prefix_ << "shard " << shard_ << "'s replica answered after this process's stall; going on";
    return false;
  }
  if (MsBetween(stalled_at_, now) > liveness_ms && stepped_down_.ok())
    stepped_down_ = Status::Unavailable(
        log_prefix_ + "this process stalled and then heard nothing from shard " + std::to_string(shard_) +
        "'s replica (process " + std::to_string(replica_process_) + " at " +
        (chain_endpoints_.empty() ? std::string("?") : chain_endpoints_.front()) +
        ") for cluster.liveness_timeout_ms=" + std::to_string(liveness_ms) +
        " ms: the replica may have claimed the shard, so this process stops serving it");
  (void)ReplicaReachable();
  return true;
}

bool ReplicaLink::ReplicaReachable() { return Reachable(replica_identity_); }

bool ReplicaLink::Reachable(const std::string& identity) {
  // A HEARTBEAT the replica drops.
  MessageHeader probe;
  probe.set_type(HEARTBEAT);
  probe.set_shard_generation(generation());
  return ProbeRouterPeer(*socket_, identity, probe);
}

void ReplicaLink::DropReplica(const std::string& why) {
  const uint64_t waiting = log_.applied() - log_.commit();
  // A replica that is still there learns that its copy is no longer kept
  // (it must never claim the shard from it); a dead one's send fails.
  Refuse(replica_identity_, "shard " + std::to_string(shard_) + " went on without this replica: " + why);
  replica_gone_ = true;
  chain_endpoints_.clear();
  log_.Adopt(Without(log_.view(), {replica_process_}));
  chain_generation_ = generation();
  LOG(WARNING) << log_prefix_ << "shard " << shard_ << " goes on without its replica (process " << replica_process_
               << "): " << why << "; " << waiting << " entries were waiting for it; now " << log_.view().ToString();
}

void ReplicaLink::Finish() {
  if (replica_identity_.empty() || replica_gone_ || socket_ == nullptr) return;
  Message bye;
  bye.header.set_type(SHUTDOWN);
  bye.header.set_shard_generation(generation());
  if (Status st = SendMessage(*socket_, &bye, &replica_identity_, "replica of shard " + std::to_string(shard_));
      !st.ok())
    LOG(WARNING) << log_prefix_ << "could not tell the replica that the shard ended: " << st.message();
}

}  // namespace tether
