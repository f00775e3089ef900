#include "server/reply_cache.h"

#include <algorithm>

namespace tether {
namespace {

Status Bad(const std::string& field, const std::string& what) {
  return Status::DataLoss("shard state: replies." + field + " " + what);
}

std::string At(const std::string& name, int i) { return name + "[" + std::to_string(i) + "]"; }

std::string FrameBytes(const zmq::message_t& frame) {
  return std::string(static_cast<const char*>(frame.data()), frame.size());
}

zmq::message_t FrameOf(const std::string& bytes) { return zmq::message_t(bytes.data(), bytes.size()); }

}  // namespace

ReplyCache::ReplyCache(ReplyCacheOptions options) : options_(options) {
  options_.ids_per_identity = std::max(options_.ids_per_identity, 1);
  options_.identities = std::max(options_.identities, 1);
}

bool ReplyCache::TrackedType(MessageType type) {
  // Heartbeats are owed no reply and never sent again; the messages between
  // server processes are not a worker's requests; a decision of the
  // primary's own timers comes from no connection.
  switch (type) {
    case HEARTBEAT:
    case REPLICA_HELLO:
    case REPLICATE:
    case REPLICATE_ACK:
    case SHARD_DECISION: return false;
    default: return true;
  }
}

bool ReplyCache::Tracked(const std::string& identity, const MessageHeader& h) {
  return TrackedType(h.type()) && !identity.empty() && h.request_id() != 0;
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

void ReplyCache::SaveState(ReplyCacheState* state) const {
  state->Clear();
  // Peers by identity: two caches of the same state save the same bytes.
  for (const std::string& identity : Identities()) {
    const Peer& peer = peers_.at(identity);
    ReplyCachePeer* p = state->add_peers();
    p->set_identity(identity);
    for (const Entry& e : peer.entries) {
      ReplyCachePeer::Entry* out = p->add_entries();
      out->set_id(e.id);
      out->set_reply_seq(e.reply_seq);
      out->set_type(e.type);
      out->set_answered(e.answered);
    }
    p->set_max_id(peer.max_id);
    p->set_last_take(peer.last_take);
  }
  for (const auto& [seq, c] : replies_) {
    ReplyCacheReply* r = state->add_replies();
    r->set_seq(seq);
    r->set_identity(c.identity);
    r->set_id(c.id);
    r->set_rank(c.rank);
    r->set_header(c.header);
    r->set_keys(c.keys);
    r->set_values(c.values);
  }
  state->set_next_seq(next_seq_);
  state->set_take_count(take_count_);
  state->set_handled_again(stats_.handled_again);
  state->set_resent(stats_.resent);
  state->set_dropped_pending(stats_.dropped_pending);
  state->set_dropped_applied(stats_.dropped_applied);
  state->set_dropped_forgotten(stats_.dropped_forgotten);
  state->set_replies_evicted(stats_.replies_evicted);
  state->set_identities_evicted(stats_.identities_evicted);
}

Status ReplyCache::RestoreState(const ReplyCacheState& state) {
  peers_.clear();
  replies_.clear();
  bytes_ = 0;
  next_seq_ = state.next_seq();
  take_count_ = state.take_count();
  if (next_seq_ == 0) return Bad("next_seq", "is 0 (the first cached reply's seq is 1)");
  std::map<uint64_t, std::pair<std::string, uint64_t>> refs;  // seq → the (identity, id) naming it
  TETHER_RETURN_IF_ERROR(RestorePeers(state, &refs));
  TETHER_RETURN_IF_ERROR(RestoreReplies(state, refs));
  stats_.handled_again = state.handled_again();
  stats_.resent = state.resent();
  stats_.dropped_pending = state.dropped_pending();
  stats_.dropped_applied = state.dropped_applied();
  stats_.dropped_forgotten = state.dropped_forgotten();
  stats_.replies_evicted = state.replies_evicted();
  stats_.identities_evicted = state.identities_evicted();
  return Status::OK();
}

Status ReplyCache::RestorePeers(const ReplyCacheState& state,
                                std::map<uint64_t, std::pair<std::string, uint64_t>>* refs) {
  if (state.peers_size() > options_.identities)
    return Bad("peers", "holds " + std::to_string(state.peers_size()) + " connections, more than the " +
                            std::to_string(options_.identities) + " kept");
  for (int i = 0; i < state.peers_size(); ++i) {
    const ReplyCachePeer& p = state.peers(i);
    const std::string at = At("peers", i);
    if (p.identity().empty()) return Bad(at + ".identity", "is empty");
    if (i > 0 && p.identity() <= state.peers(i - 1).identity())
      return Bad(at + ".identity", "is not after the one before it (peers are sorted, each once)");
    if (p.entries_size() == 0 || p.entries_size() > options_.ids_per_identity)
      return Bad(at + ".entries", "holds " + std::to_string(p.entries_size()) + " ids, not 1 to " +
                                      std::to_string(options_.ids_per_identity));
    if (p.last_take() > take_count_)
      return Bad(at + ".last_take", std::to_string(p.last_take()) + " is past take_count " +
                                        std::to_string(take_count_));
    Peer& peer = peers_[p.identity()];
    peer.max_id = p.max_id();
    peer.last_take = p.last_take();
    for (int j = 0; j < p.entries_size(); ++j) {
      const ReplyCachePeer::Entry& e = p.entries(j);
      const std::string ej = at + "." + At("entries", j);
      const uint64_t before = j > 0 ? p.entries(j - 1).id() : 0;
      if (e.id() <= before || e.id() > p.max_id())
        return Bad(ej + ".id", std::to_string(e.id()) + " is not above the id before it (" + std::to_string(before) +
                                   ") and at most max_id " + std::to_string(p.max_id()));
      if (!e.has_type() || !TrackedType(e.type()))
        return Bad(ej + ".type", "is not a type of request the cache keeps");
      if (e.reply_seq() != 0) {
        if (e.reply_seq() >= next_seq_ || !e.answered() || IsRead(e.type()))
          return Bad(ej + ".reply_seq", std::to_string(e.reply_seq()) +
                                            " names a cached reply for an id not answered, a read, or past next_seq " +
                                            std::to_string(next_seq_));
        if (!refs->emplace(e.reply_seq(), std::make_pair(p.identity(), e.id())).second)
          return Bad(ej + ".reply_seq", std::to_string(e.reply_seq()) + " is named by another id too");
      }
      peer.entries.push_back(Entry{e.id(), e.reply_seq(), e.type(), e.answered()});
    }
  }
  return Status::OK();
}

Status ReplyCache::RestoreReplies(const ReplyCacheState& state,
                                  const std::map<uint64_t, std::pair<std::string, uint64_t>>& refs) {
  if (static_cast<size_t>(state.replies_size()) != refs.size())
    return Bad("replies", "holds " + std::to_string(state.replies_size()) + " cached replies, the entries name " +
                              std::to_string(refs.size()));
  for (int i = 0; i < state.replies_size(); ++i) {
    const ReplyCacheReply& r = state.replies(i);
    const std::string at = At("replies", i);
    if (i > 0 && r.seq() <= state.replies(i - 1).seq())
      return Bad(at + ".seq", std::to_string(r.seq()) + " is not above the seq before it");
    const auto ref = refs.find(r.seq());
    if (ref == refs.end() || ref->second.first != r.identity() || ref->second.second != r.id())
      return Bad(at, "(seq " + std::to_string(r.seq()) + ", request id " + std::to_string(r.id()) +
                         ") is not the reply the entry naming its seq took in");
    MessageHeader h;
    if (!h.ParseFromString(r.header()) || h.request_id() != r.id())
      return Bad(at + ".header", "is not a reply header to request id " + std::to_string(r.id()));
    if (r.rank() < -1) return Bad(at + ".rank", std::to_string(r.rank()) + " is not a rank (or -1)");
    Cached c;
    c.identity = r.identity();
    c.id = r.id();
    c.rank = r.rank();
    c.header = r.header();
    c.keys = r.keys();
    c.values = r.values();
    bytes_ += c.bytes();
    if (bytes_ > options_.reply_bytes)
      return Bad(at, "takes the cached replies past reply_bytes (" + std::to_string(options_.reply_bytes) + ")");
    replies_.emplace(r.seq(), std::move(c));
  }
  return Status::OK();
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
