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
      log_prefix_(std::move(log_prefix)),
      log_(shard),
      started_(Clock::now()),
      last_tick_(started_) {
  next_learner_slot_ = config.cluster().num_servers();
  log_.Adopt(InitialChain(shard, config.cluster().num_servers(), config.cluster().replicas()));
  const std::vector<int>& members = log_.view().members;
  for (size_t i = 1; i < members.size(); ++i) {
    legs_.emplace_back();
    legs_.back().process = members[i];
    legs_.back().last_heard = started_;
    placed_.push_back(members[i]);
  }
  chain_generation_ = generation();
}

ReplicaLink::ReplicaLink(const JobConfig& config, int shard, std::string log_prefix, Claimed claimed)
    : config_(config),
      shard_(shard),
      log_prefix_(std::move(log_prefix)),
      log_(claimed.process),
      started_(Clock::now()),
      last_tick_(started_) {
  next_learner_slot_ = config.cluster().num_servers();
  ChainView alone;
  alone.generation = claimed.generation;
  alone.members = {claimed.process};
  log_.Adopt(alone);
  chain_generation_ = generation();
}

ReplicaLink::Leg* ReplicaLink::LegOf(const std::string& identity) {
  if (identity.empty()) return nullptr;
  for (Leg& leg : legs_)
    if (leg.identity == identity) return &leg;
  return nullptr;
}

std::string ReplicaLink::ReplicaNames() const {
  std::string out;
  for (const Leg& leg : legs_) {
    out += out.empty() ? "" : ", ";
    out += std::to_string(leg.process) + (leg.endpoint.empty() ? std::string() : " at " + leg.endpoint);
  }
  if (legs_.empty()) return "none";
  return (legs_.size() == 1 ? "process " : "processes ") + out;
}

void ReplicaLink::RebuildChain() {
  std::vector<std::string> endpoints;
  for (const Leg& leg : legs_)
    if (!leg.identity.empty()) endpoints.push_back(leg.endpoint);
  if (endpoints == chain_endpoints_) return;
  chain_endpoints_ = std::move(endpoints);
  chain_generation_ = generation();
}

void ReplicaLink::Commit() {
  if (legs_.empty()) return;
  uint64_t least = legs_.front().acked;
  for (const Leg& leg : legs_) least = std::min(least, leg.acked);
  if (learner_beside_ && learner_counts_) least = std::min(least, learner_acked_);
  (void)log_.OnAck(legs_.front().process, log_.view(), least);
}

bool ReplicaLink::Take(const std::string& identity, const Message& m, const std::string& peer_key,
                       Clock::time_point now) {
  const MessageType type = m.header.type();
  if (type != REPLICA_HELLO && type != REPLICATE_ACK) return false;
  if (!replica_key_.empty() && peer_key != replica_key_)
    RefuseKey(identity, m, peer_key);
  else if (type == REPLICA_HELLO)
    OnReplicaHello(identity, m, now);
  else if (Leg* leg = LegOf(identity); leg != nullptr)
    OnAck(*leg, m, now);
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
  if (const std::string differs = ConfigMismatch(b); !differs.empty()) {
    LOG(WARNING) << log_prefix_ << "replica refused: " << differs;
    Refuse(identity, differs, ReplicateAckBody::CONFIG_DIFFERS);
    config_refusal_ = "server process " + std::to_string(b.process()) + " holds a copy of shard " +
                      std::to_string(shard_) + ", but " + differs;
    return;
  }
  Leg* leg = nullptr;
  for (Leg& l : legs_)
    if (l.process == b.process()) leg = &l;
  std::string refused;
  const bool placed = std::find(placed_.begin(), placed_.end(), b.process()) != placed_.end();
  if (b.shard() != shard_ || (leg == nullptr && !placed && !placed_.empty()))
    refused = "this process is shard " + std::to_string(shard_) + "'s primary, whose " +
              (legs_.size() == 1 ? "replica is " : "replicas are ") + ReplicaNames() +
              ", not process " + std::to_string(b.process()) + " for shard " + std::to_string(b.shard());
  else if (leg == nullptr)
    refused = "shard " + std::to_string(shard_) + " goes on without process " + std::to_string(b.process()) + " (" +
              log_.view().ToString() + ")";
  else if (!leg->identity.empty() && identity != leg->identity)
    refused = "shard " + std::to_string(shard_) + " already has its replica on process " + std::to_string(b.process());
  else if (b.applied() != 0 || b.endpoint().empty())
    refused = "a replica must start empty and name the endpoint it serves on";
  if (!refused.empty()) {
    LOG(WARNING) << log_prefix_ << "replica refused: " << refused;
    Refuse(identity, refused);
    return;
  }
  leg->identity = identity;
  leg->endpoint = b.endpoint();
  leg->last_heard = now;
  RebuildChain();
  LOG(INFO) << log_prefix_ << "replica of shard " << shard_ << " joined: process " << b.process() << " at "
            << b.endpoint() << " (" << log_.view().ToString() << "); sending it " << log_.applied() << " entries";
  Forward();
}

void ReplicaLink::Refuse(const std::string& identity, const std::string& why, ReplicateAckBody::JoinRefusal kind) {
  if (socket_ == nullptr || identity.empty()) return;
  Message no;
  no.header.set_type(REPLICATE_ACK);
  no.header.set_shard_generation(generation());
  no.header.mutable_replicate_ack()->set_shard(shard_);
  no.header.mutable_replicate_ack()->set_refused(true);
  no.header.mutable_replicate_ack()->set_reason(log_prefix_ + why);
  if (kind != ReplicateAckBody::JOIN_REFUSED) no.header.mutable_replicate_ack()->set_join_refusal(kind);
  (void)SendMessageNoWait(*socket_, &no, identity, "replica");
}

void ReplicaLink::OnAck(Leg& leg, const Message& m, Clock::time_point now) {
  leg.last_heard = now;
  const ReplicateAckBody& b = m.header.replicate_ack();
  if (b.refused()) {
    stepped_down_ = Status::FailedPrecondition(
        log_prefix_ + "shard " + std::to_string(shard_) + "'s replica (process " + std::to_string(leg.process) +
        ") refused this primary: " + b.reason() + "; this process holds an older copy of the shard and stops");
    return;
  }
  leg.acked = std::max(leg.acked, std::min(b.applied(), leg.sent));
  Commit();
}

void ReplicaLink::Append(const std::string& identity, const Message& m) {
  log_.Append(EncodeShardInput(identity, m));
  Forward();
}

void ReplicaLink::Forward() {
  if (socket_ == nullptr) return;
  const int next = log_.successor();
  if (next < 0) return;
  if (legs_.empty()) {
    if (next != learner_slot_ || learner_identity_.empty()) return;
    for (const LogEntry& e : log_.TakeForward()) SendEntry(e, learner_identity_, false);
    return;
  }
  // Each replica is sent what it lacks; the log keeps every entry until
  // all of them acknowledged it (Commit).
  (void)log_.TakeForward();
  for (Leg& leg : legs_) {
    if (leg.identity.empty()) continue;
    for (const LogEntry& e : log_.EntriesAfter(leg.sent)) {
      SendEntry(e, leg.identity, true);
      leg.sent = e.seq;
    }
  }
  ForwardBeside();
}

void ReplicaLink::SendEntry(const LogEntry& e, const std::string& to, bool member) {
  Message m;
  m.header.set_type(REPLICATE);
  m.header.set_shard_generation(generation());
  // The chain as this primary has it: a replica that loses its primary
  // claims the shard when it is the first, or joins the first.
  for (const std::string& ep : chain_endpoints_) m.header.add_chain_endpoints(ep);
  ReplicateBody* b = m.header.mutable_replicate();
  b->set_shard(shard_);
  b->set_seq(e.seq);
  b->set_commit(log_.commit());
  b->set_payload_bytes(e.payload.size());
  b->set_member(member);
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
  if (Leg* leg = LegOf(to); leg != nullptr) {
    if (leg->send_failure.empty()) leg->send_failure = "an entry could not be sent (" + st.message() + ")";
  } else {
    learner_failure_ = "an entry could not be sent (" + st.message() + ")";
  }
}

void ReplicaLink::Tick(Clock::time_point now) {
  const int64_t forgiven_ms = std::exchange(forgiven_ms_, 0);
  TickLearner(now);
  const int startup_ms = config_.cluster().startup_timeout_ms();
  bool introduced = false;
  for (size_t i = 0; i < legs_.size();) {
    if (legs_[i].identity.empty() && MsBetween(started_, now) > startup_ms) {
      DropReplica(i, "it did not introduce itself within cluster.startup_timeout_ms=" + std::to_string(startup_ms));
      continue;
    }
    introduced = introduced || !legs_[i].identity.empty();
    ++i;
  }
  if (!introduced) {
    last_tick_ = now;
    return;
  }
  if (Suspect(now, forgiven_ms)) return;
  const int liveness_ms = config_.cluster().liveness_timeout_ms();
  // The connections are probed at most every kProbeMs (the loop turns after
  // every drain, far more often under load).
  const bool probe = MsBetween(last_probe_, now) >= kProbeMs;
  if (probe) last_probe_ = now;
  for (size_t i = 0; i < legs_.size();) {
    const Leg& leg = legs_[i];
    std::string why;
    if (leg.identity.empty())
      ;  // waited for until the start-up timeout (above)
    else if (!leg.send_failure.empty())
      why = leg.send_failure;
    else if (probe && !Reachable(leg.identity))
      why = "its connection closed";
    else if (liveness_ms > 0 && MsBetween(leg.last_heard, now) > liveness_ms)
      why = "it was silent for cluster.liveness_timeout_ms=" + std::to_string(liveness_ms);
    if (why.empty()) {
      ++i;
    } else {
      DropReplica(i, why);
    }
  }
}

bool ReplicaLink::Suspect(Clock::time_point now, int64_t forgiven_ms) {
  const int liveness_ms = config_.cluster().liveness_timeout_ms();
  const int64_t gap_ms = MsBetween(last_tick_, now) - forgiven_ms;
  last_tick_ = now;
  if (liveness_ms <= 0) return false;
  if (gap_ms > liveness_ms / 2) {
    if (!suspect_)
      LOG(WARNING) << log_prefix_ << "this process did not run for " << gap_ms << " ms: shard " << shard_
                   << " waits to hear from its replicas (" << ReplicaNames() << ") before it goes on";
    suspect_ = true;
    stalled_at_ = now;
    // Only an acknowledgement of an entry made now shows a replica still
    // follows this process (older ones may have waited in the queue).
    Message mark;
    mark.header.set_type(SHARD_DECISION);
    mark.header.mutable_shard_decision()->set_remove_rank(-1);
    Append("", mark);
    mark_seq_ = log_.applied();
    return true;
  }
  if (!suspect_) return false;
  // Every replica must have acknowledged the mark: any one of them may
  // have claimed the shard meanwhile.
  if (log_.commit() >= mark_seq_) {
    suspect_ = false;
    LOG(INFO) << log_prefix_ << "shard " << shard_ << "'s replicas answered after this process's stall; going on";
    return false;
  }
  if (MsBetween(stalled_at_, now) > liveness_ms && stepped_down_.ok())
    stepped_down_ = Status::Unavailable(
        log_prefix_ + "this process stalled and then did not hear from every replica of shard " +
        std::to_string(shard_) + " (" + ReplicaNames() + ") within cluster.liveness_timeout_ms=" +
        std::to_string(liveness_ms) + " ms: a replica may have claimed the shard, so this process stops serving it");
  for (const Leg& leg : legs_)
    if (!leg.identity.empty()) (void)Reachable(leg.identity);
  return true;
}

bool ReplicaLink::Reachable(const std::string& identity) {
  // A HEARTBEAT the replica drops.
  MessageHeader probe;
  probe.set_type(HEARTBEAT);
  probe.set_shard_generation(generation());
  return ProbeRouterPeer(*socket_, identity, probe);
}

void ReplicaLink::DropReplica(size_t i, const std::string& why) {
  const Leg leg = legs_[i];
  const uint64_t waiting = log_.applied() - leg.acked;
  // A replica that is still there learns that its copy is no longer kept
  // (it must never claim the shard from it); a dead one's send fails.
  Refuse(leg.identity, "shard " + std::to_string(shard_) + " went on without this replica: " + why);
  legs_.erase(legs_.begin() + static_cast<std::ptrdiff_t>(i));
  log_.Adopt(Without(log_.view(), {leg.process}));
  RebuildChain();
  chain_generation_ = generation();
  Commit();
  LOG(WARNING) << log_prefix_ << "shard " << shard_ << " goes on without its replica (process " << leg.process
               << "): " << why << "; " << waiting << " entries were waiting for it; now " << log_.view().ToString();
  if (legs_.empty() && learner_beside_)
    DropLearner("shard " + std::to_string(shard_) + " lost its last replica while this process joined; join again");
}

void ReplicaLink::Finish(const Status& outcome) {
  if (socket_ == nullptr) return;
  for (const Leg& leg : legs_) {
    if (leg.identity.empty()) continue;
    Message bye;
    bye.header.set_type(SHUTDOWN);
    bye.header.set_shard_generation(generation());
    if (!outcome.ok()) bye.header.mutable_job_abort()->set_reason(outcome.message());
    const std::string to = leg.identity;
    if (Status st = SendMessage(*socket_, &bye, &to, "replica of shard " + std::to_string(shard_)); !st.ok())
      LOG(WARNING) << log_prefix_ << "could not tell the replica (process " << leg.process
                   << ") that the shard ended: " << st.message();
  }
}

}  // namespace tether
