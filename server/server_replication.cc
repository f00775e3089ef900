// ServerShard's part in replicated shards (cluster.replicas > 0,
// docs/FAILOVER.md "Replicated shards"): the copy a replica host feeds
// (BeginCopy, Replay), its claim of the shard (Claim), the primary's turn
// of its replica link, the timer decisions that travel in the shard's log
// (SHARD_DECISION), the messages workers send again after a claim
// (server/reply_cache.h), and servers whose replication settings disagree
// (RefuseReplica, CannotRun: the job cannot run). The socket loop and
// dispatch are server.cc's.
#include <glog/logging.h>

#include "server/server.h"

namespace tether {

using SteadyClock = std::chrono::steady_clock;

bool ServerShard::FirstTake(const std::string& identity, const Message& m) {
  Message reply;
  int rank = -1;
  const ReplyCache::Verdict v = replies_->Take(identity, m.header, &reply, &rank);
  if (v == ReplyCache::Verdict::kHandle) return true;
  // Sent again: a worker that moved here from a failed primary.
  VLOG(1) << log_prefix_ << TypeName(m.header.type()) << " " << m.header.request_id() << " from worker "
          << m.header.sender_rank() << " sent again, " << ReplyCache::VerdictName(v);
  if (v == ReplyCache::Verdict::kResend) outbox_.Resend(identity, &reply, rank);
  return v == ReplyCache::Verdict::kHandleAgain;
}

Status ServerShard::Replay(const std::string& identity, Message* m) {
  if (!replaying_) {
    replaying_ = true;
    round_.set_writes_files(false);
  }
  Take(identity, m);
  return Fatal();
}

Status ServerShard::TickReplicaLink() {
  if (link_ == nullptr) return Status::OK();
  link_->Tick(SteadyClock::now());
  if (!link_->stepped_down().ok()) return link_->stepped_down();
  outbox_.ReleaseCommitted();
  return Status::OK();
}

void ServerShard::BeginCopy() {
  replaying_ = true;
  round_.set_writes_files(false);
}

void ServerShard::StartLink(std::unique_ptr<ReplicaLink> link) {
  link_ = std::move(link);
  busy_forgiven_ms_ = 0;
  link_->set_socket(&socket_);
  link_->set_replica_key(server_key_);
  link_->set_state_source([this] { return EncodeStatePieces(link_->log().applied(), link_->generation()); });
  outbox_.set_replica_link(link_.get());
}

void ServerShard::Claim(uint64_t generation, double seconds, int process) {
  replaying_ = false;
  round_.set_writes_files(true);
  outbox_.set_socket(&socket_);
  outbox_.set_generation(generation);
  // The shard's primary now, alone until a replica joins.
  StartLink(std::make_unique<ReplicaLink>(config_, shard_, log_prefix_, ReplicaLink::Claimed{process, generation}));
  RecordFailover(seconds);
  LOG(WARNING) << log_prefix_ << "claimed shard " << shard_ << " (generation " << generation << ") at " << endpoint_
               << ": serving its workers from the copy this process held";
}

Message ServerShard::DecisionInput(const Membership::Silent& silent) {
  Message m;
  m.header.set_type(SHARD_DECISION);
  m.header.mutable_shard_decision()->set_remove_rank(silent.rank);
  m.header.mutable_shard_decision()->set_silent_ms(silent.silent_ms);
  return m;
}

void ServerShard::ReplayDecision(const ShardDecisionBody& d) {
  if (d.remove_rank() == -1) return;  // a mark the primary made after a stall of its own
  if (d.remove_rank() < 0 || d.remove_rank() >= members_.slots()) {
    fatal_ = Status::DataLoss(log_prefix_ + "the primary's log removes worker " + std::to_string(d.remove_rank()) +
                              ", not a rank of this job");
    return;
  }
  LetGoOf(members_.MarkRemoved(d.remove_rank(), d.silent_ms()));
}

void ServerShard::RefuseReplica(const std::string& identity, const MessageHeader& h) {
  if (h.type() != REPLICA_HELLO) return;  // an acknowledgement: nothing was sent to be acknowledged
  const ReplicaHelloBody& b = h.replica_hello();
  const bool unreplicated = config_.cluster().replicas() == 0;
  const std::string shard = "shard " + std::to_string(shard_);
  // A copy a server process holds from its start (not one that joins a
  // running job): that process was started with another --replicas.
  const std::string peer =
      b.join() ? "a process joining as its replica" : "server process " + std::to_string(b.process());
  const std::string why =
      unreplicated
          ? shard + " runs without replicas (cluster.replicas=0 here), but " + peer + " holds a copy of it" +
                (b.has_replicas() ? " with cluster.replicas=" + std::to_string(b.replicas()) : "") +
                (b.endpoint().empty() ? "" : " (the copy serves at " + b.endpoint() + ")") +
                ": start every server with the same --replicas"
          : shard + " is served here by the copy that claimed it, which keeps no replica";
  LOG(ERROR) << log_prefix_ << "a server process introduced itself as shard " << b.shard()
             << "'s replica: refused: " << why;
  ++stats_.bad_messages;
  Message no;
  no.header.set_type(REPLICATE_ACK);
  no.header.mutable_replicate_ack()->set_shard(b.shard());
  no.header.mutable_replicate_ack()->set_refused(true);
  no.header.mutable_replicate_ack()->set_reason(log_prefix_ + why);
  if (unreplicated) no.header.mutable_replicate_ack()->set_join_refusal(ReplicateAckBody::CONFIG_DIFFERS);
  if (socket_.handle() != nullptr) (void)SendMessage(socket_, &no, &identity, "replica");
  // The servers disagree: the job cannot run as started (a joining
  // process is alone in its mistake, and is only refused).
  if (unreplicated && !b.join()) (void)members_.CannotRun(why);
}

void ServerShard::CannotRun(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(cannot_run_mu_);
    cannot_run_why_ = why;
  }
  cannot_run_requested_.store(true);
}

Status ServerShard::TakeCannotRun() {
  // A copy of this shard placed on another process was refused: that
  // process was started with other settings. Once workers joined, the job
  // runs here and goes on (that process ends on its own).
  if (const std::string why = link_ != nullptr ? link_->TakeConfigRefusal() : ""; !why.empty())
    if (!members_.CannotRun(why)) LOG(ERROR) << log_prefix_ << why << " (workers joined already: the job goes on)";
  if (cannot_run_requested_.exchange(false)) {
    std::string why;
    {
      std::lock_guard<std::mutex> lock(cannot_run_mu_);
      why = std::move(cannot_run_why_);
    }
    // This process's own copy was refused: its settings are not the other
    // servers', so its shard cannot serve the job even where workers
    // joined (they started before the servers met): it ends now.
    if (!members_.CannotRun(why)) return Status::FailedPrecondition(log_prefix_ + "the job cannot run: " + why);
  }
  // Nothing is served: what the replica link holds back until its replica
  // acknowledges (the refusals) leaves now.
  if (members_.cannot_run()) outbox_.ReleaseAll();
  return Status::OK();
}

void ServerShard::CloseSocket() {
  if (guard_ != nullptr && socket_.handle() != nullptr) (void)zmq_socket_monitor(socket_.handle(), nullptr, 0);
  outbox_.set_socket(nullptr);
  socket_.close();
}

}  // namespace tether
