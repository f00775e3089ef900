// ReplicaLink: the primary's end of a replicated shard (cluster.replicas >
// 0): every message the shard takes in is an entry of its log
// (replication/replication_log.h), forwarded as it is taken in to each
// replica that holds a copy of the shard (server/replica_host.h; with
// cluster.replicas = r, the server processes of shards s + 1 ... s + r, the
// chain's order), which take in the same entries in the same order and
// acknowledge them. What the shard sends a worker waits until every replica
// still in the chain acknowledged the entry it depends on (ShardOutbox
// holds it, see Committed): no worker ever sees an update that a replica,
// should it claim the shard, lacks. Every entry carries the endpoints of
// the replicas in the chain's order (MessageHeader.chain_endpoints): a
// replica that loses its primary claims the shard when it is the first of
// them, and otherwise joins the first one's claim as a learner
// (server/replica_host.h).
//
// Everything below said of "the replica" holds for each of them: each
// introduces itself, is watched and is dropped on its own; a dropped one
// leaves the chain (the next generation of the view) and commits wait for
// the others only.
//
// The replica introduces itself (REPLICA_HELLO: its process slot, the
// endpoint it will serve the shard on, its start id) by connecting to this
// shard's socket; entries taken in before it did are kept and sent then,
// so nothing is committed, and no reply leaves, until it is there (bounded
// by cluster.startup_timeout_ms: past it the shard goes on without it). A
// replica is gone once its connection closed (a probe to it is refused)
// or once it acknowledged nothing for cluster.liveness_timeout_ms although
// entries were waiting (it acknowledges at least every heartbeat interval
// while idle): the shard goes on alone with the next generation of its
// view, and everything held is released.
//
// Stepping down: a replica that holds a newer view of the shard (it
// claimed the shard while this process was stopped) refuses the entries and
// probes; stepped_down() then names it and the shard ends with that error.
// A process that finds its own loop did not run for half of
// cluster.liveness_timeout_ms (SIGSTOP, a stalled VM, a long write) cannot
// tell its replica's silence from its own: it appends a mark (a
// SHARD_DECISION that changes nothing), drops the replica for nothing until
// the replica acknowledges the mark, and steps down when that does not
// happen within cluster.liveness_timeout_ms after the stall (the replica may
// have claimed the shard meanwhile). Held messages stay held throughout, so
// no worker sees anything from a primary that was replaced. The time the
// loop spends building and sending a joiner's state (below) is no stall: a
// witness thread watches meanwhile (core/busy_witness.h), and when it ran
// throughout, that time is left out of the gap judged and the replicas'
// silence is counted from its end; a process stopped during it is judged
// as before.
//
// Joining (re-replication, tether-server --join_as_replica): a shard
// whose chain has fewer than cluster.replicas replicas (it dropped one it
// had, or it is a copy that claimed the shard) takes a process that
// introduces itself with REPLICA_HELLO.join as its learner, one at a time
// (replication/chain_view.h WithLearner): it sends the shard's whole state
// as of its last log entry (REPLICA_STATE parts, server/shard_state.h) and
// forwards every entry after it, beside the replicas it has. The learner
// does not count for commits (no reply waits for it) until it acknowledged
// all but a few of the entries the shard took in; from then on commits
// wait for it too, and once it holds every committed entry it is the
// shard's last replica (WithLearnerAppended): replies wait for it, and
// every worker is told its endpoint (MessageHeader.chain_endpoints, by the
// outbox). A shard with all cluster.replicas replicas refuses a joiner,
// naming them (CHAIN_FULL); one busy with another joiner, waiting for
// a replica to introduce itself, or with a replica that may be gone (its
// connection closed, or silent for two heartbeat intervals, and not yet
// dropped) refuses it for now (JOIN_LATER). A learner whose connection closes or that stays silent past
// cluster.liveness_timeout_ms is dropped; another may join. A learner that
// joined beside replicas is dropped too when the last of them is gone (the
// shard alone restarts its log's forwarding); it may join again.
//
// Memory: the entries not yet acknowledged (the log's retained()), each a
// copy of the message's frames. Ownership: the shard owns it; the socket
// given is the shard's ROUTER. Thread-safety: the shard's Run() thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <zmq.hpp>

#include "core/busy_witness.h"
#include "core/config.h"
#include "core/net/message.h"
#include "core/status.h"
#include "replication/replication_log.h"
#include "server/shard_stats.h"

namespace tether {

class ReplicaLink {
 public:
  using Clock = std::chrono::steady_clock;

  /// `config`: cluster.replicas ≥ 1. `shard`: the shard this process is the
  /// primary of (its process slot too).
  ReplicaLink(const JobConfig& config, int shard, std::string log_prefix);
  /// The shard's primary after its copy on server process `process`
  /// claimed it with view generation `generation` (ServerShard::Claim):
  /// alone, until a replica joins.
  struct Claimed {
    int process = 0;
    uint64_t generation = 0;
  };
  ReplicaLink(const JobConfig& config, int shard, std::string log_prefix, Claimed claimed);

  /// The shard's whole state as of the log's applied() entries, encoded
  /// (server/shard_state.h), for a joining replica: the pieces whose
  /// concatenation is the state (EncodeShardStatePieces). An error refuses
  /// the join, naming it. Without a source no process may join.
  using StateSource = std::function<StatusOr<std::vector<std::string>>()>;
  void set_state_source(StateSource source) { state_source_ = std::move(source); }

  /// The shard's ROUTER socket (once bound).
  void set_socket(zmq::socket_t* socket) { socket_ = socket; }

  /// With security.curve: the servers' public key (Z85), the only key whose
  /// connections may replicate (the replica host's, core/net/curve.h
  /// ServerPeerCurveClient). The shard's ZAP handler admits the workers'
  /// keys too: a REPLICA_HELLO or REPLICATE_ACK whose connection holds
  /// another key (Take's `peer_key`) is refused, naming the key, and
  /// changes nothing. Empty (no CURVE): not checked.
  void set_replica_key(std::string key) { replica_key_ = std::move(key); }

  /// Whether `m` is a replication message (REPLICA_HELLO, REPLICATE_ACK);
  /// if so it is taken here (a malformed one is logged and dropped).
  /// `peer_key`: the CURVE key of the sender's connection (Inbox::peer_key).
  bool Take(const std::string& identity, const Message& m, const std::string& peer_key, Clock::time_point now);
  /// Appends the input `m` from `identity` to the log and forwards it to
  /// the replica when one is there. Call before the shard handles `m`.
  void Append(const std::string& identity, const Message& m);
  /// Once per turn of the shard's loop, after the socket was drained: this
  /// process's own stalls, the replica's liveness and the wait for it at
  /// the start.
  void Tick(Clock::time_point now);
  /// Tells the replicas that the shard ended (SHUTDOWN), so they end too
  /// rather than claim the shard; with `outcome` an error (the job failed),
  /// SHUTDOWN.job_abort.reason carries its message and they end with it.
  void Finish(const Status& outcome);

  /// The log: applied() entries taken in, commit() acknowledged.
  const ReplicationLog& log() const { return log_; }
  /// The generation of the shard's view (1 at the start).
  uint64_t generation() const { return log_.view().generation; }
  /// The serving endpoints of the shard's replicas, next in the chain
  /// first (each once it introduced itself, until it is gone).
  const std::vector<std::string>& chain_endpoints() const { return chain_endpoints_; }
  /// The generation at which chain_endpoints() last changed (a worker told
  /// of an older one is told again: ShardOutbox).
  uint64_t chain_generation() const { return chain_generation_; }
  /// Whether a joining process is copying the shard (not caught up yet).
  bool learning() const { return !learner_identity_.empty(); }
  /// Not OK once this process must no longer act as the shard's primary.
  const Status& stepped_down() const { return stepped_down_; }
  /// Why a copy placed at the start (REPLICA_HELLO, not join) was refused
  /// for a setting that differs (ConfigMismatch), once: the servers were
  /// started with other settings and the job cannot run (the shard takes
  /// it: ServerShard::TakeCannotRun). "" when none since the last call.
  std::string TakeConfigRefusal() { return std::exchange(config_refusal_, std::string()); }
  /// Milliseconds the loop spent building and sending joiners' states,
  /// witnessed running (so not a stall of this process), in all: the shard
  /// leaves them out of its own-stall check too (ServerShard).
  int64_t forgiven_busy_ms() const { return forgiven_total_ms_; }

 private:
  // One replica in the chain, next in the chain first.
  struct Leg {
    int process = -1;      // its slot in the shard's chain
    std::string identity;  // empty until REPLICA_HELLO
    std::string endpoint;  // where it serves the shard once it claims it
    uint64_t acked = 0;    // the last entry it acknowledged
    uint64_t sent = 0;     // the last entry sent to it
    Clock::time_point last_heard{};
    std::string send_failure;  // an entry could not be sent: judged at the next Tick
  };
  Leg* LegOf(const std::string& identity);
  // The least entry every replica acknowledged, as the log's commit point.
  void Commit();
  void RebuildChain();
  std::string ReplicaNames() const;
  void OnReplicaHello(const std::string& identity, const Message& m, Clock::time_point now);
  // REPLICA_HELLO.join: "" or why this shard takes no learner now, and in
  // *kind whether it never will (JOIN_REFUSED), has all its replicas
  // (CHAIN_FULL) or may once the process joining now is done (JOIN_LATER).
  // A full chain whose replica may be gone (its connection closed, or it
  // was silent for two heartbeat intervals) refuses for now: the joiner may
  // have come for that replica's place before Tick dropped it.
  std::string WhyNoJoin(const std::string& identity, const ReplicaHelloBody& b, Clock::time_point now,
                        ReplicateAckBody::JoinRefusal* kind);
  // "" or which field of the REPLICA_HELLO's sender's configuration
  // (cluster.num_servers, cluster.replicas, consistency.model,
  // consistency.staleness) differs from this shard's, with both values. A
  // field the sender did not set is not compared.
  std::string ConfigMismatch(const ReplicaHelloBody& b) const;
  // "" or why a replica of the chain may be gone although not dropped yet.
  std::string DoubtfulReplica(Clock::time_point now);
  void OnJoin(const std::string& identity, const Message& m, Clock::time_point now);
  // The state's parts (REPLICA_STATE, kStatePartBytes each but the last)
  // to the learner, cut from the concatenation of `pieces`.
  Status SendState(const std::vector<std::string>& pieces, uint64_t seq);
  void OnAck(Leg& leg, const Message& m, Clock::time_point now);
  void OnLearnerAck(const Message& m, Clock::time_point now);
  // The acknowledgement of a learner that joined beside replicas.
  void OnBesideAck(uint64_t applied);
  void ForwardBeside();
  // The learner caught up: it is the shard's replica from now on.
  void AppendLearner();
  void DropLearner(const std::string& why);
  void TickLearner(Clock::time_point now);
  bool Reachable(const std::string& identity);
  // A replication message from a connection without the servers' key.
  void RefuseKey(const std::string& identity, const Message& m, const std::string& peer_key);
  void Forward();
  void SendEntry(const LogEntry& e, const std::string& to, bool member);
  void DropReplica(size_t leg, const std::string& why);
  // Tells the replica host at `identity` it is not (or no longer) the
  // replica; `kind`: for a joining process, what it may do about it.
  void Refuse(const std::string& identity, const std::string& why,
              ReplicateAckBody::JoinRefusal kind = ReplicateAckBody::JOIN_REFUSED);
  // True while this process is unsure of its replica after a stall of its
  // own; `forgiven_ms` of the gap since the last Tick was witnessed work.
  bool Suspect(Clock::time_point now, int64_t forgiven_ms);
  // The loop's work for a joiner (`work`), witnessed running, is no stall.
  void ForgiveOwnWork(const BusyWitness::Verdict& work);


  const JobConfig& config_;
  const int shard_;
  const std::string log_prefix_;
  ReplicationLog log_;
  zmq::socket_t* socket_ = nullptr;
  std::string replica_key_;       // security.curve: the servers' public key
  uint64_t keys_refused_ = 0;     // replication messages refused for their key
  std::vector<Leg> legs_;         // empty: no replica (dropped, or none since a claim); one may join
  std::vector<int> placed_;       // the processes placed as replicas at the start (none after a claim)
  std::vector<std::string> chain_endpoints_;
  uint64_t chain_generation_ = 0;
  // A joining process (REPLICA_HELLO.join), until it caught up.
  StateSource state_source_;
  std::string learner_identity_, learner_endpoint_;
  int learner_slot_ = -1;
  int next_learner_slot_ = 0;  // past every server process slot
  Clock::time_point learner_heard_{};
  Clock::time_point learner_probe_{};
  std::string learner_failure_;  // an entry or a state part could not be sent: judged at the next Tick
  // A learner that joined beside replicas is followed here, as a leg is (the
  // log follows one that joined a shard alone, at its tail).
  bool learner_beside_ = false;
  bool learner_counts_ = false;  // caught up within the lag: commits wait for it
  uint64_t learner_copy_ = 0;    // the entry its state is as of
  uint64_t learner_sent_ = 0;
  uint64_t learner_acked_ = 0;
  Clock::time_point started_;
  Clock::time_point last_tick_;
  Clock::time_point last_probe_{};
  Clock::time_point stalled_at_{};  // the end of this process's last stall, while unresolved
  bool suspect_ = false;
  uint64_t mark_seq_ = 0;  // the entry appended at the end of a stall
  int64_t forgiven_ms_ = 0;        // witnessed work since the last Tick
  int64_t forgiven_total_ms_ = 0;  // witnessed work in all
  Status stepped_down_;
  std::string config_refusal_;  // TakeConfigRefusal
};

}  // namespace tether
