#include "server/reply_cache.h"

#include <algorithm>

namespace tether {
namespace {

std::string FrameBytes(const zmq::message_t& frame) {
  return std::string(static_cast<const char*>(frame.data()), frame.size());
}

zmq::message_t FrameOf(const std::string& bytes) { return zmq::message_t(bytes.data(), bytes.size()); }

}  // namespace

ReplyCache::ReplyCache(ReplyCacheOptions options) : options_(options) {
  options_.ids_per_identity = std::max(options_.ids_per_identity, 1);
  options_.identities = std::max(options_.identities, 1);
}

bool ReplyCache::Tracked(const std::string& identity, const MessageHeader& h) {
  // Heartbeats are owed no reply and never sent again; the messages between
  // server processes are not a worker's requests; a decision of the
  // primary's own timers comes from no connection.
  switch (h.type()) {
    case HEARTBEAT:
    case REPLICA_HELLO:
    case REPLICATE:
    case REPLICATE_ACK:
    case SHARD_DECISION: return false;
    default: return !identity.empty() && h.request_id() != 0;
  }
}

ReplyCache::Verdict ReplyCache::Take(const std::string& identity, const MessageHeader& h, Message* reply, int* rank) {
  if (!Tracked(identity, h)) return Verdict::kHandle;
  Peer& peer = PeerFor(identity);
  peer.last_take = ++take_count_;
  const uint64_t id = h.request_id();
  if (id <= peer.max_id) return Again(&peer, id, reply, rank);
  peer.max_id = id;
  peer.entries.push_back(Entry{id, 0, h.type(), false});
  if (static_cast<int>(peer.entries.size()) > options_.ids_per_identity) {
    DropReply(peer.entries.front().reply_seq);
    peer.entries.pop_front();
  }
  return Verdict::kHandle;
}

ReplyCache::Verdict ReplyCache::Again(Peer* peer, uint64_t id, Message* reply, int* rank) {
  const Entry* e = Find(peer, id);
  if (e == nullptr) {
    // Older than every id kept (or an id this connection never used: its
    // ids only grow, so it was never one of this shard's requests).
    ++stats_.dropped_forgotten;
    return Verdict::kDropForgotten;
  }
  if (!e->answered) {
    // A CLOCK or an ABORT is answered by none (shard 0 answers a CLOCK at
    // once, or never when it parks the worker): it was applied.
    if (e->type == CLOCK || e->type == ABORT) {
      ++stats_.dropped_applied;
      return Verdict::kDropApplied;
    }
    ++stats_.dropped_pending;
    return Verdict::kDropPending;
  }
  if (IsRead(e->type)) {
    ++stats_.handled_again;
    return Verdict::kHandleAgain;
  }
  const auto it = replies_.find(e->reply_seq);
  if (it == replies_.end()) {
    ++stats_.dropped_applied;
    return Verdict::kDropApplied;
  }
  const Cached& c = it->second;
  reply->header.Clear();
  (void)reply->header.ParseFromString(c.header);  // bytes this cache serialized
  reply->keys = FrameOf(c.keys);
  reply->values = FrameOf(c.values);
  *rank = c.rank;
  ++stats_.resent;
  return Verdict::kResend;
}

void ReplyCache::Sent(const std::string& identity, const Message& reply, int rank) {
  const uint64_t id = reply.header.request_id();
  if (id == 0) return;
  const auto p = peers_.find(identity);
  if (p == peers_.end()) return;
  Entry* e = Find(&p->second, id);
  // The worker acts on the first reply to a request and drops any later
  // one: the first is the one to send again.
  if (e == nullptr || e->answered) return;
  e->answered = true;
  if (IsRead(e->type)) return;
  Cached c;
  c.identity = identity;
  c.id = id;
  c.rank = rank;
  c.header = reply.header.SerializeAsString();
  c.keys = FrameBytes(reply.keys);
  c.values = FrameBytes(reply.values);
  bytes_ += c.bytes();
  e->reply_seq = next_seq_++;
  replies_.emplace(e->reply_seq, std::move(c));
  EvictReplies();
}

ReplyCache::Peer& ReplyCache::PeerFor(const std::string& identity) {
  if (auto it = peers_.find(identity); it != peers_.end()) return it->second;
  if (static_cast<int>(peers_.size()) >= options_.identities) {
    // The connection heard from longest ago: the order of takes is the
    // same on every copy, so each forgets the same one.
    auto oldest = peers_.begin();
    for (auto it = peers_.begin(); it != peers_.end(); ++it)
      if (it->second.last_take < oldest->second.last_take) oldest = it;
    for (const Entry& e : oldest->second.entries) DropReply(e.reply_seq);
    peers_.erase(oldest);
    ++stats_.identities_evicted;
  }
  return peers_[identity];
}

ReplyCache::Entry* ReplyCache::Find(Peer* peer, uint64_t id) {
  auto& entries = peer->entries;
  const auto it =
      std::lower_bound(entries.begin(), entries.end(), id, [](const Entry& e, uint64_t v) { return e.id < v; });
  return it != entries.end() && it->id == id ? &*it : nullptr;
}

void ReplyCache::DropReply(uint64_t seq) {
  if (seq == 0) return;
  const auto it = replies_.find(seq);
  if (it == replies_.end()) return;
  bytes_ -= it->second.bytes();
  replies_.erase(it);
}

void ReplyCache::EvictReplies() {
  while (bytes_ > options_.reply_bytes && !replies_.empty()) {
    const auto oldest = replies_.begin();
    auto p = peers_.find(oldest->second.identity);
    if (p != peers_.end()) {
      if (Entry* e = Find(&p->second, oldest->second.id); e != nullptr) e->reply_seq = 0;
    }
    bytes_ -= oldest->second.bytes();
    replies_.erase(oldest);
    ++stats_.replies_evicted;
  }
}

std::vector<std::string> ReplyCache::Identities() const {
  std::vector<std::string> out;
  out.reserve(peers_.size());
  for (const auto& [identity, peer] : peers_) out.push_back(identity);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<ReplyCache::KeptId> ReplyCache::Kept(const std::string& identity) const {
  std::vector<KeptId> out;
  const auto p = peers_.find(identity);
  if (p == peers_.end()) return out;
  for (const Entry& e : p->second.entries) {
    KeptId k;
    k.id = e.id;
    k.type = e.type;
    k.answered = e.answered;
    if (const auto it = replies_.find(e.reply_seq); e.reply_seq != 0 && it != replies_.end()) {
      k.has_reply = true;
      k.rank = it->second.rank;
      k.reply = it->second.header + it->second.keys + it->second.values;
    }
    out.push_back(std::move(k));
  }
  return out;
}

std::string ReplyCache::DescribeSentAgain() const {
  const Stats& s = stats_;
  const uint64_t total = s.resent + s.handled_again + s.dropped_pending + s.dropped_applied + s.dropped_forgotten;
  if (total == 0) return "";
  return std::to_string(total) + " message(s) sent again: " + std::to_string(s.resent) +
         " answered from the reply cache, " + std::to_string(s.handled_again) + " read(s) handled again, " +
         std::to_string(s.dropped_pending) + " dropped while their answer was still to come, " +
         std::to_string(s.dropped_applied) + " dropped as applied before (no reply kept), " +
         std::to_string(s.dropped_forgotten) + " dropped as older than the request ids kept";
}

const char* ReplyCache::VerdictName(Verdict v) {
  switch (v) {
    case Verdict::kHandle: return "new";
    case Verdict::kHandleAgain: return "a read answered before: handled again";
    case Verdict::kResend: return "answered before: the same reply sent again";
    case Verdict::kDropPending: return "not answered yet: its answer is still to come";
    case Verdict::kDropApplied: return "applied before, no reply kept: dropped";
    case Verdict::kDropForgotten: return "older than the request ids kept: dropped";
  }
  return "?";
}

}  // namespace tether
