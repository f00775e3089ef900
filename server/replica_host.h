// ReplicaHost: a server process's copy of another shard (cluster.replicas
// > 0; the placement of replication/chain_view.h: with r replicas, process
// p holds copies of shards p − 1, ..., p − r mod num_servers, one host
// each), kept equal to the shard's primary and serving the shard when the
// primary's process is gone. The primary's end is server/replica_link.h.
//
// The copy is a ServerShard of the same config and shard number
// (ServerShard::BeginCopy), whose socket is bound at the start (its
// endpoint goes to the primary with REPLICA_HELLO, and from the primary to
// every worker in HELLO_REPLY.chain_endpoints) but neither read nor sent on
// until it claims the shard. The host connects to the primary
// (cluster.server_addresses[shard], or the shard's rendezvous entry, waited
// for up to cluster.startup_timeout_ms), takes in the log entries the primary
// forwards (REPLICATE: one ShardInput each, server/shard_input.h) with
// ServerShard::Replay in the primary's order, and acknowledges each batch
// it reads once it checked it and before applying it (an entry it holds is
// applied before it could claim the shard), and at least every
// cluster.heartbeat_interval_ms while idle (its liveness to the primary).
//
// The primary is gone when its connection closes (its process died: at
// once) or stays silent past cluster.liveness_timeout_ms (ZMTP heartbeats:
// a paused or vanished host). The host then applies what it already
// received, claims the shard with the next generation of its view
// (ServerShard::Claim) and runs the copy's Run() on the same thread: the
// workers, which follow the chain (worker/client/request_channel.h), send
// it what the primary left unanswered.
//
// With more than one replica only the first of the chain that is left
// claims (the primary names the chain's endpoints with every entry). A
// host later in the chain first asks each replica before it (a ZMTP
// handshake within cluster.liveness_timeout_ms): when one answers, that one
// claims, and this host ends its copy (it may hold entries the new primary
// never had, none of them committed) and Run() returns OK with rejoin()
// naming it: the caller joins that claim as a learner (a new host with
// Join{shard, endpoint}), copies the shard's whole state and becomes the
// new primary's replica again. When none answers, this host claims: it
// holds every committed entry, since the primary committed only what every
// replica acknowledged. A host that finds it did not run
// itself for half the liveness timeout does not claim: its copy may miss
// what the primary committed without it, and it ends with an error.
//
// Run() ends with OK when the primary ended the shard normally (SHUTDOWN),
// with the copy's Run() result once it claimed, or with an error: the
// primary could not be reached within cluster.startup_timeout_ms, refused
// this replica, or sent an entry out of order or that does not decode (the
// peer is named), or the copy's replay failed (the job failed on the
// primary in the same way).
//
// A process that joins (tether-server --join_as_replica, Join) holds no
// shard of its own: it asks a shard's primary to take it as its replica
// (REPLICA_HELLO.join; given no shard, it asks shard 0, 1, ... in turn and
// copies the first with fewer than cluster.replicas replicas), restores the shard's whole state
// the primary sends (ServerShard::RestoreState) and then follows the
// entries after it as any replica does. Taking in the state and restoring
// it (seconds for a large table) is watched by a witness thread
// (core/busy_witness.h): when that ran throughout, the time is no stall of
// this process. A shard that refuses it for now
// (another process joins it, one at a time: JOIN_LATER) is asked again
// every kAskAgainMs while it is the only shard asked (a shard given), up to
// cluster.startup_timeout_ms; a refusal because every shard asked has all
// its replicas (CHAIN_FULL) ends Run() with nothing_to_join() set. It may
// claim the shard only once
// the primary counted it as its replica (REPLICATE.member: it had caught
// up); a primary that goes before that ends it with an error.
//
// With security.curve the connection to the primary is CURVE too: the host
// holds the servers' shared key pair (core/net/curve.h ServerPeerCurveClient),
// which the primary admits for replication only (server/replica_link.h); a
// primary that refuses the key ends Run() with the ZAP status. The copy's
// own socket binds as any shard's does, so workers reach it with their keys.
//
// Ownership: the host owns the copy and its ZeroMQ context (one CURVE
// shard per context). Thread-safety: Start and Run on one thread; Stop from
// any thread (async-signal-safe).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <zmq.hpp>

#include "core/busy_witness.h"
#include "core/config.h"
#include "core/net/message.h"
#include "core/net/transport.h"
#include "core/status.h"
#include "server/server.h"
#include "server/shard_input.h"

namespace tether {

class ReplicaHost {
 public:
  using Clock = std::chrono::steady_clock;

  /// `config`: validated, cluster.replicas ≥ 1 and a server address for
  /// every shard. `process`: this server process's own shard.
  ReplicaHost(const JobConfig& config, int process);
  /// The copy of the shard `distance` (1 ... cluster.replicas) before
  /// `process`: (process − distance) mod num_servers, the process's place
  /// `distance` in that shard's chain.
  ReplicaHost(const JobConfig& config, int process, int distance);
  /// A process that joins a running job as a shard's replica (above):
  /// `shard` ≥ 0 that shard, −1 the first of 0, 1, ... that takes one.
  struct Join {
    int shard = -1;
    /// Where the shard's primary is ("": the rendezvous, or the shard's
    /// address): the claimant a replica later in the chain follows.
    std::string endpoint;
  };
  ReplicaHost(const JobConfig& config, Join join);
  ~ReplicaHost();

  /// The copy's key-list caching, as its primary's (tether-server
  /// --key_list_cache_bytes): the copy must take in the same lists. Call
  /// before Start.
  void set_key_list_cache_bytes(uint64_t bytes) {
    key_list_cache_bytes_ = bytes;
    if (copy_ != nullptr) copy_->set_key_list_cache_bytes(bytes);
  }
  /// The shard this process holds a copy of (a joining one: the shard it
  /// asks now, or copies once one took it).
  int shard() const { return shard_; }
  /// Binds the copy's socket at `bind_endpoint` (a tcp:// endpoint, port 0
  /// for a free one) and connects to the primary. `advertised`: the
  /// endpoint workers are told (AdvertisedEndpoint of the bound one).
  /// Errors: the bind's, or no address for the primary.
  Status Start(const std::string& bind_endpoint, const std::string& advertise_host);
  /// The endpoint the copy serves on once it claims the shard.
  const std::string& endpoint() const { return advertised_; }
  /// Follows the primary and, when it is gone, serves the shard (above).
  Status Run();
  /// Asks Run() to return (OK) within 100 ms; also stops a claimed copy.
  void Stop();
  /// A stop signal's first notice (ServerShard::StopAfterWorkers): a copy
  /// that claimed the shard serves its workers' stop checkpoint and BYEs,
  /// at most `grace`; one that did not stops following at once.
  /// Async-signal-safe.
  void StopAfterWorkers(std::chrono::milliseconds grace);
  /// The primary's log entries applied to the copy.
  uint64_t applied() const { return applied_; }
  /// Whether the copy is (or, for a joining process, became) the shard's
  /// replica: it may claim the shard. Thread-safe.
  bool member() const { return member_.load(); }
  /// Whether the connection to the primary completed its handshake (the
  /// primary has this process's REPLICA_HELLO once it reads its socket).
  /// Thread-safe.
  bool connected() const { return connected_.load(); }
  /// Whether the copy claimed the shard.
  bool claimed() const { return claimed_.load(); }
  /// Set when Run() returned OK because a replica before this one in the
  /// chain claims the shard (above): its endpoint, which this process joins
  /// as a learner.
  const std::string& rejoin() const { return rejoin_; }
  /// A joining process whose Run() ended because every shard it asked has
  /// all its cluster.replicas replicas: there was nothing to copy
  /// (tether-server exits kExitNothingToJoin).
  bool nothing_to_join() const { return nothing_to_join_; }
  /// A copy placed at the start (not a joining process) whose Run() ended
  /// because the primary refused it for a setting that differs
  /// (REPLICATE_ACK CONFIG_DIFFERS): the primary's reason, which names the
  /// field and both values ("" otherwise). The servers were started with
  /// settings that differ: this process's own shard cannot run either
  /// (tether-server passes it to ServerShard::CannotRun).
  std::string config_refusal() const {
    return !join_ && refused_ && refusal_kind_ == ReplicateAckBody::CONFIG_DIFFERS ? refusal_reason_ : "";
  }
  /// How many times a joining process asked its shard again after it was
  /// refused for now (JOIN_LATER). Thread-safe.
  int asked_again() const { return asked_again_.load(); }
  /// The copy (its stats once Run() returned; none once Run() returned
  /// with rejoin() set: its memory is released then).
  const ServerShard& copy() const { return *copy_; }

 private:
  enum class Step { kGoOn, kEnded, kPrimaryGone, kKeyRefused };
  // A joining process: the next shard to ask (its copy, its connection).
  Status StartCandidate();
  // A joining process whose shard refused it: true when another is asked now.
  bool NextCandidate(const Status& refusal, Status* result);
  // A joining process refused for now (JOIN_LATER) by the one shard it
  // asks: true when it asks again at ask_again_at_; false, *result naming
  // the wait, once cluster.startup_timeout_ms passed since the first such
  // refusal.
  bool AskAgainLater(const Status& refusal, Status* result);
  // A joining process that asked every shard, some of which refused it
  // for now: true when it asks them all again, from the first, at
  // ask_again_at_; false, *result naming the last answers (`all`), once
  // cluster.startup_timeout_ms passed since the first such pass.
  bool AskEveryShardAgain(const std::string& all, Status* result);
  // Sends the REPLICA_HELLO again (or starts the next pass over every
  // shard) once ask_again_at_ came.
  Status AskAgainIfDue(Clock::time_point now);
  static constexpr int64_t kAskAgainMs = 500;
  ReplicateAckBody::JoinRefusal refusal_kind_ = ReplicateAckBody::JOIN_REFUSED;  // the last refusal's
  std::string refusal_reason_;  // the last refusal's reason
  size_t full_refusals_ = 0;   // refusals because the shard has all its replicas (CHAIN_FULL)
  size_t later_refusals_ = 0;  // refusals for now (JOIN_LATER) in this pass over the shards
  int passes_ = 0;             // passes over every shard after the first (logged once)
  bool ask_every_shard_ = false;  // the wait for ask_again_at_ ends in another pass
  bool nothing_to_join_ = false;
  bool asking_again_ = false;  // waiting for ask_again_at_ (no acknowledgements meanwhile)
  std::atomic<int> asked_again_{0};
  Clock::time_point ask_again_at_{}, refused_for_now_since_{};
  void CloseConnection();
  // A part of the shard's state (REPLICA_STATE); the copy is restored from
  // the whole once the last part came.
  Status TakeStatePart(const Message& m);
  Status RestoreCopy();
  // A joining process not yet answered: the shard's rendezvous entry read
  // again (a shard that failed over is published there by the copy that
  // claimed it, which may come after this process first looked).
  Status Relookup();
  static constexpr int64_t kRelookupMs = 1000;
  Clock::time_point last_lookup_{};
  // A joining process its primary has not answered for kNoteWaitMs says
  // once what it waits for (a job that ended has no primary to answer).
  static constexpr int64_t kNoteWaitMs = 5000;
  bool wait_noted_ = false;
  // Run() until the copy claims the shard (then its Run()) or ends.
  Status Follow();
  // The primary's endpoint: the config's, or the rendezvous entry (waited
  // for up to `wait_ms`; −1: cluster.startup_timeout_ms).
  StatusOr<std::string> FindPrimary(int wait_ms = -1);
  // The claimed copy's endpoint as the shard's rendezvous entry.
  void PublishClaim();
  Status Connect();
  Status SayHello();
  // Reads what the primary sent; kEnded with *result set when it ended the shard.
  Step DrainPrimary(Status* result);
  // DrainPrimary, witnessed while a joining process takes in its state.
  Step DrainTurn(Status* result);
  // Reads what is queued into *batch (checked, in order) up to the end of
  // the queue, kMaxEntriesPerTurn entries, or a message that ends the copy
  // (kEnded, *result set). The bound keeps a copy far behind (a learner
  // that restored a state while entries queued up) turning its loop: it
  // acknowledges and applies in steps, instead of reading for as long as
  // its primary sends and going silent past the primary's send queue.
  Step ReadQueued(std::vector<ShardInput>* batch, Status* result);
  static constexpr size_t kMaxEntriesPerTurn = 256;
  // State parts (4 MiB each) read in one turn at most.
  static constexpr size_t kStatePartsPerTurn = 8;
  Status TakeEntry(Message* m, std::vector<ShardInput>* batch);
  Step ReadMonitor();
  void Ack(Clock::time_point now);
  bool OwnStall(Clock::time_point now);
  // Taking in and restoring a joined shard's state (`work`, seconds for a
  // large table), witnessed running, is no stall of this process: OwnStall
  // leaves it out.
  void ForgiveOwnWork(const BusyWitness::Verdict& work);
  Status ClaimAndServe(Clock::time_point gone_at);
  // The primary is gone (server/replica_host_chain.cc): claims, or leaves
  // the claim to a replica before this one that answers (rejoin_).
  Status ClaimOrFollow(Clock::time_point gone_at);
  // Whether a ZMTP peer answers at `endpoint` within `timeout_ms`
  // (kAnswers), refuses the connection kRefusedConnectsForDead times in a
  // row first (kRefused: no process listens there; core/net/transport.h),
  // or neither (kSilent: a stopped or slow process is waited for).
  enum class Probe { kAnswers, kRefused, kSilent };
  Probe Answers(const std::string& endpoint, int timeout_ms);

  const JobConfig& config_;
  const int process_;  // −1: a joining process
  int shard_;
  std::string log_prefix_;
  const bool join_ = false;
  std::vector<int> candidates_;  // a joining process: the shards it asks, in order
  size_t candidate_ = 0;
  std::vector<std::string> refusals_;  // a joining process: each shard's refusal, in order
  std::string bind_endpoint_, advertise_host_;
  uint64_t key_list_cache_bytes_ = kDefaultKeyListCacheBytes;
  int slot_ = -1;          // this process's slot in the shard's chain
  uint64_t generation_ = 1;  // the highest view generation the primary sent
  std::atomic<bool> member_{true};  // counts as the shard's replica (a joining process: once caught up)
  bool refused_ = false;   // the primary refused this replica
  int connections_ = 0;    // made so far (each its own identity)
  // A joining process: the state's parts so far, and whether it was restored.
  std::string state_;
  uint64_t state_total_ = 0, state_seq_ = 0;
  Clock::time_point state_started_{};
  bool restored_ = false;
  std::unique_ptr<ServerShard> copy_;
  zmq::context_t ctx_;
  zmq::socket_t dealer_;
  zmq::socket_t monitor_;
  CurveOptions curve_;  // security.curve: the servers' pair (empty without CURVE)
  int zap_status_ = 0;  // the primary's ZAP answer when it refused curve_
  int failed_handshakes_ = 0;  // CURVE handshakes failed in a row (protocol errors)
  static constexpr int kKnownBadHandshakes = 3;
  std::string primary_endpoint_;
  std::string join_endpoint_;  // Join.endpoint
  std::string advertised_;
  std::vector<std::string> chain_;  // the replicas' endpoints in chain order, as the primary last sent them
  std::string rejoin_;
  uint64_t received_ = 0;  // entries read and checked (acknowledged)
  uint64_t applied_ = 0;   // entries applied to the copy
  uint64_t acked_ = 0;
  std::atomic<bool> connected_{false};  // the primary's connection completed its handshake
  Clock::time_point started_, last_ack_, last_turn_;
  Clock::time_point last_heard_{};  // the primary's last message (failover_seconds counts from it)
  Clock::time_point stalled_until_{};
  std::atomic<bool> stop_{false};
  std::atomic<bool> claimed_{false};
};

}  // namespace tether
