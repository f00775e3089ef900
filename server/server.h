// One parameter-server shard (`tether-server`): binds a ROUTER socket, holds
// its partition of every table, applies pushes with each table's optimizer,
// tracks worker clocks and answers pulls within the staleness bound.
//
// Run() is a single-threaded event loop: one shard is one core's worth of
// update work, and scaling is by adding shards (see docs/ARCHITECTURE.md).
// Stop() may be called from any thread; nothing else is thread-safe.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <memory>
#include <string>
#include <vector>

#include <zmq.hpp>

#include "core/config.h"
#include "core/net/frame_pool.h"
#include "core/net/key_list_cache.h"
#include "core/net/message.h"
#include "core/net/zap_handler.h"
#include "core/status.h"
#include "server/batch_controller.h"
#include "server/chunk_service.h"
#include "server/clock_tracker.h"
#include "server/eval_book.h"
#include "server/model_average.h"
#include "server/table.h"

namespace tether {

/// Staleness τ of applied pushes (Zhang et al., IJCAI 2016): how many
/// updates to the table landed between the version a gradient was computed
/// from and its own application.
struct StalenessHistogram {
  static constexpr int kBuckets = 64;  // τ = 0..62 exactly, the last bucket ≥ 63
  uint64_t count[kBuckets] = {};
  uint64_t pushes = 0, sum = 0, max = 0;
  void Add(uint64_t tau);
  double mean() const { return pushes ? static_cast<double>(sum) / pushes : 0.0; }
};

// The shard's counters, listed once: each is a uint64_t member of
// ServerStats and the ShardStats field of the same name (proto/tether.proto
// says what each counts), so STATS_REPLY cannot leave one out.
#define TETHER_SERVER_COUNTERS(X)                                                      \
  X(pulls)             /* PULL requests served */                                      \
  X(pushes)            /* PUSH requests applied */                                     \
  X(rows_pulled)       /* rows sent in pull replies (row tables) */                    \
  X(rows_pushed)       /* rows of gradients applied (row tables) */                    \
  X(updates_applied)   /* rows applied, a dense push counting 1; equals the */         \
                       /* workers' ClientStats::updates_sent once all are answered */  \
  X(bytes_in)          /* keys and values frames received */                           \
  X(bytes_out)         /* keys and values frames sent */                               \
  X(deferred_pulls)    /* pulls that waited on the staleness bound */                  \
  X(bound_violations)  /* pulls answered past their bound: must stay 0 */              \
  X(bad_messages)      /* answered with ERROR_REPLY */                                 \
  X(send_failures)     /* replies that could not be delivered */                       \
  X(workers_timed_out) /* removed from the min clock for silence */                    \
  X(workers_rejoined)  /* HELLO again from a known rank */                           \
  X(workers_joined)    /* HELLO from a new rank beyond cluster.num_workers */

/// Counters a shard keeps; logged at exit and sent in STATS_REPLY as a
/// ShardStats (SnapshotStats()).
struct ServerStats {
#define TETHER_DECLARE_COUNTER(name) uint64_t name = 0;
  TETHER_SERVER_COUNTERS(TETHER_DECLARE_COUNTER)
#undef TETHER_DECLARE_COUNTER
  StalenessHistogram staleness;  // over all tables of the shard
};

class ServerShard {
 public:
  /// `config` must have passed ValidateServerConfig: the shard reads only its
  /// cluster and consistency sections (and train.metrics_dir in
  /// tools/server_main.cc); it knows no model. Its tables come with worker
  /// 0's HELLO (TableSpec, core/table_spec.h). `shard` in [0, num_servers).
  /// `context`: the ZeroMQ context to make the socket in, or null for one of
  /// the shard's own. Shards and workers of one process that talk over
  /// `inproc://` endpoints must share one context, which must outlive them.
  explicit ServerShard(const JobConfig& config, int shard, zmq::context_t* context = nullptr);
  ~ServerShard();

  /// Binds the shard's ROUTER socket ("tcp://127.0.0.1:0" picks a free port).
  /// With security.curve set (and a tcp:// or ipc:// endpoint) it first
  /// reads the server key pair and the authorized keys and starts the ZAP
  /// handler in the shard's context (one CURVE shard per context); inproc://
  /// needs no CURVE. Without it, a non-loopback address is bound with a
  /// WARNING ("anyone who can reach this port ..."). Errors: IOError naming
  /// the endpoint; those of CurveServerOptions (core/net/curve.h).
  Status Bind(const std::string& endpoint);
  /// Connections refused at the CURVE handshake so far (unlisted keys,
  /// peers without CURVE or with another server key). Run()'s thread.
  uint64_t handshakes_refused() const { return handshakes_refused_; }
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
  void set_resume_from(const std::string& path) { resume_from_ = path; }
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

  /// After Run(): whether every worker that joined finished the job (passed
  /// the barrier, none removed), so a stop signal that came meanwhile did
  /// not cut it short (tether-server exits 0 then).
  bool job_finished() const { return job_finished_; }

  const ServerStats& stats() const { return stats_; }
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
  /// The shard's view of the workers' clocks. Call on Run()'s thread.
  const ClockTracker& clocks() const { return clocks_; }
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
  const ServerTable& table(uint32_t id) const { return *tables_[id]; }
  size_t num_tables() const { return tables_.size(); }
  /// The pool that holds the values frames of pull replies (and of push
  /// replies that carry rows): pre-faulted buffers recycled once ZeroMQ has
  /// sent them, at most kDefaultFramePoolIdleBytes idle (core/net/frame_pool.h).
  const FramePool& reply_pool() const { return reply_pool_; }

  /// Key-list caching (core/net/key_list_cache.h): the bytes of key lists
  /// this shard keeps in all, split evenly over the job's workers
  /// (cluster.num_workers); each worker's share is announced at its
  /// HELLO_REPLY. 0 turns it off (every request then carries its keys).
  /// Default kDefaultKeyListCacheBytes. Call before Run().
  void set_key_list_cache_bytes(uint64_t bytes) { key_list_cache_bytes_ = bytes; }
  uint64_t key_list_cache_bytes() const { return key_list_cache_bytes_; }
  /// Each worker's share of key_list_cache_bytes().
  uint64_t key_list_bytes_per_worker() const {
    return key_list_cache_bytes_ / std::max<uint64_t>(1, workers_.size());
  }
  /// Key-list counters over all workers so far: lists defined (kept),
  /// requests served from a kept list, uses answered key_list_unknown.
  struct KeyListStats {
    uint64_t defined = 0, used = 0, unknown = 0;
    uint64_t bytes_saved = 0;  // 8 × keys of the requests in `used`
  };
  const KeyListStats& key_list_stats() const { return key_list_stats_; }
  /// Rank's kept key lists (null before its HELLO). Run()'s thread.
  const KeyListCache* key_lists(int rank) const {
    auto it = key_lists_.find(rank);
    return it == key_lists_.end() ? nullptr : &it->second;
  }

 private:
  struct PendingPull {
    std::string identity;
    Message request;
    std::chrono::steady_clock::time_point since;  // when it started waiting
    KeyListCache::List offsets;  // a pull naming a key list: its rows (kept alive past an eviction)
  };
  struct WorkerState {
    bool said_hello = false, at_barrier = false, said_bye = false, dead = false;
    std::string removed_why;  // set with `dead`: "removed: silent for N ms ..."
    bool finished = false;  // reached the barrier (stays set once released)
    bool data_done = false;  // BARRIER said data on demand is DONE (chunk.kind)
    uint64_t samples = 0;
    uint64_t barrier_request = 0;
    // The clock this process (re)joined at: it takes no checkpoint at or
    // before it (a cut pending there cannot have its state).
    int64_t joined_clock = -1;
    std::string identity;
    WorkerStats stats;  // the worker's counters, from its BARRIER
    // Its BARRIER's `finished`: its entry in a checkpoint cut after it
    // finished (final_loss, diverged), without rank, kind and samples.
    CheckpointWorker finished_entry;
    double bound_wait_s = 0;  // time its pulls waited on the staleness bound here
    std::chrono::steady_clock::time_point wait_counted_until;  // bound_wait_s covers up to here
    std::chrono::steady_clock::time_point last_seen;
  };

  Status RunLoop();  // Run() less the final tick
  // Tells the worker at `identity`, unasked, that this shard was told to
  // stop (StopAfterWorkers): a HEARTBEAT with want_checkpoint set.
  void TellStopping(const std::string& identity);
  // Run() ended with `why`: every request held waiting gets it as an ERROR_REPLY.
  void FailWaitingRequests(const Status& why);
  void Handle(const std::string& identity, Message* m);
  Status CheckRequest(const std::string& identity, const Message& m) const;
  Status CheckPeer(const std::string& identity, const Message& m) const;  // values, membership
  // `offsets`: the rows of the pull's key list (ResolveKeyList), or null.
  void ServePull(const std::string& identity, const Message& m, const std::vector<uint64_t>* offsets = nullptr);
  void ServeReadyPulls();
  void ReplyError(const std::string& identity, const MessageHeader& req, const std::string& error);
  void Reply(const std::string& identity, Message* reply, int rank);
  void MaybeReleaseBarrier();
  void ApplyPush(const std::string& identity, const Message& m, const std::vector<uint64_t>* offsets = nullptr);
  // Consistency model AVERAGE (server/model_average.h): a PUSH_DELTA joins
  // the sender's pending delta; rounds below the min clock are merged into
  // the tables (called by ServeReadyPulls, before any pull is answered); a
  // worker gone mid-round loses its pending delta.
  void AddDelta(const std::string& identity, const Message& m);
  void MergeAverageRounds();
  void DropAverageDeltas(int rank, const char* why);
  // A PULL or PUSH with MessageHeader.key_list: a define (keys present)
  // resolves and keeps its rows, a use (keys left out) finds them; either
  // sets *offsets. Plain requests leave it null. Returns false when it has
  // answered the request: ERROR_REPLY with key_list_unknown for a list not
  // kept here, or the define's lookup error.
  bool ResolveKeyList(const std::string& identity, const Message& m, KeyListCache::List* offsets);
  // Puts the current values into reply's values frame: the shard's whole
  // slice (dense tables) or the rows of `keys` (n keys, row tables).
  // Errors: the table's (rows past its limit); nothing is filled then.
  // With `offsets` (a key list's rows) the keys are not looked up.
  Status FillValues(ServerTable& t, const uint64_t* keys, uint64_t n, Message* reply,
                    const std::vector<uint64_t>* offsets = nullptr);
  // FillValues for a PULL with absent_as_zeros (row tables): absent keys
  // come back as zeros and are not created. Cannot fail.
  Status FillValuesIfPresent(const ServerTable& t, const uint64_t* keys, uint64_t n, Message* reply);
  Status CheckWorkerTimeouts();
  // HELLO: checks protocol version, job and generation, shard index,
  // staleness, that no other live connection holds the rank (a second
  // claim is refused and logged, naming both connections), and tables
  // (defining them from worker 0's, or comparing with them). Returns false when the HELLO was refused (error reply sent) or
  // must wait for worker 0's (kept in waiting_hellos_).
  bool AdmitHello(const std::string& identity, Message* m);
  // Whether the ROUTER still has a connection for `identity` (a message
  // the worker ignores is sent to it; see AdmitHello).
  bool ConnectionLive(const std::string& identity);
  // Logs and counts the handshake failures the monitor reported.
  void TakeHandshakeFailures();
  void DefineTables(const google::protobuf::RepeatedPtrField<TableSpec>& specs);
  void AdmitWaitingHellos();
  // Checkpoints: a worker's CHECKPOINT joins the round at its clock; once
  // every worker still training has joined, the shard writes its file and
  // answers them all (MaybeWriteCheckpoint, also called when a worker
  // reaches the barrier, leaves or is removed).
  void HandleCheckpoint(const std::string& identity, const Message& m);
  // Partitioned evaluation (EVAL_GATHER, shard 0 only; server/eval_book.h):
  // stores the sender's partial and answers as it asked (ack, poll, wait).
  void HandleEvalGather(const std::string& identity, const Message& m);
  // Data on demand (CHUNK_NEXT, shard 0 only; server/chunk_service.h):
  // counts the completion the request carries and deals the next chunk.
  void HandleChunkNext(const std::string& identity, const Message& m);
  // Answers the EVAL_WAIT requests whose round is now complete (after a
  // partial arrived, or a worker left or was removed).
  void AnswerEvalWaiters();
  // Rank r owes no partials: it left (BYE), was removed, or joined beyond
  // the initial ranks (joiners hold no part of the test set).
  bool EvalExcused(int rank) const;
  // Whether rank r is in the job's membership: an initial rank (joined or
  // still expected), or one that joined later. A joiner's slot that was
  // never taken is not: it holds no barrier, evaluation or exit back.
  bool Member(size_t rank) const;
  void MaybeWriteCheckpoint();
  // Ends the pending round without writing it: every worker waiting at it
  // gets a CHECKPOINT_REPLY with checkpoint_abandoned and `why`.
  void AbandonCheckpoint(const std::string& why);
  // Data on demand in checkpoints (checkpoint/chunk_state.h), shard 0 only:
  // writes chunks.state into the round's directory when chunks are being
  // dealt (*written keeps no name otherwise), and on a resume hands the
  // checkpoint's state to chunks_ ("" or why the resume is refused).
  Status WriteChunkStateIfDealing(CheckpointFile* written);
  std::string ResumeChunkState(const std::string& dir, const CheckpointManifest& m);
  // Worker 0's HELLO of a resumed job: loads this shard's rows. Returns
  // "" or why the HELLO is refused (a failed load is also recorded in
  // load_failed_: LoadFailed).
  std::string Resume(const MessageHeader& hello);
  // Records that this shard could not load its checkpoint (load_failed_);
  // returns `why`, the refusal every worker's HELLO gets from then on.
  std::string LoadFailed(const std::string& why);

  JobConfig config_;
  int shard_;
  std::unique_ptr<ModelAverager> averager_;  // AVERAGE jobs only (set by DefineTables)
  EvalBook eval_book_;  // partitioned evaluation (shard 0)
  ChunkService chunks_;  // data on demand (shard 0)
  int num_shards_;
  std::string job_id_;
  uint64_t incarnation_;
  std::string log_prefix_;
  // The job's tables as worker 0 declared them, and the shard's part of
  // each; empty until worker 0's HELLO.
  google::protobuf::RepeatedPtrField<TableSpec> job_tables_;
  std::vector<std::unique_ptr<ServerTable>> tables_;
  // HELLOs of other workers that came before worker 0's, by rank.
  std::map<int, PendingPull> waiting_hellos_;
  // BYEs of workers that finished (passed the barrier), answered when this
  // shard's part of the job ends: BYE_REPLY if the job did its job, else
  // the reason (a worker removed later, with the static split), so that no
  // worker of a failed job exits 0 (Run, AnswerHeldByes).
  struct HeldBye {
    std::string identity;
    uint64_t request_id = 0;
    int rank = -1;
  };
  std::vector<HeldBye> held_byes_;
  void AnswerHeldByes(const Status& outcome);
  ClockTracker clocks_;
  // One slot per rank: the initial ones, grown by a joiner's HELLO to its
  // rank + 1 (elastic membership; at most max_workers_).
  std::vector<WorkerState> workers_;
  int initial_workers_;  // cluster.num_workers: the ranks the job waits for
  int max_workers_;      // MaxWorkers(cluster): ranks ≥ this are refused
  std::deque<PendingPull> pending_;
  std::unique_ptr<zmq::context_t> own_ctx_;  // when no context was passed in
  zmq::context_t* ctx_;
  // security.curve: admits the listed worker keys. Declared before socket_
  // so that it outlives the socket it guards (core/net/zap_handler.h).
  std::unique_ptr<ZapHandler> zap_;
  zmq::socket_t socket_;
  // With CURVE: the ROUTER's handshake failures (a peer without CURVE, or
  // with another server key), read in Run() and logged.
  zmq::socket_t monitor_;
  uint64_t handshakes_refused_ = 0;
  uint64_t handshake_failures_logged_ = 0;  // failures other than ZAP refusals (logged 1st, 10th, 100th ...)
  std::string endpoint_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> drain_requested_{false};  // StopAfterWorkers
  std::atomic<int64_t> drain_grace_ms_{0};
  std::optional<std::chrono::steady_clock::time_point> drain_deadline_;  // event loop only
  Status aborted_;  // set by a worker's ABORT: Run() returns it
  std::function<void(int64_t)> clock_listener_;
  // Adaptive batch sizes (shard 0; server/batch_controller.h): made at the
  // first CLOCK that carries a report, with its settings (adaptive_settings_).
  std::unique_ptr<BatchController> batch_controller_;
  AdaptiveBatchClock adaptive_settings_;  // rows and batch_size cleared
  struct BatchTiming {
    std::chrono::steady_clock::time_point last_clock;  // its previous CLOCK
    double bound_wait_s = 0;                            // WorkerState::bound_wait_s then
  };
  std::map<int, BatchTiming> batch_timing_;  // by rank
  // A CLOCK's report: feeds the controller (busy time = time since the
  // rank's previous CLOCK less its bound wait since) and puts the size it
  // answers into `reply`. Errors: settings that differ from the first
  // report's, or that the controller refuses (InvalidArgument).
  Status ReportAdaptiveBatch(int rank, const AdaptiveBatchClock& report, MessageHeader* reply);
  // Takes `rank` out of the controller (finished, left, removed, rejoined).
  void ForgetAdaptiveBatch(int rank);
  std::function<void(bool)> tick_listener_;
  ServerStats stats_;
  // Reply values frames. Frames still queued in ZeroMQ when the shard is
  // destroyed keep the pool's state alive until they are sent or dropped.
  FramePool reply_pool_;
  // Checkpoints (see HandleCheckpoint).
  struct CheckpointRound {
    int64_t clock = -1;  // −1: none in progress
    bool final = false;
    std::string dir;
    std::map<int, std::pair<std::string, uint64_t>> waiting;  // rank → identity, request id
    std::map<int, CheckpointFile> files;                       // rank → its state file
  };
  CheckpointRound round_;
  int64_t due_checkpoint_clock_ = -1;   // shard 0: the clock picked on a want_checkpoint
  int64_t last_checkpoint_clock_ = -1;
  // StopAfterWorkers: last_checkpoint_clock_ when the stop was first seen (a
  // larger one since is the stop checkpoint), and job_finished().
  int64_t checkpoint_before_stop_ = -1;
  bool job_finished_ = false;
  std::string resume_from_;             // set_resume_from
  // The first admitted HELLO's train.data_on_demand: every later HELLO
  // must agree (MessageHeader.data_on_demand).
  std::optional<bool> hello_data_on_demand_;
  // The first HELLO's train.epochs (MessageHeader.train_epochs): every
  // later HELLO that carries it must agree.
  std::optional<int64_t> hello_epochs_;
  // The rank that evaluates, fixed by the first release of the barrier: a
  // worker reaching the barrier after it (a late joiner) is told the same
  // rank, never made the evaluator of a job already reported.
  int job_evaluator_ = -1;
  int64_t resume_clock_ = -1;           // the clock this shard resumed at, or −1
  // Shard 0: each rank's state file at the last checkpoint it took part in,
  // and that checkpoint's directory (a rank that leaves is LEFT from it).
  std::map<int, std::pair<std::string, CheckpointFile>> last_state_;
  Status fatal_;                        // ends Run() with this error
  // This shard could not load its part of the checkpoint (--resume_from or
  // worker 0's): it refuses every HELLO with `load_failed_why_`, so that
  // every worker learns which server failed and on which file, and ends
  // Run() with load_failed_ once each initial rank was told or
  // kLoadFailedLingerMs after the failure, whichever comes first (ranks not
  // started by then find no server). An ABORT meanwhile does not end it
  // sooner.
  static constexpr int64_t kLoadFailedLingerMs = 3000;
  Status load_failed_;
  std::string load_failed_why_;
  std::chrono::steady_clock::time_point load_failed_at_;
  // Every rank must say HELLO within cluster.startup_timeout_ms of the
  // first one (why a rank was refused is kept to name it then).
  std::optional<std::chrono::steady_clock::time_point> first_hello_;
  bool first_hello_done_ = false;  // every rank joined in time
  std::map<int, std::string> refusals_;
  std::vector<uint64_t> key_scratch_;
  // Key lists kept per rank (reset at its HELLO, dropped at its BYE). They
  // hold row offsets, valid because a row never moves while its table
  // lives (server/table.h): anything that moves or drops rows of a live
  // shard must clear key_lists_.
  uint64_t key_list_cache_bytes_ = kDefaultKeyListCacheBytes;
  std::map<int, KeyListCache> key_lists_;
  KeyListStats key_list_stats_;
  std::vector<float> value_scratch_;
};

}  // namespace tether
