// ReplyCache: the requests a replicated shard (cluster.replicas > 0) took in
// from each worker connection and the replies it sent them, so that a
// request sent again is applied once. When a shard's primary fails, the
// replica that claims the shard holds the primary's state (it replayed
// every input, server/shard_input.h) and each worker sends it again,
// byte-identical and with the same request ids, every message the former
// primary had not answered (replication/chain_view.h). Some of them the
// primary had applied already; applying them twice would count a gradient
// twice or move a clock past where the worker is.
//
// A worker's request ids grow on every shard (worker/client/request_channel.cc:
// sequence << 32 | slot), and a shard handles one connection's messages in
// order, so an id not above the largest taken in from that connection is a
// message sent again. Take() says what to do with each message:
//   - an id above the largest so far, or a message not tracked (id 0, no
//     identity, HEARTBEAT, the replication messages between servers):
//     kHandle;
//   - an id taken in whose reply is kept: kResend (the shard sends the
//     same reply again; ShardOutbox restamps its header);
//   - an id taken in and not answered yet (a pull deferred on the staleness
//     bound, a BARRIER, a HELLO held for worker 0's, a BYE held until the
//     job's outcome): kDropPending, the deferred answer reaches the worker;
//   - a read (PULL, STATS) already answered: kHandleAgain. Reads are not
//     copied (a pull reply can be large); handled again, a read changes no
//     value, only the shard's counters, a budgeted table's eviction order
//     and the order of its kept key lists, and its answer is fresher;
//   - a message already applied that no reply is kept for (a CLOCK or
//     ABORT, which get none here, or a reply dropped past the bytes bound):
//     kDropApplied;
//   - an id older than every id kept for its connection: kDropForgotten.
//
// Bounds: per connection the last ids_per_identity ids taken in (a request
// id past them is forgotten: kDropForgotten); over all connections
// reply_bytes of cached replies, the oldest dropped first (its request
// then reads kDropApplied, and a worker still waiting for that reply gets
// none: its request times out); identities connections, the one heard from
// longest ago forgotten first (its messages then read as new: the bound is
// set well above the workers a job can have). A worker has at most its
// window (64 requests) unanswered per shard, so the defaults keep every
// reply a resend can ask for with room to spare. Memory: about 32 bytes an
// id kept, plus the cached replies' frames and kReplyOverheadBytes each.
//
// The cache is part of the shard's replicated state: it changes only with
// the messages taken in and the replies made for them, so a copy fed the
// same inputs (ServerShard::Replay, whose replies are muted but still
// recorded) holds the same cache, with two exceptions: the answers to the
// BYEs its primary held until its Run() ended, and CHECKPOINT_REPLYs (a
// copy writes no checkpoint files and cannot name the primary's: its reply
// abandons the round, server/checkpoint_round.h).
//
// State (SaveState/RestoreState, proto/shard_state.proto ReplyCacheState):
// everything above is carried to a replica that joins a running shard:
// each connection's ids kept (with their types, answered flags and reply
// references), its largest id and when it was last heard from, the cached
// replies with the order they were recorded in (eviction drops the oldest),
// the counters that order takes and replies by, and the stats. The options
// are not: the restoring shard makes its cache with the same ones.
//
// Ownership: the shard owns it; ShardOutbox records the replies into it.
// Thread-safety: none (Run()'s thread, or the thread that replays).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/net/message.h"
#include "core/status.h"
#include "proto/shard_state.pb.h"

namespace tether {

struct ReplyCacheOptions {
  /// Request ids kept per connection (the latest ones); at least 1.
  /// Default 512: eight times a worker's window of requests in flight to
  /// one shard.
  int ids_per_identity = 512;
  /// Bytes of cached replies over all connections: each reply's frames
  /// (header, keys, values) plus kReplyOverheadBytes. Default 64 MiB.
  uint64_t reply_bytes = uint64_t{64} << 20;
  /// Connections kept; at least 1. Default 1024.
  int identities = 1024;
};

class ReplyCache {
 public:
  /// What is charged per cached reply beyond its frames (its bookkeeping).
  static constexpr uint64_t kReplyOverheadBytes = 96;

  enum class Verdict { kHandle, kHandleAgain, kResend, kDropPending, kDropApplied, kDropForgotten };
  /// Counts of Take()'s verdicts for messages sent again, and evictions.
  struct Stats {
    uint64_t handled_again = 0, resent = 0;
    uint64_t dropped_pending = 0, dropped_applied = 0, dropped_forgotten = 0;
    uint64_t replies_evicted = 0;     // copies dropped past reply_bytes
    uint64_t identities_evicted = 0;  // connections forgotten past identities
  };
  /// One request id kept for a connection (Kept()).
  struct KeptId {
    uint64_t id = 0;
    MessageType type = HEARTBEAT;  // the request's
    bool answered = false;
    bool has_reply = false;  // its reply's copy is kept
    int rank = -1;           // the reply's rank (with has_reply)
    std::string reply;       // with has_reply: header bytes, keys, values
    bool operator==(const KeptId& o) const {
      return id == o.id && type == o.type && answered == o.answered && has_reply == o.has_reply && rank == o.rank &&
             reply == o.reply;
    }
  };

  explicit ReplyCache(ReplyCacheOptions options = {});

  /// A message with header `h` taken in from `identity`, before it is
  /// handled: records a new id and says what to do (see the file's
  /// comment). For kResend, `*reply` gets a copy of the cached reply (its
  /// header as the shard's room made it, unstamped) and `*rank` the rank it
  /// was sent to; both are left alone otherwise.
  Verdict Take(const std::string& identity, const MessageHeader& h, Message* reply, int* rank);
  /// A reply sent (or muted) to `identity` as `rank`: recorded against its
  /// request id (reply.header.request_id()) when that id is kept; a copy
  /// of it is kept unless the request was a read. A later reply to an id
  /// already answered changes nothing (the worker acts on the first).
  void Sent(const std::string& identity, const Message& reply, int rank);

  const Stats& stats() const { return stats_; }
  const ReplyCacheOptions& options() const { return options_; }
  /// Bytes charged for the cached replies now (≤ options().reply_bytes).
  uint64_t reply_bytes() const { return bytes_; }
  size_t num_replies() const { return replies_.size(); }
  /// The connections kept, sorted.
  std::vector<std::string> Identities() const;
  /// The ids kept for `identity`, oldest first (empty when none).
  std::vector<KeptId> Kept(const std::string& identity) const;

  /// The whole cache into `*state` (cleared first): peers by identity,
  /// replies by the order they were recorded in.
  void SaveState(ReplyCacheState* state) const;
  /// Replaces the cache with `state`, a SaveState of a cache made with the
  /// same options (a network peer's: untrusted). Errors: DataLoss naming
  /// the field ("shard state: replies.peers[2].entries[5].id ...") for a
  /// state this cache could not have reached: more connections or ids
  /// than the options keep, ids not ascending, a reply referenced by no
  /// entry or by another id, more reply bytes than the bound, a header
  /// that does not parse; the cache is unspecified then (throw it away).
  [[nodiscard]] Status RestoreState(const ReplyCacheState& state);

  static const char* VerdictName(Verdict v);
  /// One line on the messages taken in again so far ("8 message(s) sent
  /// again: 5 answered from the reply cache, ..."); "" when none was.
  std::string DescribeSentAgain() const;

 private:
  struct Entry {
    uint64_t id = 0;
    uint64_t reply_seq = 0;  // the key of its reply in replies_, 0: none kept
    MessageType type = HEARTBEAT;
    bool answered = false;
  };
  struct Peer {
    std::deque<Entry> entries;  // ids ascending
    uint64_t max_id = 0;        // the largest id taken in
    uint64_t last_take = 0;     // take_count_ at its latest message
  };
  struct Cached {
    std::string identity;
    uint64_t id = 0;
    int rank = -1;
    std::string header, keys, values;
    uint64_t bytes() const { return header.size() + keys.size() + values.size() + kReplyOverheadBytes; }
  };

  static bool Tracked(const std::string& identity, const MessageHeader& h);
  static bool TrackedType(MessageType type);
  static bool IsRead(MessageType type) { return type == PULL || type == STATS; }
  // The verdict for an id already taken in (id ≤ the peer's max_id).
  Verdict Again(Peer* peer, uint64_t id, Message* reply, int* rank);
  Peer& PeerFor(const std::string& identity);
  Entry* Find(Peer* peer, uint64_t id);
  void DropReply(uint64_t seq);
  void EvictReplies();
  // RestoreState's parts: the connections (and which reply each entry
  // names, by seq → (identity, id)), then the replies against them.
  Status RestorePeers(const ReplyCacheState& state, std::map<uint64_t, std::pair<std::string, uint64_t>>* refs);
  Status RestoreReplies(const ReplyCacheState& state,
                        const std::map<uint64_t, std::pair<std::string, uint64_t>>& refs);

  ReplyCacheOptions options_;
  std::unordered_map<std::string, Peer> peers_;
  std::map<uint64_t, Cached> replies_;  // by the order they were recorded in
  uint64_t next_seq_ = 1;
  uint64_t take_count_ = 0;
  uint64_t bytes_ = 0;
  Stats stats_;
};

}  // namespace tether
