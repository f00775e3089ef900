// ReplicaLink's part in re-replication: a process that joins a shard with
// fewer than cluster.replicas replicas (REPLICA_HELLO.join) is the shard's
// learner, is sent
// the shard's whole state, follows its entries and becomes its replica once
// it caught up (server/replica_link.h "Joining").
#include <algorithm>
#include <utility>

#include <glog/logging.h>

#include "core/busy_witness.h"
#include "replication/chain_view.h"
#include "server/replica_link.h"
#include "server/shard_state.h"

namespace tether {
namespace {

// A joining replica's state travels in parts of this many bytes.
constexpr size_t kStatePartBytes = size_t{4} << 20;
// A learner this close behind counts as caught up: commits wait for it from
// then on (a few ms of its applying, once).
constexpr uint64_t kCatchUpLagEntries = 64;

int64_t MsBetween(ReplicaLink::Clock::time_point a, ReplicaLink::Clock::time_point b) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(b - a).count();
}

}  // namespace

std::string ReplicaLink::WhyNoJoin(const std::string& identity, const ReplicaHelloBody& b, Clock::time_point now,
                                   ReplicateAckBody::JoinRefusal* kind) {
  *kind = ReplicateAckBody::JOIN_REFUSED;
  const std::string shard = "shard " + std::to_string(shard_);
  if (b.shard() != shard_)
    return "this process serves " + shard + " as its primary, not shard " + std::to_string(b.shard());
  if (const std::string differs = ConfigMismatch(b); !differs.empty()) {
    *kind = ReplicateAckBody::CONFIG_DIFFERS;
    return differs;
  }
  if (b.state_format() != kShardStateFormatVersion)
    return "the joining process writes shard state format " + std::to_string(b.state_format()) + ", this one " +
           std::to_string(kShardStateFormatVersion) + ": start it from the same build as the servers";
  if (b.endpoint().empty() || b.applied() != 0) return "a joining replica must start empty and name the endpoint it serves on";
  if (!state_source_) return shard + " cannot send its state";
  if (!stepped_down_.ok()) return shard + "'s primary is unsure it still is one";
  *kind = ReplicateAckBody::JOIN_LATER;
  if (suspect_) return shard + "'s primary is unsure it still is one";
  if (!learner_identity_.empty() && identity != learner_identity_)
    return "another process (at " + learner_endpoint_ + ") is joining " + shard + " now";
  for (const Leg& leg : legs_)
    if (leg.identity.empty())
      return shard + " waits for its replica (server process " + std::to_string(leg.process) +
             ") to introduce itself";
  const int wanted = config_.cluster().replicas();
  if (static_cast<int>(legs_.size()) < wanted) return "";
  if (const std::string doubt = DoubtfulReplica(now); !doubt.empty()) return shard + " " + doubt;
  *kind = ReplicateAckBody::CHAIN_FULL;
  return shard + " has all its replicas (cluster.replicas=" + std::to_string(wanted) + ": " + ReplicaNames() + ")";
}

std::string ReplicaLink::ConfigMismatch(const ReplicaHelloBody& b) const {
  const auto differs = [&](const std::string& field, const std::string& theirs, const std::string& ours) {
    return "the process at " + b.endpoint() + " runs with " + field + "=" + theirs + ", this shard with " + ours +
           " (another job's configuration, or a flag given to one process only)";
  };
  const ClusterConfig& c = config_.cluster();
  if (b.has_num_servers() && b.num_servers() != c.num_servers())
    return differs("cluster.num_servers", std::to_string(b.num_servers()), std::to_string(c.num_servers()));
  if (b.has_replicas() && b.replicas() != c.replicas())
    return differs("cluster.replicas", std::to_string(b.replicas()), std::to_string(c.replicas()));
  if (b.has_consistency_model() && b.consistency_model() != config_.consistency().model())
    return differs("consistency.model", ConsistencyModel_Name(b.consistency_model()),
                   ConsistencyModel_Name(config_.consistency().model()));
  if (b.has_staleness() && b.staleness() != config_.consistency().staleness())
    return differs("consistency.staleness", std::to_string(b.staleness()),
                   std::to_string(config_.consistency().staleness()));
  return "";
}

std::string ReplicaLink::DoubtfulReplica(Clock::time_point now) {
  const int64_t silent_ms = 2 * std::max(50, config_.cluster().heartbeat_interval_ms());
  for (const Leg& leg : legs_) {
    const std::string who = "its replica (process " + std::to_string(leg.process) + " at " + leg.endpoint + ")";
    if (!Reachable(leg.identity)) return "is dropping " + who + ": its connection closed";
    const int64_t quiet = MsBetween(leg.last_heard, now);
    if (quiet > silent_ms)
      return "waits to hear from " + who + ", silent for " + std::to_string(quiet) +
             " ms (dropped past cluster.liveness_timeout_ms=" +
             std::to_string(config_.cluster().liveness_timeout_ms()) + ")";
  }
  return "";
}

void ReplicaLink::OnJoin(const std::string& identity, const Message& m, Clock::time_point now) {
  const ReplicaHelloBody& b = m.header.replica_hello();
  if (!identity.empty() && identity == learner_identity_) return;  // said again
  ReplicateAckBody::JoinRefusal kind = ReplicateAckBody::JOIN_REFUSED;
  if (const std::string why = WhyNoJoin(identity, b, now, &kind); !why.empty()) {
    LOG(WARNING) << log_prefix_ << "a process at " << b.endpoint() << " asked to join shard " << b.shard()
                 << " as its replica: refused" << (kind == ReplicateAckBody::JOIN_LATER ? " for now" : "") << ": "
                 << why;
    Refuse(identity, why, kind);
    return;
  }
  // The loop does not turn while the state is built and sent (seconds for
  // a large table): a witness tells that from a stall (ForgiveOwnWork).
  BusyWitness witness;
  const auto taken = Clock::now();
  StatusOr<std::vector<std::string>> state = state_source_();
  if (!state.ok()) {
    ForgiveOwnWork(witness.Finish());
    LOG(ERROR) << log_prefix_ << "shard " << shard_ << "'s state for a joining replica: " << state.status().message();
    Refuse(identity, "shard " + std::to_string(shard_) + "'s state could not be taken: " + state.status().message());
    return;
  }
  // A slot no member of the chain holds (a copy that joined and then
  // claimed the shard holds one past the server processes).
  while (log_.view().Contains(next_learner_slot_)) ++next_learner_slot_;
  learner_slot_ = next_learner_slot_++;
  learner_identity_ = identity;
  learner_endpoint_ = b.endpoint();
  learner_heard_ = now;
  learner_failure_.clear();
  log_.Adopt(WithLearner(log_.view(), learner_slot_));
  const uint64_t seq = log_.applied();
  // Beside replicas the primary is not the log's tail: the learner is
  // followed here, as each replica is.
  learner_beside_ = !legs_.empty();
  learner_counts_ = false;
  learner_copy_ = learner_sent_ = learner_acked_ = seq;
  const Status sent = SendState(*state, seq);
  ForgiveOwnWork(witness.Finish());
  learner_heard_ = Clock::now();
  if (!sent.ok()) {
    DropLearner("its state could not be sent (" + sent.message() + ")");
    return;
  }
  if (!learner_beside_) {
    log_.StartLearnerAt(seq);
    log_.set_catch_up_lag(kCatchUpLagEntries);
  }
  size_t bytes = 0;
  for (const std::string& piece : *state) bytes += piece.size();
  LOG(INFO) << log_prefix_ << "a replica joins shard " << shard_ << " from " << b.endpoint() << ": sent it the shard's "
            << bytes << " bytes of state as of entry " << seq << " ("
            << MsBetween(taken, Clock::now()) << " ms); " << log_.view().ToString();
}

void ReplicaLink::ForgiveOwnWork(const BusyWitness::Verdict& work) {
  const int liveness_ms = config_.cluster().liveness_timeout_ms();
  // A witness that did not run either saw the process stopped or starved:
  // Suspect judges that gap as any stall.
  if (liveness_ms <= 0 || !work.RanThroughout(std::chrono::milliseconds(liveness_ms / 2))) return;
  forgiven_ms_ += work.busy.count();
  forgiven_total_ms_ += work.busy.count();
  // The loop read nothing meanwhile: the replicas' acknowledgements wait in
  // the socket, and their silence is counted from the work's end.
  for (Leg& leg : legs_) leg.last_heard += work.busy;
}

Status ReplicaLink::SendState(const std::vector<std::string>& pieces, uint64_t seq) {
  size_t total = 0;
  for (const std::string& piece : pieces) total += piece.size();
  size_t offset = 0;
  size_t piece = 0, in_piece = 0;  // where the next part's bytes start
  do {
    const size_t n = std::min(kStatePartBytes, total - offset);
    Message m;
    m.header.set_type(REPLICA_STATE);
    m.header.set_shard_generation(generation());
    ReplicaStateBody* b = m.header.mutable_replica_state();
    b->set_shard(shard_);
    b->set_log_seq(seq);
    b->set_offset(offset);
    b->set_bytes_total(total);
    b->set_part_bytes(n);
    b->set_learner(learner_slot_);
    const size_t padded = (n + 7) / 8 * 8;
    m.header.set_num_keys(padded / 8);
    m.keys.rebuild(padded);
    char* out = static_cast<char*>(m.keys.data());
    for (size_t filled = 0; filled < n;) {
      const std::string& from = pieces[piece];
      const size_t take = std::min(n - filled, from.size() - in_piece);
      std::copy(from.data() + in_piece, from.data() + in_piece + take, out + filled);
      filled += take;
      in_piece += take;
      if (in_piece == from.size()) {
        ++piece;
        in_piece = 0;
      }
    }
    std::fill(out + n, out + padded, 0);
    TETHER_RETURN_IF_ERROR(
        SendMessageNoWait(*socket_, &m, learner_identity_, "replica joining shard " + std::to_string(shard_)));
    offset += n;
  } while (offset < total);
  return Status::OK();
}

void ReplicaLink::OnLearnerAck(const Message& m, Clock::time_point now) {
  learner_heard_ = now;
  const ReplicateAckBody& b = m.header.replicate_ack();
  if (b.refused()) {
    DropLearner("it gave up: " + b.reason());
    return;
  }
  if (learner_beside_) {
    OnBesideAck(b.applied());
    return;
  }
  log_.OnAck(learner_slot_, log_.view(), b.applied());
  if (log_.LearnerCaughtUp()) AppendLearner();
}

void ReplicaLink::OnBesideAck(uint64_t applied) {
  // An acknowledgement from before the learner installed its copy says
  // nothing.
  if (applied < learner_copy_) return;
  learner_acked_ = std::max(learner_acked_, std::min(applied, learner_sent_));
  // Within the lag, commits wait for the learner: under a steady stream its
  // acknowledgement trails by a round trip, so an exact match may never come.
  if (!learner_counts_ && log_.applied() - learner_acked_ <= kCatchUpLagEntries) learner_counts_ = true;
  if (!learner_counts_) return;
  Commit();
  // Appended only once it holds every committed entry: the chain's later
  // members may claim the shard from it.
  if (learner_acked_ >= log_.commit()) AppendLearner();
}

void ReplicaLink::ForwardBeside() {
  if (!learner_beside_ || learner_identity_.empty()) return;
  for (const LogEntry& e : log_.EntriesAfter(learner_sent_)) {
    if (e.seq != learner_sent_ + 1) {
      learner_failure_ = "entry " + std::to_string(learner_sent_ + 1) + " it lacks is no longer kept";
      return;
    }
    SendEntry(e, learner_identity_, false);
    learner_sent_ = e.seq;
  }
}

void ReplicaLink::AppendLearner() {
  log_.Adopt(WithLearnerAppended(log_.view()));
  Leg leg;
  leg.process = learner_slot_;
  leg.identity = learner_identity_;
  leg.endpoint = learner_endpoint_;
  leg.acked = learner_beside_ ? learner_acked_ : log_.learner_applied();
  // Every entry so far was forwarded to it as the learner.
  leg.sent = learner_beside_ ? learner_sent_ : log_.applied();
  leg.last_heard = learner_heard_;
  leg.send_failure = learner_failure_;
  legs_.push_back(std::move(leg));
  RebuildChain();
  chain_generation_ = generation();
  learner_identity_.clear();
  learner_slot_ = -1;
  learner_beside_ = learner_counts_ = false;
  LOG(INFO) << log_prefix_ << "the replica that joined shard " << shard_ << " at " << learner_endpoint_
            << " caught up at entry " << log_.applied() << ": replies wait for it from now on; "
            << log_.view().ToString();
  // An entry of its own tells the replica it counts now (REPLICATE.member),
  // also when no worker sends anything.
  Message mark;
  mark.header.set_type(SHARD_DECISION);
  mark.header.mutable_shard_decision()->set_remove_rank(-1);
  Append("", mark);
}

void ReplicaLink::DropLearner(const std::string& why) {
  if (learner_identity_.empty()) return;
  Refuse(learner_identity_, "shard " + std::to_string(shard_) + " dropped this joining replica: " + why);
  LOG(WARNING) << log_prefix_ << "the replica joining shard " << shard_ << " from " << learner_endpoint_
               << " is dropped: " << why;
  log_.Adopt(Without(log_.view(), {learner_slot_}));
  learner_identity_.clear();
  learner_slot_ = -1;
  learner_failure_.clear();
  // What waited for it no longer does.
  learner_beside_ = learner_counts_ = false;
  Commit();
}

void ReplicaLink::TickLearner(Clock::time_point now) {
  if (learner_identity_.empty()) return;
  if (!learner_failure_.empty()) {
    DropLearner(learner_failure_);
    return;
  }
  // A learner restores the state before it acknowledges: its silence is
  // bounded as a start is.
  const int silent_ms = std::max(config_.cluster().startup_timeout_ms(), config_.cluster().liveness_timeout_ms());
  if (MsBetween(learner_heard_, now) > silent_ms) {
    DropLearner("it was silent for " + std::to_string(silent_ms) + " ms");
    return;
  }
  if (MsBetween(learner_probe_, now) < 100) return;
  learner_probe_ = now;
  if (!Reachable(learner_identity_)) DropLearner("its connection closed");
}

}  // namespace tether
