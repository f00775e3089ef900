// One parameter-server shard (`tether-server`): binds a ROUTER socket, holds
// its partition of every table, applies pushes with each table's optimizer,
// tracks worker clocks and answers pulls within the staleness bound.
//
// ServerShard is the socket loop and a dispatch: each message goes, once
// checked (server/request_check.h), to the room that owns it:
//   - membership (server/membership.h): HELLO, joins and rejoins, BYE (held
//     until the job's outcome once a worker finished), BARRIER, silence,
//     the startup deadline, CURVE handshake failures;
//   - the key-value service (server/kv_service.h): PULL (deferred on the
//     staleness bound), PUSH, PUSH_DELTA (model averaging), key lists;
//   - the checkpoint round (server/checkpoint_round.h): CHECKPOINT, this
//     shard's file, the resume;
//   - the kept model (server/kept_model.h): MODEL_CUT, the best epoch's
//     weights kept and put back;
//   - the job coordinator (server/coordinator/job_coordinator.h), on the
//     shard that hosts it (shard 0): CHUNK_NEXT, EVAL_GATHER, a CLOCK's job
//     part (checkpoint clock, adaptive batch size), the evaluator rank.
// Replies leave through the shard's Outbox (server/shard_outbox.h).
//
// Ownership: the shard owns its socket, its rooms and (on shard 0) the job
// coordinator, and the ZeroMQ context when none is given. Run() is a
// single-threaded event loop: one shard is one core's worth of update work,
// and scaling is by adding shards (see docs/ARCHITECTURE.md). Stop() and
// StopAfterWorkers() may be called from any thread; nothing else is
// thread-safe.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include <zmq.hpp>

#include "core/config.h"
#include "core/net/frame_pool.h"
#include "core/net/key_list_cache.h"
#include "core/net/message.h"
#include "core/net/inbox.h"
#include "core/net/listener_guard.h"
#include "core/net/zap_handler.h"
#include "core/status.h"
#include "server/checkpoint_round.h"
#include "server/clock_tracker.h"
#include "server/coordinator/job_coordinator.h"
#include "server/kept_model.h"
#include "server/kv_service.h"
#include "server/membership.h"
#include "server/replica_link.h"
#include "server/reply_cache.h"
#include "server/request_check.h"
#include "server/shard_outbox.h"
#include "server/shard_stats.h"
#include "server/table.h"

namespace tether {

class ServerShard {
 public:
  /// `config` must have passed ValidateServerConfig: the shard reads only its
  /// cluster and consistency sections (and train.metrics_dir in
  /// tools/server_main.cc); it knows no model. Its tables come with worker
  /// 0's HELLO (TableSpec, core/table_spec.h). `shard` in [0, num_servers).
  /// `context`: the ZeroMQ context to make the socket in, or null for one of
  /// the shard's own. Shards and workers of one process that talk over
  /// `inproc://` endpoints must share one context, which must outlive them.
  /// `holder`: the process that holds this shard as a copy, for the log tag
  /// of every line and error ("server 2" tags them "[server 2, shard 0] ",
  /// also once the copy claimed the shard); empty: the shard's own server
  /// process ("[server 0] ").
  explicit ServerShard(const JobConfig& config, int shard, zmq::context_t* context = nullptr,
                       const std::string& holder = "");
  ~ServerShard();

  /// Binds the shard's ROUTER socket ("tcp://127.0.0.1:0" picks a free port).
  /// With security.curve set (and a tcp:// or ipc:// endpoint) it first
  /// reads the server key pair and the authorized keys and starts the ZAP
  /// handler in the shard's context (one CURVE shard per context); inproc://
  /// needs no CURVE. A replicated shard (cluster.replicas > 0) admits the
  /// servers' own public key too: its replica host's, the only key allowed
  /// to replicate (server/replica_link.h). Without it, a non-loopback address is bound with a
  /// WARNING ("anyone who can reach this port ..."). Errors: IOError naming
  /// the endpoint; those of CurveServerOptions (core/net/curve.h).
  Status Bind(const std::string& endpoint);
  /// Connections refused at the CURVE handshake so far (unlisted keys,
  /// peers without CURVE or with another server key). Run()'s thread.
  uint64_t handshakes_refused() const { return handshakes_.refused(); }
  /// The endpoint actually bound (with the real port), after Bind.
  const std::string& endpoint() const { return endpoint_; }

  /// Serves until every one of the job's workers (the initial ones and
  /// every one that joined later) has said BYE (OK) or was
  /// removed for silence (Unavailable naming the removed workers: the job
  /// did not finish), Stop() is called (OK), a worker sent ABORT
  /// (Unavailable with the worker's reason), no worker said HELLO within
  /// cluster.startup_timeout_ms / no message came for
  /// cluster.idle_timeout_ms (DeadlineExceeded), or a worker was silent past
  /// cluster.worker_timeout_ms under on_worker_timeout: FAIL_JOB
  /// (Unavailable, naming the worker and its last clock). A signal
  /// interrupting its poll is no error (call Stop() from the handler).
  Status Run();
  /// The checkpoint this shard resumes from, on this host (a checkpoint or
  /// a directory of them: the latest complete one), when it differs from
  /// the path worker 0 sends at HELLO (tether-server --resume_from). With it
  /// set, worker 0 must resume from a checkpoint of the same clock. Call
  /// before Run().
  void set_resume_from(const std::string& path) { round_.set_resume_from(path); }
  /// Asks Run() to return at its next poll (≤ 100 ms). Thread-safe.
  void Stop() { stop_.store(true); }
  /// Asks Run() to return (OK, as for Stop()) once every worker that joined
  /// has left (BYE, or removed for silence), or `grace` after the first poll
  /// that sees the request, whichever comes first. For a stop signal that
  /// reaches the whole job at once (SLURM's scancel, requeue and time
  /// limit signal every task together): the workers, stopped by the same
  /// signal, still write their stop checkpoint and say BYE before the shard
  /// goes (docs/OPERATIONS.md). Async-signal-safe (one atomic store); Stop()
  /// still ends Run() at once.
  void StopAfterWorkers(std::chrono::milliseconds grace) {
    drain_grace_ms_.store(grace.count());
    drain_requested_.store(true);
  }

  /// The job cannot run, for `why` found outside this shard's socket (this
  /// process's copy of another shard was refused by that shard's primary:
  /// the servers were started with settings that differ): Run() refuses
  /// every worker with it and ends once each was told
  /// (Membership::CannotRun); where workers joined already (started
  /// before the servers met), it ends at once with FailedPrecondition "the
  /// job cannot run: WHY". Thread-safe.
  void CannotRun(const std::string& why);

  /// After Run(): whether every worker that joined finished the job (passed
  /// the barrier, none removed), so a stop signal that came meanwhile did
  /// not cut it short (tether-server exits 0 then).
  bool job_finished() const { return job_finished_; }

  const ServerStats& stats() const { return stats_; }
  /// Chunked messages being joined (core/net/inbox.h): a worker's push in
  /// progress. Call only while Run() is not running.
  size_t messages_being_joined() const { return inbox_.partial_messages(); }
  /// Counts a failover of this shard (ServerStats::RecordFailover): a
  /// replica that claimed the shard calls it on the copy it now serves, with
  /// the seconds from taking the primary for gone to serving the shard
  /// again (≥ 0). STATS_REPLY, the metrics JSON and /metrics carry the sum
  /// and the count. Call on Run()'s thread (or when it is not running).
  void RecordFailover(double seconds) { stats_.RecordFailover(seconds); }
  /// The shard's counters as STATS_REPLY carries them: stats() (histogram
  /// cut after its last non-empty bucket), each rank's seconds waited on the
  /// staleness bound here, and each rank's WorkerStats from its BARRIER
  /// (empty for a rank not yet there); `workers` and `bound_wait_seconds`
  /// have one entry per rank. Call on Run()'s thread (or when it is not
  /// running).
  ShardStats SnapshotStats() const;
  /// Called on Run()'s thread each time the shard's min clock advances, with
  /// the new value (tools/server_main.cc writes a JSON-lines metrics row).
  void SetClockListener(std::function<void(int64_t min_clock)> listener) { clock_listener_ = std::move(listener); }
  /// Called on Run()'s thread with done = false after every message handled
  /// and every poll round (so at least every 100 ms while Run() serves; the
  /// listener throttles itself), and once with done = true as Run()
  /// returns, whatever it returns (server/shard_metrics.h publishes the
  /// /metrics snapshot from it).
  void SetTickListener(std::function<void(bool done)> listener) { tick_listener_ = std::move(listener); }
  /// Replication (server/shard_input.h): `listener` sees every message the
  /// shard takes in from its socket, whole (chunks joined) and before any of
  /// it is handled, in the order the shard handles them. Messages the
  /// socket could not decode are not shown (they change nothing but
  /// stats().bad_messages). Not shown either: what the shard decides on
  /// its own timers (a worker removed for silence, the startup and idle
  /// deadlines, a stop). Called on Run()'s thread; set before Run().
  void SetInputListener(std::function<void(const std::string& identity, const Message& m)> listener) {
    input_listener_ = std::move(listener);
  }
  /// Takes in `m` from `identity` as Run() would have, on a shard that is
  /// a copy of another one and is neither bound nor running: the copy sends
  /// nothing (its Outbox is muted) and its checkpoint rounds write no files.
  /// Fed every input a shard's listener saw, in order, a copy made with the
  /// same config and shard number holds the same tables (rows, values,
  /// optimizer state, eviction order), clocks, members and coordinator
  /// state, bit for bit (tests/shard_replay_test.cc). Returns the error
  /// that would have ended Run() (a fatal one of the shard's rooms), else
  /// OK. Not thread-safe: one thread owns the copy.
  Status Replay(const std::string& identity, Message* m);
  /// Messages a replaying copy did not send (Replay).
  uint64_t replies_muted() const { return outbox_.muted(); }
  /// A replicated shard's (cluster.replicas > 0) record of the requests it
  /// took in and the replies it sent them (server/reply_cache.h): a
  /// request sent again, as a worker does after a failover, is answered
  /// from it or dropped rather than applied twice. Null for a shard that
  /// is not replicated (it pays nothing). Part of the state a copy fed by
  /// Replay shares with its primary. Call on Run()'s thread.
  const ReplyCache* reply_cache() const { return replies_.get(); }

  /// Replicated shards (cluster.replicas > 0, server/replica_host.h): makes
  /// this shard a copy that another shard's process feeds with Replay.
  /// Call before Bind: the copy's socket is then bound (workers may
  /// connect) but sends nothing and is not read until Claim.
  void BeginCopy();
  /// The copy claims the shard with view generation `generation`: its
  /// socket sends, its checkpoint rounds write files, and Run() serves
  /// the workers, which send again what the former primary left
  /// unanswered. `seconds`: since the primary was found gone (counted as
  /// a failover, RecordFailover). `process`: this process's slot in the
  /// shard's chain. The shard then takes a replica that joins
  /// (server/replica_link.h). Call on the copy's thread, before Run().
  void Claim(uint64_t generation, double seconds, int process);
  /// The shard's whole state (server/shard_state.h) as of the last
  /// message it took in, encoded: what a replica that joins the shard is
  /// sent. `log_seq` and `generation`: the replica link's entries applied
  /// and view generation at that point. Cost: one copy of the tables and
  /// of every room's state. Call on Run()'s thread (the replica link
  /// calls it between two messages).
  StatusOr<std::string> EncodeState(uint64_t log_seq, uint64_t generation) const;
  /// EncodeState's bytes in pieces, not joined (EncodeShardStatePieces):
  /// what the replica link sends; the tables' rows are copied once.
  StatusOr<std::vector<std::string>> EncodeStatePieces(uint64_t log_seq, uint64_t generation) const;
  /// Puts EncodeState's bytes, from the primary of the same job and shard
  /// (`peer` names it in errors), into this shard: a copy (BeginCopy) that
  /// has taken in nothing yet. The copy fed the primary's entries after
  /// the state's log_seq then holds the primary's state bit for bit
  /// (tests/shard_state_test.cc). Errors: DataLoss naming the field (a
  /// state of another shard, job or build; sizes that disagree); the copy
  /// must then be thrown away.
  Status RestoreState(std::string_view bytes, const std::string& peer);
  /// Closes the socket of a copy that will not claim the shard (its
  /// primary ended, or it declined): peers connected to it see the
  /// connection drop. Call on the copy's thread, not while Run() runs.
  void CloseSocket();
  /// Whether any worker said HELLO (to this shard, or to the primary whose
  /// inputs this copy replayed).
  bool any_hello() const { return any_hello_; }
  /// The primary's replica link (null: not replicated, or a copy).
  const ReplicaLink* replica_link() const { return link_.get(); }

  /// The shard's view of the workers' clocks. Call on Run()'s thread.
  const ClockTracker& clocks() const { return clocks_; }
  /// The job coordinator this shard hosts (shard kCoordinatorShard), or
  /// null. Call on Run()'s thread, or once Run() returned.
  const JobCoordinator* coordinator() const { return coordinator_.get(); }
  /// The job id this shard serves (cluster.job_id, or the config's name).
  const std::string& job_id() const { return job_id_; }
  /// The id this shard drew when it was made (random, never 0), stamped on
  /// every message it sends (MessageHeader.server_incarnation): a worker
  /// that sees another one on the shard's address knows the shard is a new
  /// process that holds none of the job's tables. An ABORT that names
  /// another id of this job ends this shard: its workers joined the process
  /// it replaced (docs/OPERATIONS.md "A server restarted by hand").
  uint64_t incarnation() const { return incarnation_; }
  /// Table `id` of the job (valid once worker 0's HELLO defined them; see
  /// num_tables()).
  const ServerTable& table(uint32_t id) const { return *kv_.tables()[id]; }
  size_t num_tables() const { return kv_.tables().size(); }
  /// Every table of the shard, by id (empty before worker 0's HELLO).
  const std::vector<std::unique_ptr<ServerTable>>& tables() const { return kv_.tables(); }
  /// cluster.server_memory_bytes of this shard's config (0: no budget).
  uint64_t memory_budget_bytes() const { return config_.cluster().server_memory_bytes(); }
  /// The pool that holds the values frames of pull replies (and of push
  /// replies that carry rows): pre-faulted buffers recycled once ZeroMQ has
  /// sent them, at most kDefaultFramePoolIdleBytes idle (core/net/frame_pool.h).
  const FramePool& reply_pool() const { return kv_.reply_pool(); }

  /// Key-list caching (core/net/key_list_cache.h): the bytes of key lists
  /// this shard keeps in all, split evenly over the job's workers
  /// (cluster.num_workers); each worker's share is announced at its
  /// HELLO_REPLY. 0 turns it off (every request then carries its keys).
  /// Default kDefaultKeyListCacheBytes. Call before Run().
  void set_key_list_cache_bytes(uint64_t bytes) { key_list_cache_bytes_ = bytes; }
  uint64_t key_list_cache_bytes() const { return key_list_cache_bytes_; }
  /// Each worker's share of key_list_cache_bytes().
  uint64_t key_list_bytes_per_worker() const {
    return key_list_cache_bytes_ / std::max<uint64_t>(1, members_.slots());
  }
  /// Key-list counters over all workers so far: lists defined (kept),
  /// requests served from a kept list, uses answered key_list_unknown.
  using KeyListStats = KvService::KeyListStats;
  const KeyListStats& key_list_stats() const { return kv_.key_list_stats(); }
  /// Rank's kept key lists (null before its HELLO). Run()'s thread.
  const KeyListCache* key_lists(int rank) const { return kv_.key_lists(rank); }

 private:
  // The loop: Run() less the final tick.
  Status RunLoop();
  // Receives and handles every message queued (false: a fatal error, in
  // *why).
  bool DrainSocket(Status* why);
  // Logs a message the inbox refused (`identity` its sender, or empty):
  // see server.cc for which count as activity and how often they are logged.
  void LogRefusal(const std::string& identity, const Status& why);
  // A load failure (CheckpointRound::load_failed): refuses the waiting
  // HELLOs; true once the shard should end (every initial rank told, or
  // kLoadFailedLingerMs passed).
  bool LoadFailedDone();
  // StopAfterWorkers: true once the shard should end (every worker gone,
  // the grace spent, or nothing to checkpoint).
  bool DrainDone();
  // During a stop: true once no worker still listed as staying has had a
  // connection to this shard for kUnreachableDrainMs (each one gone
  // without a goodbye: its BYE or ABORT never reached this shard, e.g.
  // while it was stopped), so nobody can take the stop checkpoint.
  bool StayingAllUnreachable();
  // The outcome once the loop ends: logs, job_finished(), and whether a
  // worker removed for silence leaves the job undone.
  Status Finish();
  // Run() ended with `why`: every request held waiting gets it as an ERROR_REPLY.
  void FailWaitingRequests(const Status& why);
  // Reads the CURVE monitor's handshake failures (HandshakeFailures).
  void TakeListenerEvents();
  // A message from a worker this shard removed for silence (`rank` dead):
  // REMOVED, with why and how to come back, never an error it would fail
  // on and abort the job for; its ABORT is ignored (the job goes on).
  void AnswerRemoved(const std::string& identity, const MessageHeader& h, int rank);
  // This shard's own loop did not run for longer than the workers may be
  // silent (the process was stopped, or starved): their silence meanwhile
  // is not theirs, so it is forgiven. Returns whether it was.
  bool ForgiveOwnStall(std::chrono::steady_clock::time_point now);
  std::chrono::steady_clock::time_point last_poll_;
  // The link's forgiven_busy_ms() already left out of that check.
  int64_t busy_forgiven_ms_ = 0;
  // The fatal error one of the rooms recorded (OK when none).
  Status Fatal() const;
  // A server process introduced itself as this shard's replica, but the
  // shard keeps none (cluster.replicas 0 here, or a copy that claimed it):
  // refused, naming why, so that the other end stops. With cluster.replicas
  // 0 here, a copy that process holds from its start means the servers were
  // started with different --replicas: the job cannot run
  // (Membership::CannotRun).
  void RefuseReplica(const std::string& identity, const MessageHeader& h);
  // The replica link's turn (liveness, stalls, commits): its error ends Run().
  Status TickReplicaLink();
  // Takes what CannotRun() or the replica link found (a server of
  // another configuration) into the membership; once the job cannot run,
  // what the replica link holds back leaves now (nothing is served).
  // Errors: FailedPrecondition, CannotRun()'s reason once workers joined.
  Status TakeCannotRun();
  // `link` becomes the shard's replica link (a primary's, or a claimed copy's).
  void StartLink(std::unique_ptr<ReplicaLink> link);

  // A message taken in (from the socket, or replayed): counted in
  // bytes_in, checked against the reply cache when there is one, widened
  // when 16-bit, then handled.
  void Take(const std::string& identity, Message* m);
  // The reply cache's verdict on `m` acted on: false when it is not to be
  // handled (its cached reply sent again, or dropped).
  bool FirstTake(const std::string& identity, const Message& m);
  // Dispatch: each message type to the room that owns it, in the order the
  // event needs (server.cc).
  void Handle(const std::string& identity, Message* m);
  // An ABORT naming another process of this job on this address, before
  // any check (this process replaced the one its workers joined).
  bool AbortFromReplacedProcess(const MessageHeader& h);
  void OnHello(const std::string& identity, Message* m);
  // The HELLO's tables: worker 0's define the job's (or resume it); the
  // others' must match. "" or why the HELLO is refused.
  std::string SetUpTables(const HelloBody& h);
  std::string MatchJob(const HelloBody& h, int rank) const;
  void OnClock(const std::string& identity, const MessageHeader& h);
  void OnBarrier(const std::string& identity, const MessageHeader& h);
  void OnBye(const std::string& identity, const MessageHeader& h);
  // EVAL_GATHER and CHUNK_NEXT: the job coordinator's, refused by a shard
  // without one.
  void OnCoordinatorRequest(const std::string& identity, const Message& m);
  void OnStats(const std::string& identity, const MessageHeader& h);
  // MODEL_CUT: keeps or restores the best epoch's weights (kept_).
  void OnModelCut(const std::string& identity, const MessageHeader& h);
  // A worker fell silent (Membership::NextSilent): the other rooms let go.
  Status CheckWorkerTimeouts();
  // A worker removed for silence: the other rooms let go of it.
  void LetGoOf(const Membership::Silent& silent);
  // The removal as an entry of the replica link's log, and its replay.
  static Message DecisionInput(const Membership::Silent& silent);
  void ReplayDecision(const ShardDecisionBody& d);
  // The min clock may have moved: parked pulls and AVERAGE rounds.
  void MinClockChanged(bool changed);
  // The largest clock of the workers that count (0 when none).
  int64_t LatestCountingClock() const;

  JobConfig config_;
  int shard_;
  int num_shards_;
  std::string job_id_;
  uint64_t incarnation_;
  std::string holder_;  // the process holding this shard as a copy ("server 2"); empty: its own server
  std::string log_prefix_;
  int initial_workers_;  // cluster.num_workers: the ranks the job waits for
  ClockTracker clocks_;
  ServerStats stats_;
  std::unique_ptr<zmq::context_t> own_ctx_;  // when no context was passed in
  zmq::context_t* ctx_;
  // security.curve: admits the listed worker keys. Declared before socket_
  // so that it outlives the socket it guards (core/net/zap_handler.h).
  std::unique_ptr<ZapHandler> zap_;
  zmq::socket_t socket_;
  // The listener's connection caps (core/net/listener_guard.h; tcp:// and
  // ipc://), which also hands over the CURVE handshake failures (a peer
  // without CURVE, or with another server key), logged in Run().
  std::unique_ptr<ListenerGuard> guard_;
  // The socket's messages in two stages (core/net/inbox.h): chunked
  // messages are joined only for workers whose HELLO was accepted.
  Inbox inbox_{"server"};
  std::string endpoint_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> drain_requested_{false};  // StopAfterWorkers
  // CannotRun(): the reason, handed to Run()'s thread under the mutex.
  std::mutex cannot_run_mu_;
  std::string cannot_run_why_;
  std::atomic<bool> cannot_run_requested_{false};
  std::atomic<int64_t> drain_grace_ms_{0};
  ShardOutbox outbox_;  // on socket_, once bound
  std::unique_ptr<ReplyCache> replies_;  // cluster.replicas > 0 only
  // The rooms (each header says what it owns).
  Membership members_;
  HandshakeFailures handshakes_;
  KvService kv_;
  RequestCheck checks_;
  // The job coordinator when this shard's process hosts it (shard
  // kCoordinatorShard), else null: this shard then refuses the requests
  // that are the coordinator's.
  std::unique_ptr<JobCoordinator> coordinator_;
  CheckpointRound round_;
  KeptModel kept_;               // the best epoch's weights (train.keep_best_model)
  bool keep_best_model_ = false;  // worker 0's HELLO announced it
  uint64_t key_list_cache_bytes_ = kDefaultKeyListCacheBytes;
  // The loop's own state (event loop only).
  std::optional<std::chrono::steady_clock::time_point> drain_deadline_;
  std::optional<std::chrono::steady_clock::time_point> drain_unreachable_since_;
  // StopAfterWorkers: the last checkpoint's clock when the stop was first
  // seen (a larger one since is the stop checkpoint), and job_finished().
  int64_t checkpoint_before_stop_ = -1;
  bool job_finished_ = false;
  Status aborted_;  // set by a worker's ABORT: Run() returns it
  Status fatal_;    // ends Run() with this error (tables this shard cannot hold)
  std::chrono::steady_clock::time_point started_, last_message_;
  uint64_t refused_unadmitted_ = 0;  // bad messages from peers not admitted (LogRefusal)
  bool any_hello_ = false;
  std::function<void(int64_t)> clock_listener_;
  std::function<void(bool)> tick_listener_;
  std::function<void(const std::string&, const Message&)> input_listener_;
  bool replaying_ = false;  // a copy fed by Replay
  std::unique_ptr<ReplicaLink> link_;  // the primary of a replicated shard
  std::string server_key_;  // security.curve: the servers' public key (the replicas')
  // This shard could not load its part of the checkpoint: it refuses every
  // HELLO (so that every worker learns which server failed and on which
  // file) and ends Run() once each initial rank was told or this long after
  // the failure, whichever comes first (ranks not started by then find no
  // server). An ABORT meanwhile does not end it sooner.
  static constexpr int64_t kLoadFailedLingerMs = 3000;
  // StayingAllUnreachable: how long every staying worker must have been
  // without a connection before a stop ends without them.
  static constexpr int64_t kUnreachableDrainMs = 500;
};

}  // namespace tether
