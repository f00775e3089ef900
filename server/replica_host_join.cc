// ReplicaHost's part for a process that joins a running shard as its
// replica (tether-server --join_as_replica; server/replica_host.h): which
// shard it asks, and the shard's whole state it restores before following.
#include <algorithm>

#include <glog/logging.h>

#include "core/memory_fit.h"
#include "core/net/transport.h"
#include "server/replica_host.h"
#include "server/shard_state.h"

namespace tether {
namespace {

int64_t MsBetween(ReplicaHost::Clock::time_point a, ReplicaHost::Clock::time_point b) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(b - a).count();
}

int64_t MsSince(ReplicaHost::Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(ReplicaHost::Clock::now() - t).count();
}

}  // namespace

Status ReplicaHost::StartCandidate() {
  shard_ = candidates_[candidate_];
  log_prefix_ = "[joining replica of shard " + std::to_string(shard_) + "] ";
  copy_ = std::make_unique<ServerShard>(config_, shard_, nullptr, "joined replica");
  copy_->BeginCopy();
  copy_->set_key_list_cache_bytes(key_list_cache_bytes_);
  refused_ = false;
  wait_noted_ = false;
  if (!config_.cluster().rendezvous().empty() && passes_ == 0)
    LOG(INFO) << log_prefix_ << "looks shard " << shard_ << "'s primary up in rendezvous "
              << config_.cluster().rendezvous() << " (waiting up to cluster.startup_timeout_ms="
              << config_.cluster().startup_timeout_ms() << " ms for the job's servers to be published there)";
  TETHER_ASSIGN_OR_RETURN(primary_endpoint_, FindPrimary());
  last_lookup_ = Clock::now();
  TETHER_RETURN_IF_ERROR(copy_->Bind(bind_endpoint_));
  advertised_ = AdvertisedEndpoint(copy_->endpoint(), advertise_host_);
  LOG_IF(INFO, passes_ == 0) << log_prefix_ << "asks shard " << shard_ << "'s primary at " << primary_endpoint_
            << " to take this process as its replica (serving at " << advertised_ << " once it claims the shard)";
  return Connect();
}

bool ReplicaHost::AskAgainLater(const Status& refusal, Status* result) {
  if (!join_ || state_total_ != 0 || refusal_kind_ != ReplicateAckBody::JOIN_LATER || candidates_.size() != 1)
    return false;
  const auto now = Clock::now();
  const int limit_ms = config_.cluster().startup_timeout_ms();
  if (refused_for_now_since_ == Clock::time_point{}) {
    refused_for_now_since_ = now;
    LOG(INFO) << refusal.message() << "; asking again every " << kAskAgainMs << " ms, up to "
              << "cluster.startup_timeout_ms=" << limit_ms << " ms";
  } else if (MsBetween(refused_for_now_since_, now) > limit_ms) {
    *result = Status::FailedPrecondition(refusal.message() + " (asked again for cluster.startup_timeout_ms=" +
                                         std::to_string(limit_ms) + " ms)");
    return false;
  }
  // The same connection asks again; it sends nothing else meanwhile (an
  // acknowledgement from a process the shard does not keep is refused).
  refused_ = false;
  asking_again_ = true;
  ask_again_at_ = now + std::chrono::milliseconds(kAskAgainMs);
  return true;
}

Status ReplicaHost::AskAgainIfDue(Clock::time_point now) {
  if (!asking_again_ || now < ask_again_at_) return Status::OK();
  asking_again_ = false;
  asked_again_.fetch_add(1);
  if (!ask_every_shard_) return SayHello();
  // Another pass over every shard, from the first.
  ask_every_shard_ = false;
  ++passes_;
  refusals_.clear();
  full_refusals_ = later_refusals_ = 0;
  CloseConnection();
  copy_->CloseSocket();
  candidate_ = 0;
  return StartCandidate();
}

bool ReplicaHost::AskEveryShardAgain(const std::string& all, Status* result) {
  const auto now = Clock::now();
  const int limit_ms = config_.cluster().startup_timeout_ms();
  if (refused_for_now_since_ == Clock::time_point{}) {
    refused_for_now_since_ = now;
    LOG(INFO) << "[joining replica] no shard took this process yet (" << all << "); asking every shard again every "
              << kAskAgainMs << " ms, up to cluster.startup_timeout_ms=" << limit_ms << " ms";
  } else if (MsBetween(refused_for_now_since_, now) > limit_ms) {
    *result = Status::FailedPrecondition("no shard took this process as its replica (asked every " +
                                         std::to_string(kAskAgainMs) + " ms for cluster.startup_timeout_ms=" +
                                         std::to_string(limit_ms) + " ms; the last answers: " + all + ")");
    return false;
  }
  refused_ = false;
  asking_again_ = ask_every_shard_ = true;
  ask_again_at_ = now + std::chrono::milliseconds(kAskAgainMs);
  return true;
}

bool ReplicaHost::NextCandidate(const Status& refusal, Status* result) {
  if (!join_ || state_total_ != 0) return false;
  // Every shard of the job would refuse a process of another configuration.
  if (refusal_kind_ == ReplicateAckBody::CONFIG_DIFFERS) return false;
  refusals_.push_back(refusal.message());
  if (refusal_kind_ == ReplicateAckBody::CHAIN_FULL) ++full_refusals_;
  if (refusal_kind_ == ReplicateAckBody::JOIN_LATER) ++later_refusals_;
  if (candidate_ + 1 >= candidates_.size()) {
    // Every shard asked refused: name each refusal, not only the last.
    std::string all;
    for (const std::string& r : refusals_) all += (all.empty() ? "" : "; ") + r;
    // A shard that refused for now may take this process once it dropped
    // a replica that went or once another joiner is done.
    if (later_refusals_ > 0 && candidates_.size() > 1) return AskEveryShardAgain(all, result);
    nothing_to_join_ = full_refusals_ == refusals_.size();
    if (refusals_.size() > 1)
      *result = Status::FailedPrecondition("no shard took this process as its replica (" +
                                           std::to_string(refusals_.size()) + " asked): " + all);
    return false;
  }
  LOG_IF(INFO, passes_ == 0) << refusal.message() << "; asking the next shard";
  CloseConnection();
  copy_->CloseSocket();
  ++candidate_;
  *result = StartCandidate();
  return result->ok();
}

Status ReplicaHost::Relookup() {
  last_lookup_ = Clock::now();
  if (config_.cluster().rendezvous().empty()) return Status::OK();
  StatusOr<std::string> now_there = FindPrimary(/*wait_ms=*/0);
  if (!now_there.ok() || *now_there == primary_endpoint_) return Status::OK();
  LOG(INFO) << log_prefix_ << "shard " << shard_ << "'s rendezvous entry moved from " << primary_endpoint_ << " to "
            << *now_there << " (the shard failed over): asking there";
  CloseConnection();
  primary_endpoint_ = *now_there;
  const auto started = started_;
  TETHER_RETURN_IF_ERROR(Connect());
  started_ = started;  // the wait for an answer is one wait
  return Status::OK();
}

void ReplicaHost::CloseConnection() {
  if (dealer_.handle() != nullptr) {
    (void)zmq_socket_monitor(dealer_.handle(), nullptr, 0);
    dealer_.close();
  }
  monitor_.close();
  connected_ = false;
}

Status ReplicaHost::TakeStatePart(const Message& m) {
  const ReplicaStateBody& b = m.header.replica_state();
  const std::string peer = "shard " + std::to_string(shard_) + "'s primary at " + primary_endpoint_;
  if (!join_ || restored_ || b.shard() != shard_)
    return Status::DataLoss(log_prefix_ + peer + " sent a part of shard " + std::to_string(b.shard()) +
                            "'s state, which this process did not ask for");
  if (state_total_ == 0) {
    // The first part: the whole must fit beside what this host has free.
    StatusOr<uint64_t> free = ReadMemAvailableBytes();
    if (b.bytes_total() == 0 || (free.ok() && b.bytes_total() > *free))
      return Status::ResourceExhausted(log_prefix_ + peer + " sends a state of " + std::to_string(b.bytes_total()) +
                                       " bytes; this host has " + (free.ok() ? std::to_string(*free) : "?") +
                                       " bytes available (MemAvailable)");
    state_total_ = b.bytes_total();
    state_seq_ = b.log_seq();
    slot_ = b.learner();
    state_started_ = Clock::now();
    state_.reserve(state_total_);
  }
  if (b.bytes_total() != state_total_ || b.log_seq() != state_seq_ || b.offset() != state_.size() ||
      b.part_bytes() > state_total_ - state_.size() || b.part_bytes() > m.keys.size() ||
      m.keys.size() - b.part_bytes() >= 8)
    return Status::DataLoss(log_prefix_ + peer + ": a state part at offset " + std::to_string(b.offset()) + " of " +
                            std::to_string(b.part_bytes()) + " bytes (keys frame " + std::to_string(m.keys.size()) +
                            ") does not continue the " + std::to_string(state_.size()) + " of " +
                            std::to_string(state_total_) + " bytes received");
  state_.append(static_cast<const char*>(m.keys.data()), b.part_bytes());
  connected_ = true;
  if (state_.size() < state_total_) return Status::OK();
  return RestoreCopy();
}

Status ReplicaHost::RestoreCopy() {
  const auto received = Clock::now();
  const std::string peer = "shard " + std::to_string(shard_) + "'s primary at " + primary_endpoint_;
  TETHER_RETURN_IF_ERROR(copy_->RestoreState(state_, peer));
  restored_ = true;
  received_ = applied_ = state_seq_;
  LOG(INFO) << log_prefix_ << "restored shard " << shard_ << "'s state as of entry " << state_seq_ << " ("
            << state_.size() << " bytes, received in " << std::chrono::duration_cast<std::chrono::milliseconds>(
                                                            received - state_started_).count()
            << " ms, restored in " << MsSince(received) << " ms); following its primary";
  std::string().swap(state_);
  return Status::OK();
}

}  // namespace tether
