// RequestChannel's connections to the shards: the socket monitors' events,
// the liveness verdicts, the server process check, and shards that moved
// (see the file comment of worker/client/request_channel.h).
#include "worker/client/request_channel.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include <glog/logging.h>

#include "core/net/transport.h"
#include "worker/client/resend_window.h"

namespace tether {

namespace {

int64_t MillisecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

bool RequestChannel::shard_up(int shard) const {
  const Link& l = links_[shard];
  return !l.monitored || l.connected || !l.ever_connected;
}

void RequestChannel::TakeMonitorEvents(int monitor) {
  const int shard = monitor_shard_[monitor];
  Link& link = links_[shard];
  while (true) {
    zmq::message_t event, address;
    try {
      if (!monitors_[monitor].recv(event, zmq::recv_flags::dontwait)) return;
      // The second frame (the endpoint) comes with the first.
      if (event.more()) (void)monitors_[monitor].recv(address, zmq::recv_flags::dontwait);
    } catch (const zmq::error_t&) {
      return;
    }
    if (event.size() < sizeof(uint16_t) + sizeof(uint32_t)) continue;
    uint16_t id;
    uint32_t value;
    std::memcpy(&id, event.data(), sizeof(id));
    std::memcpy(&value, static_cast<const char*>(event.data()) + sizeof(id), sizeof(value));
    if (id == ZMQ_EVENT_CONNECTED) {
      link.refused_connects = 0;
      continue;
    }
    if (id == ZMQ_EVENT_CONNECT_RETRIED) {
      TakeRefusedConnect(shard, address.to_string());
      continue;
    }
    if (id == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH || id == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL ||
        id == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) {
      // A refused handshake is no passing outage: ZeroMQ would retry it
      // forever and every wait would end only at request_timeout_ms. A
      // refused key or another mechanism is final at once; a handshake cut
      // short without detail may be a server dying at that moment, so only
      // kKnownBadHandshakes of them in a row (ZeroMQ retries every 100 ms
      // or so) are.
      // A greeting not answered within the handshake timeout from a peer
      // that never completed one is no server dying: a Tether server
      // greets at once (its I/O threads do, however busy its loop).
      ++link.failed_handshakes;
      const bool final = id == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH ||
                         (id == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL && value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH) ||
                         (GreetingTimedOut(id, value) && !link.ever_connected) ||
                         link.failed_handshakes >= kKnownBadHandshakes;
      if (final && gone_.ok()) {
        gone_ = Status::FailedPrecondition(log_prefix_ + HandshakeFailure(shard, id, value));
        if (sticky_error_.ok()) sticky_error_ = gone_;
      }
      continue;
    }
    // Up means a ZMTP handshake succeeded: a TCP connect alone is accepted by
    // the kernel of a stopped (or hung) process too, and proves nothing.
    if (id == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
      link.failed_handshakes = 0;
      if (link.following && !link.failover_uncounted) {
        LOG(INFO) << log_prefix_ << "server shard " << shard << " connected at " << options_.servers[shard]
                  << " after " << MillisecondsSince(link.down_since) << " ms";
        link.following = false;
      } else if (link.ever_connected && !link.connected) {
        // Back where it dropped, no claimant found meanwhile: what was in
        // flight on the dropped connection is lost, judged as for a shard
        // with no chain (LinkDown).
        const bool lost = link.failover_uncounted && outstanding_[shard] > 0 && gone_.ok() && !leaving_;
        link.following = link.failover_uncounted = false;
        LOG(WARNING) << log_prefix_ << "server shard " << shard << " at " << options_.servers[shard]
                     << " is back after " << MillisecondsSince(link.down_since) << " ms";
        // A heartbeat at the next turn of the wait loop: a new process on
        // the address answers it (SameServerProcess), the same one does not.
        last_send_[shard] = SteadyClock::time_point{};
        if (lost) LoseInFlight(shard);
      }
      link.ever_connected = link.connected = true;
    } else if (id == ZMQ_EVENT_DISCONNECTED && (link.connected || !link.ever_connected)) {
      LinkDown(shard);
    }
  }
}

void RequestChannel::TakeRefusedConnect(int shard, const std::string& endpoint) {
  Link& link = links_[shard];
  // An event of the endpoint left (the dead primary's reconnects) says
  // nothing of the one followed.
  if (!link.following || endpoint != options_.servers[shard]) return;
  if (++link.refused_connects < kRefusedConnectsForDead || link.successors.empty() || !gone_.ok()) return;
  LOG(WARNING) << log_prefix_ << "server shard " << shard << ": the next server of its chain at " << endpoint
               << " refused the connection " << link.refused_connects
               << " times (no process listens there); following the chain on to " << link.successors.front();
  MoveAlongChain(shard);
}

void RequestChannel::LinkDown(int shard) {
  Link& link = links_[shard];
  // With no successor known, right after a stall of this process the
  // drop is most likely the shard's doing (this worker's heartbeats
  // stopped): judged as for a shard with no chain (LoseInFlight).
  const bool follows = link.connected && FollowsChain(shard) &&
                       (!link.successors.empty() || !stall_.Stalled(SteadyClock::now()));
  link.ever_connected = true;
  link.connected = false;
  link.down_since = SteadyClock::now();
  // Once this worker is leaving or said BYE, the job is over for it: a
  // server exiting closes its connection, which is the end of the job,
  // not a fault. A BYE whose reply is lost with it still fails below.
  if (follows) {
    // FollowChain, below, says where the shard went.
  } else if (leaving_ || said_bye_) {
    VLOG(1) << log_prefix_ << "server shard " << shard << " at " << options_.servers[shard]
            << " closed its connection (this worker is leaving)";
  } else {
    LOG(WARNING) << log_prefix_ << "server shard " << shard << " at " << options_.servers[shard]
                 << " disconnected; it is given up unless it is back within cluster.liveness_timeout_ms="
                 << options_.liveness_timeout_ms;
  }
  // What was in flight on the dropped connection is lost: ZeroMQ drops
  // the old pipe's messages, and a reply sent meanwhile has no route.
  // Waiting for those replies would last request_timeout_ms (minutes)
  // and a lost push can never be told from an applied one, so the run
  // fails now, naming the shard.
  // Replies that arrived before the connection closed are already in
  // the socket's queue (TCP delivers them before the close): take them
  // first, so that only what is really lost counts.
  if (Status st = DrainReplies(shard); !st.ok() && gone_.ok()) gone_ = st;
  // A replicated shard: its successor claims it and answers what was
  // lost here.
  if (follows && gone_.ok()) {
    FollowChain(shard);
    return;
  }
  // A connection whose handshake failed never carried a request: what
  // is queued stays queued for the next one (the handshake verdict is
  // the failure events' above).
  if (!leaving_ && outstanding_[shard] > 0 && gone_.ok() && link.failed_handshakes == 0)
    LoseInFlight(shard);
}

bool RequestChannel::GreetingTimedOut(int event, uint32_t value) {
  return event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL && value == EAGAIN;
}

std::string RequestChannel::HandshakeFailure(int shard, int event, uint32_t value) const {
  const std::string who = "server shard " + std::to_string(shard) + " at " + options_.servers[shard];
  const bool curve = options_.curve.enabled();
  if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)
    return who + " refused this worker's CURVE key (ZAP status " + std::to_string(value) + "): its public key " +
           options_.curve.public_key + " is not in the server's security.curve.authorized_keys";
  char code[16];
  std::snprintf(code, sizeof(code), "0x%x", value);
  const std::string detail = event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL ? std::string("protocol error ") + code
                                                                           : "no detail, errno " + std::to_string(value);
  if (event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL && value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH)
    return who + " uses another security mechanism: this worker has " +
           (curve ? "security.curve, the server not" : "no security.curve, the server has it") + " (" + detail + ")";
  const std::string not_zmtp = who + ": the peer does not speak ZMTP (not a Tether server? check --server_addresses)";
  if (GreetingTimedOut(event, value))
    return not_zmtp + ": it accepted the connection and completed no ZMTP greeting within " +
           std::to_string(kServerHandshakeTimeoutMs) + " ms (a stopped process does the same)";
  if (curve)
    return who + " failed the CURVE handshake (" + detail + "): does security.curve.server_public_key_file hold " +
           "that server's public key, and does the server use CURVE?";
  // A plain ZMTP server never closes a connection in its greeting; a CURVE
  // server may, before this side read that it uses another mechanism.
  if (event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL)
    return not_zmtp + ", or it requires CURVE (security.curve): it closed the connection before the ZMTP " +
           "greeting was done, " + std::to_string(kKnownBadHandshakes) + " times in a row (" + detail + ")";
  return who + " failed the handshake (" + detail + "): the server may require CURVE (security.curve)";
}

void RequestChannel::LoseInFlight(int shard) {
  const std::string lost = "server shard " + std::to_string(shard) + " at " + options_.servers[shard] +
                           " dropped its connection with " + std::to_string(outstanding_[shard]) +
                           " request(s) in flight, whose replies are lost";
  const auto now = SteadyClock::now();
  if (!stall_.Stalled(now)) {
    gone_ = Status::Unavailable(log_prefix_ + "server shard " + std::to_string(shard) + " at " +
                                options_.servers[shard] + " is gone: its connection dropped with " +
                                std::to_string(outstanding_[shard]) + " request(s) in flight, whose replies are lost");
    if (sticky_error_.ok()) sticky_error_ = gone_;
    return;
  }
  // This process did not run for a while: the shard dropped the connection
  // because this worker's heartbeats stopped, not because it failed. Once
  // the connection is back, the next heartbeat tells whether the shard also
  // removed this worker (REMOVED, DrainReplies), which is then the verdict.
  const int64_t wait_ms = std::max(1000, options_.liveness_timeout_ms);
  const std::string why = lost + " while this worker did not run for " + std::to_string(stall_.last_stall_ms()) +
                          " ms (the process was stopped or starved, past cluster.liveness_timeout_ms=" +
                          std::to_string(options_.liveness_timeout_ms) + ")";
  if (lost_after_stall_.ok()) {
    lost_after_stall_ = Status::Unavailable(log_prefix_ + why);
    lost_after_stall_until_ = now + std::chrono::milliseconds(wait_ms);
  }
  LOG(WARNING) << log_prefix_ << why << "; waiting up to " << wait_ms
               << " ms for the shard to say whether it removed this worker";
}

Status RequestChannel::CheckLiveness() {
  if (!gone_.ok()) return gone_;
  if (!lost_after_stall_.ok() && SteadyClock::now() >= lost_after_stall_until_) {
    gone_ = lost_after_stall_;
    if (sticky_error_.ok()) sticky_error_ = gone_;
    return gone_;
  }
  if (options_.first_connect_timeout_ms > 0 && !leaving_ &&
      MillisecondsSince(connect_time_) >= options_.first_connect_timeout_ms) {
    for (int s = 0; s < num_shards(); ++s) {
      const Link& l = links_[s];
      if (!l.monitored || l.ever_connected) continue;
      gone_ = Status::Unavailable(
          log_prefix_ + "server shard " + std::to_string(s) + " at " + options_.servers[s] +
          " never answered: no connection within " + std::to_string(options_.first_connect_timeout_ms) +
          " ms (cluster.startup_timeout_ms) " +
          (options_.servers_source.empty()
               ? std::string("(is that server up, and is this its address?)")
               : "(the address came from " + options_.servers_source +
                     ": the entry may be stale, left by a server of an earlier run with the same job id and "
                     "generation that died; give each run its own cluster.job_id)"));
      if (sticky_error_.ok()) sticky_error_ = gone_;
      return gone_;
    }
  }
  if (options_.liveness_timeout_ms <= 0 || leaving_) return Status::OK();
  for (int s = 0; s < num_shards(); ++s) {
    const Link& l = links_[s];
    if (!l.monitored || !l.ever_connected || l.connected) continue;
    const int64_t down_ms = MillisecondsSince(l.down_since);
    if (down_ms < options_.liveness_timeout_ms) continue;
    char seconds[32];
    std::snprintf(seconds, sizeof(seconds), "%.1f", down_ms / 1000.0);
    std::string why = l.following && !l.failover_uncounted
                          ? " is gone: its primary disconnected " + std::string(seconds) +
                                " s ago and this next server of its chain never answered"
                          : " is gone: disconnected " + std::string(seconds) + " s ago and not back";
    if (l.following && l.successors.empty() && options_.claim_lookup != nullptr)
      why += ", and its entry in " + options_.claim_lookup->source() + " named no other process claiming it";
    gone_ = Status::Unavailable(log_prefix_ + "server shard " + std::to_string(s) + " at " + options_.servers[s] + why +
                                " (cluster.liveness_timeout_ms=" + std::to_string(options_.liveness_timeout_ms) + ")");
    if (sticky_error_.ok()) sticky_error_ = gone_;
    return gone_;
  }
  return Status::OK();
}

void RequestChannel::ReportWaits() {
  const auto now = SteadyClock::now();
  int64_t waited_ms = 0;
  if (connect_report_.running()) {
    std::vector<std::string> waiting;
    for (int s = 0; s < num_shards(); ++s)
      if (links_[s].monitored && !links_[s].ever_connected) waiting.push_back(std::to_string(s) + " at " + server(s));
    if (waiting.empty() || leaving_) {
      connect_report_.Stop();
    } else {
      if (connect_report_.Due(now, &waited_ms))
        LOG(INFO) << log_prefix_ << WaitingForShardsLine(waiting, waited_ms, options_.first_connect_timeout_ms);
      return;  // the replies' wait is told once every shard is reached
    }
  }
  if (in_flight_ == 0 || leaving_) {
    reply_report_.Stop();
    return;
  }
  if (!reply_report_.running()) reply_report_.Start(now);
  if (!reply_report_.Due(now, &waited_ms)) return;
  std::vector<std::string> silent;
  for (int s = 0; s < num_shards(); ++s)
    if (outstanding_[s] > 0) silent.push_back(std::to_string(s));
  LOG(INFO) << log_prefix_
            << WaitingForRepliesLine(silent, static_cast<int>(in_flight_), waited_ms, options_.request_timeout_ms);
}

bool RequestChannel::KeepsCopies(int shard) const {
  return options_.server_lookup != nullptr && links_[shard].monitored && !links_[shard].ever_connected;
}

void RequestChannel::FollowMovedShards() {
  if (options_.server_lookup == nullptr || leaving_ || !gone_.ok()) return;
  ServerLookup& lookup = *options_.server_lookup;
  const auto now = SteadyClock::now();
  // One read per wake-up at most, the shards taking turns: a store that
  // does not answer holds a read for about a second.
  for (int i = 0; i < num_shards(); ++i) {
    const int s = (next_lookup_shard_ + i) % num_shards();
    const Link& link = links_[s];
    if (link.ever_connected && !unconnected_sent_[s].empty()) std::deque<Message>().swap(unconnected_sent_[s]);
    // A replicated shard follows its chain, not the rendezvous entry.
    if (!link.monitored || link.connected || link.replicated) continue;
    const uint64_t reads = lookup.reads();
    if (std::optional<std::string> moved = lookup.Poll(s, now)) MoveShard(s, *moved);
    if (lookup.reads() == reads) continue;
    next_lookup_shard_ = (s + 1) % num_shards();
    return;
  }
}

void RequestChannel::MoveShard(int shard, const std::string& endpoint) {
  const std::string old = options_.servers[shard];
  LOG(WARNING) << log_prefix_ << "server shard " << shard << ": its entry in " << options_.servers_source
               << " now names " << endpoint << " (was " << old << "); connecting there";
  const Status st = MoveSocket(shard, endpoint, unconnected_sent_[shard]);
  if (!st.ok() && gone_.ok()) {
    gone_ = Status::Unavailable(log_prefix_ + "server shard " + std::to_string(shard) + " moved to " + endpoint +
                                " but cannot be reached there: " + st.message());
    if (sticky_error_.ok()) sticky_error_ = gone_;
  }
}

bool RequestChannel::SameServerProcess(int shard, uint64_t incarnation) {
  Link& link = links_[shard];
  if (incarnation == 0 || incarnation == link.incarnation) return true;
  if (link.incarnation == 0) {
    link.incarnation = incarnation;
    return true;
  }
  // The first verdict stands (a connection that dropped with requests in
  // flight was already given up, before the new process answered).
  if (gone_.ok()) {
    char ids[80];
    std::snprintf(ids, sizeof(ids), "start id %016llx; this worker joined %016llx",
                  static_cast<unsigned long long>(incarnation), static_cast<unsigned long long>(link.incarnation));
    gone_ = Status::Unavailable(log_prefix_ + "server shard " + std::to_string(shard) + " at " +
                                options_.servers[shard] + " restarted (new process, " + ids +
                                ") and holds none of the job's tables; resume the job from a checkpoint (start "
                                "every server and worker again, the workers with --resume_from=CHECKPOINT_DIR; a "
                                "job without checkpoint.dir starts over)");
    if (sticky_error_.ok()) sticky_error_ = gone_;
  }
  return false;
}

Status RequestChannel::MoveSocket(int shard, const std::string& endpoint, std::deque<Message>& again) {
  Status st = ReconnectDealer(sockets_[shard], options_.servers[shard], endpoint);
  options_.servers[shard] = endpoint;
  if (options_.claim_lookup != nullptr) options_.claim_lookup->Known(shard, endpoint);
  // The rest of a reply in progress will not come from the new endpoint.
  joiners_[shard] = NewJoiner(shard, endpoint);
  links_[shard].failed_handshakes = 0;
  links_[shard].refused_connects = 0;
  // What was queued for the old endpoint was dropped with it.
  const std::string peer = "server " + std::to_string(shard) + " (" + endpoint + ")";
  for (size_t i = 0; st.ok() && i < again.size(); ++i) {
    Message m = SharedCopy(&again[i]);
    st = SendMessage(sockets_[shard], &m, nullptr, peer);
  }
  return st;
}

Status RequestChannel::SetChain(int shard, const std::vector<std::string>& endpoints) {
  for (size_t i = 0; i < endpoints.size(); ++i) {
    const std::string& ep = endpoints[i];
    if (ep.rfind("tcp://", 0) != 0 && ep.rfind("ipc://", 0) != 0)
      return Status::InvalidArgument(log_prefix_ + "server shard " + std::to_string(shard) + " at " +
                                     options_.servers[shard] + " named chain_endpoints[" + std::to_string(i) +
                                     "] '" + ep + "', which is not a tcp:// or ipc:// endpoint");
  }
  if (endpoints.empty()) return Status::OK();
  Link& link = links_[shard];
  link.replicated = true;
  link.successors.assign(endpoints.begin(), endpoints.end());
  return Status::OK();
}

void RequestChannel::FollowNewChain(int shard, const MessageHeader& h) {
  const std::vector<std::string> chain(h.chain_endpoints().begin(), h.chain_endpoints().end());
  if (Status st = SetChain(shard, chain); !st.ok()) {
    LOG(WARNING) << st.message() << ": not followed";
    return;
  }
  // The shard's replicas as its primary names them now, one more or one
  // fewer than before (a replica joined, or one was dropped).
  std::string list;
  for (const std::string& ep : chain) list += (list.empty() ? "" : ", ") + ep;
  LOG(INFO) << log_prefix_ << "server shard " << shard << "'s replicas (chain generation " << h.shard_generation()
            << "): " << list;
}

bool RequestChannel::CurrentGeneration(int shard, const MessageHeader& h) {
  Link& link = links_[shard];
  const uint64_t generation = h.shard_generation();
  if (generation == 0 || generation == link.generation) return true;  // 0: not stamped
  if (generation > link.generation) {
    // The process that claimed the shard (or the primary that dropped a
    // replica): its start id is the one to check from now on.
    if (link.generation != 0 && h.server_incarnation() != 0) link.incarnation = h.server_incarnation();
    link.generation = generation;
    return true;
  }
  if (!link.stale_logged) {
    link.stale_logged = true;
    LOG(WARNING) << log_prefix_ << "server shard " << shard << ": dropped " << TypeName(h.type())
                 << " of chain generation " << generation << " (the shard is at generation " << link.generation
                 << "; it comes from a former primary); later ones are dropped quietly";
  } else {
    VLOG(1) << log_prefix_ << "server shard " << shard << ": dropped " << TypeName(h.type()) << " of generation "
            << generation << " < " << link.generation;
  }
  return false;
}

bool RequestChannel::Acknowledge(int shard, const MessageHeader& h) {
  const uint64_t id = h.request_id();
  if (id == 0) return true;
  links_[shard].unacked.Ack(id);
  if (InFlight(id)) return true;
  // A message sent again after a failover whose first reply had arrived.
  VLOG(1) << log_prefix_ << "server shard " << shard << ": second reply " << TypeName(h.type()) << " to request "
          << id << " dropped";
  return false;
}

bool RequestChannel::FollowsChain(int shard) const {
  const Link& link = links_[shard];
  // With no successor known, a process the worker never heard of may have
  // claimed the shard: its rendezvous entry says (FollowClaims).
  const bool somewhere = !link.successors.empty() || (link.replicated && options_.claim_lookup != nullptr);
  if (!somewhere || leaving_ || !gone_.ok()) return false;
  // A worker that said BYE and has its answer is done: a server ending
  // closes its connection. A stall of this process is not asked about
  // (StallWatch): a long minibatch reads as one, and a primary's death
  // must be followed then too.
  return !(said_bye_ && link.unacked.empty());
}

void RequestChannel::FollowChain(int shard) {
  Link& link = links_[shard];
  link.following = true;
  if (link.successors.empty()) {
    LOG(WARNING) << log_prefix_ << "server shard " << shard << " at " << options_.servers[shard]
                 << " disconnected and no server of its chain is left to follow; looking for a process that "
                 << "claimed it in " << options_.claim_lookup->source() << " (up to cluster.liveness_timeout_ms="
                 << options_.liveness_timeout_ms << "), keeping " << link.unacked.size()
                 << " message(s) not yet acknowledged";
    link.failover_uncounted = true;  // counted if a claimant is followed
    return;
  }
  LOG(WARNING) << log_prefix_ << "server shard " << shard << " at " << options_.servers[shard]
               << " disconnected; following its chain to " << link.successors.front() << " and sending again "
               << link.unacked.size() << " message(s) not yet acknowledged";
  ++stats_.failovers;
  MoveAlongChain(shard);
}

void RequestChannel::MoveAlongChain(int shard) {
  Link& link = links_[shard];
  const std::string next = link.successors.front();
  link.successors.pop_front();
  MoveFollowing(shard, next);
}

void RequestChannel::MoveFollowing(int shard, const std::string& next) {
  const std::string old = options_.servers[shard];
  // Kept with no successor left too: the new primary may gain a replica.
  const Status st = MoveSocket(shard, next, links_[shard].unacked.messages());
  if (!st.ok() && gone_.ok()) {
    gone_ = Status::Unavailable(log_prefix_ + "server shard " + std::to_string(shard) + " at " + old +
                                " disconnected and its successor " + next + " cannot be reached: " + st.message());
    if (sticky_error_.ok()) sticky_error_ = gone_;
  }
}

void RequestChannel::FollowClaims() {
  if (options_.claim_lookup == nullptr || leaving_ || !gone_.ok()) return;
  const auto now = SteadyClock::now();
  for (int s = 0; s < num_shards(); ++s) {
    Link& link = links_[s];
    // The chain the worker knows ran out and its last endpoint does not
    // answer (yet): a process the worker never heard of may hold the shard.
    if (!link.replicated || !link.following || !link.successors.empty()) continue;
    std::optional<std::string> claimant = options_.claim_lookup->Poll(s, now);
    if (!claimant) continue;
    LOG(WARNING) << log_prefix_ << "server shard " << s << ": its chain as this worker knows it ends at "
                 << options_.servers[s] << ", which has not answered; its entry in "
                 << options_.claim_lookup->source() << " names " << *claimant
                 << ", a process that claimed the shard since: following it there and sending again "
                 << link.unacked.size() << " message(s) not yet acknowledged";
    if (link.failover_uncounted) ++stats_.failovers;
    link.failover_uncounted = false;
    MoveFollowing(s, *claimant);
  }
}

}  // namespace tether
