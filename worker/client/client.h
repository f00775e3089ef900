// WorkerClient: a worker's connection to every server shard, with ps-lite
// style asynchronous Push/Pull (Li et al., OSDI 2014). Each call returns a
// RequestHandle (worker/client/request_channel.h, in the manner of c10d's Work) as
// soon as its messages are handed to the sockets; handle.Wait() blocks until
// every shard touched by that call has answered and returns that call's own
// status. A call itself can block: a pull first waits for the replies of its
// table's own pushes when they carry rows back (refresh_on_push, for
// read-my-writes from the cache), and any send waits while its shard has a
// full in-flight window (back-pressure, case C13).
//
// The data path: HELLO (Connect), pull, push and clock. The control calls
// (checkpoint, barrier, evaluation gather, chunks, stats, goodbyes) are a
// JobSession's (worker/client/job_session.h), over this client's channel.
//
// Layers: WorkerClient splits keys by owner shard, builds the messages and
// scatters replies back into the caller's buffer; RequestChannel
// (worker/client/request_channel.h) owns the sockets, request ids, window,
// heartbeats and handles; ParamCache (worker/client/param_cache.h) is the SSP cache.
//
// Keys passed to PullRows/PushRows must be sorted and unique. Buffers passed
// to Pull* must stay alive and unmodified until the handle completed (pushes
// copy their values at call time, so push buffers may be reused at once).
//
// Ordering: requests from one worker to one shard are delivered in order, so
// a pull issued after a push from the same worker sees that push
// (read-my-writes), and a CLOCK arrives after the pushes of its clock.
//
// Cache: for tables with a bound s ≥ 0 and consistency.cache on, a read at
// clock c takes rows read at a shard min clock r ≥ c − s from memory and
// fetches the others (see worker/client/param_cache.h for the rule, refresh_on_push
// and evict-on-push; ClientOptions::cache_capacity_bytes bounds it, evicting
// the least recently used rows). ASP tables are never cached.
//
// Errors: a failed push is logged (shard, table, key range), counted in
// updates_failed, reported on its own handle, and also fails the worker's
// next Clock, Idle or WaitAll, and the session's Barrier or Bye (sticky),
// so a lost update never ends in exit 0 even when nobody waits on the push.
//
// Versions: every pull reply carries the table's version on the shard; each
// push carries the oldest version among the rows of that shard the caller
// last read, so the server can measure the push's staleness τ. A pipelined
// worker's read of its next minibatch (PullRowsAt for a clock, between
// StartReadAhead and UseReadAhead) is kept apart until it is used, so the
// current minibatch's pushes still carry the read they were computed from.
//
// Not thread-safe: one client per worker thread; its handles belong to the
// same thread and may outlive the client (see RequestHandle).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <zmq.hpp>

#include "core/config.h"
#include "core/net/frame_pool.h"
#include "core/net/key_list_cache.h"
#include "core/net/message.h"
#include "core/status.h"
#include "worker/client/param_cache.h"
#include "worker/client/push_encoder.h"
#include "worker/client/request_channel.h"
#include "worker/client/slot_pool.h"

namespace tether {

class LocalReplica;  // worker/client/local_replica.h

struct ClientOptions {
  int rank = 0;
  int heartbeat_interval_ms = 1000;  // heartbeat while blocked longer than this
  std::vector<std::string> servers;  // endpoint per shard, in shard order
  int64_t staleness = 0;             // must equal the servers' bound
  // Sent with HELLO so a shard refuses a worker that disagrees with the
  // job's (train.data_on_demand; ConsistencyConfig.model).
  bool data_on_demand = false;
  ConsistencyModel consistency_model = SSP;
  // train.epochs, sent with HELLO: every worker of a job trains the same
  // number of epochs (0: not sent, as a tool's client).
  int64_t epochs = 0;
  // cluster.num_workers, sent with HELLO: a shard started for another
  // number of workers refuses the worker (0: not sent, as a tool's client).
  int num_workers = 0;
  // checkpoint.dir (absolute, "" for none), sent with HELLO: every worker of
  // a job writes its checkpoints to one folder (unset: not sent, as a
  // tool's client).
  std::optional<std::string> checkpoint_dir;
  // Digests of the data the worker reads, one per config field, sent with
  // HELLO (HelloBody.data_digests; worker/train/data_watch.h FieldDigests):
  // the shards refuse a worker whose data differs from the first one's.
  // Empty: not sent (a tool's client).
  std::vector<std::pair<std::string, uint64_t>> data_digests;
  // train.keep_best_model with a validation split, sent with HELLO: the
  // shards will keep a copy of the best epoch's weights (MODEL_CUT).
  bool keep_best_model = false;
  std::string job_id;                // the job's identity (JobId(config)): must equal the servers'
  uint64_t generation = 0;           // cluster.generation: must equal the servers'
  int request_timeout_ms = 120000;   // Wait fails after this long with no reply
  int max_outstanding = 64;          // in-flight requests per shard before a call blocks
                                     // (kept ≤ send_hwm and ≤ recv_hwm; see RequestChannel::Send)
  int send_hwm = 1000;               // ZeroMQ high-water marks of the sockets, in
  int recv_hwm = 1000;               // messages (cluster.send_hwm / recv_hwm)
  /// Row pulls and pushes whose values would exceed this many bytes in one
  /// message are split into several messages per shard (and joined again);
  /// at most kMaxFrameBytes. Dense slices are checked at set-up instead
  /// (ValidateJobConfig). 64 MiB keeps each message's transfer well inside
  /// the ZMTP heartbeat timeout (liveness_timeout_ms) while its fixed cost
  /// stays negligible. A table with a row budget (budget.max_rows) gets at
  /// most max_rows keys a message too, so that no message asks a shard for
  /// more rows than it may hold (RowsPerMessage).
  uint64_t max_message_bytes = uint64_t{64} << 20;
  /// PullRowsIfPresent (evaluation) sends its keys in slices of at most
  /// this many bytes of values, all shards together, one slice at a time,
  /// so a shard holds at most one such reply of this size per worker. An
  /// evaluation minibatch (train.eval_minibatch_size, 512 rows by default)
  /// pulls several times a training minibatch's rows; in one message each,
  /// a shard's reply frames at evaluation would be megabytes larger than in
  /// training (docs/MEMORY.md, tables within a memory budget). 1 MiB costs
  /// a round trip per MiB of rows, negligible beside the prediction. At
  /// least one row a slice.
  uint64_t eval_pull_bytes = uint64_t{1} << 20;
  /// The job's tables (TablesForJob), declared at HELLO: worker 0's define
  /// them on every shard; any other worker's must equal them field by field.
  std::vector<TableSpec> tables;
  /// ZeroMQ context for the sockets, or null for one of the client's own.
  /// Must be the servers' context for `inproc://` endpoints (one-process
  /// jobs, see tools/worker_main.cc --in_process), and outlive the client.
  zmq::context_t* context = nullptr;
  /// When set (by another thread), every wait of this client gives up within
  /// a heartbeat interval with Unavailable ("aborted"): one-process jobs set
  /// it when another worker failed, so no one waits for a peer that is gone.
  const std::atomic<bool>* abort = nullptr;
  /// cluster.liveness_timeout_ms: a shard whose tcp:// or ipc:// connection
  /// has been down this long is gone, and every wait fails with Unavailable
  /// naming it (RequestChannel's file comment); 0: off.
  int liveness_timeout_ms = 5000;
  /// cluster.startup_timeout_ms: a shard whose tcp:// or ipc:// endpoint has
  /// never completed a ZMTP handshake this long after Connect is given up
  /// (Unavailable naming it and `servers_source`); 0: off (only
  /// request_timeout_ms bounds the HELLO).
  int first_connect_timeout_ms = 0;
  /// Where the endpoints came from, for that error ("rendezvous tcp://h:p"
  /// warns of a stale entry); empty: given on the command line or config.
  std::string servers_source;
  /// Re-reads the rendezvous entries of shards that have never connected
  /// or are down, and moves a shard whose entry changed
  /// (RequestChannel::Options::server_lookup); null: off. One per client.
  std::shared_ptr<ServerLookup> server_lookup;
  /// Follows a replicated shard whose chain ran out to the process its
  /// rendezvous entry names (RequestChannel::Options::claim_lookup); null:
  /// off. One per client.
  std::shared_ptr<ClaimLookup> claim_lookup;
  /// security.curve: this worker's key pair and the servers' public key
  /// (CurveClientOptions, core/net/curve.h); empty: plain connections.
  /// Applied to tcp:// and ipc:// endpoints. A server that refuses the key
  /// (or speaks no CURVE) fails Connect within a few hundred ms, naming the
  /// shard and why (RequestChannel::Options::curve).
  CurveOptions curve;
  /// A stop request (a signal), polled every 100 ms while a call waits:
  /// when true, waits give up with Unavailable ("stop requested"), and the
  /// caller leaves with JobSession::Leave(). May be empty.
  std::function<bool()> stop_requested;
  /// Push values and request keys of at least kMinPooledFrameBytes are
  /// built in recycled, pre-faulted buffers that ZeroMQ sends zero-copy
  /// (core/net/frame_pool.h); at most this many bytes of them are kept idle
  /// between requests. 0 maps a fresh buffer per message.
  uint64_t frame_pool_idle_bytes = kDefaultFramePoolIdleBytes;
  /// A resumed job: the checkpoint directory and its clock, sent at HELLO
  /// (every shard loads its rows from there; see checkpoint/checkpoint.h).
  std::string resume_from;
  int64_t resume_clock = -1;
  /// The parameter cache's capacity in bytes over all tables (ParamCache;
  /// consistency.cache_capacity_bytes / _fraction resolved by
  /// ResolveCacheCapacity, core/memory_fit.h); 0: unbounded.
  uint64_t cache_capacity_bytes = 0;
  /// Key-list caching (core/net/key_list_cache.h): a row pull or push of at
  /// least kMinKeyListKeys keys to a shard that keeps key lists
  /// (HELLO_REPLY.key_list_cache_bytes > 0) names its list; when the shard
  /// already holds the list the keys are left out and not looked up again
  /// (a push after the pull of the same keys, a repeated request). The
  /// worker keeps a mirror of each shard's lists (keys, compared before a
  /// list is named; as many bytes as the shard keeps). false: every request
  /// carries its keys (tether-bench kv --key_list_cache=false; in a job
  /// consistency.key_list_cache, flag --key_list_cache); a shard
  /// started with --key_list_cache_bytes=0 turns it off for every worker.
  bool key_lists = true;
  /// Error feedback per table (indexed like `tables`; absent: off), read
  /// for tables whose push_wire is 16-bit (worker/client/push_encoder.h);
  /// the residual memory per row table, in bytes.
  std::vector<bool> error_feedback;
  uint64_t residual_bytes = PushEncoder::kDefaultResidualBytes;
};

/// Per-client counters.
struct ClientStats {
  uint64_t pulls = 0, pushes = 0;        // messages to servers
  uint64_t rows_pulled = 0, rows_pushed = 0;  // rows on the wire
  uint64_t rows_read = 0;                // rows handed to the caller by PullRows
  uint64_t cache_hits = 0;               // of rows_read, served from the cache
  // The parameter cache (ParamCache::Stats): entries evicted for room,
  // bytes charged now and at most, and the capacity (0: unbounded).
  uint64_t cache_evictions = 0;
  uint64_t cache_bytes = 0;
  uint64_t cache_peak_bytes = 0;
  uint64_t cache_capacity_bytes = 0;
  uint64_t bytes_sent = 0, bytes_received = 0;
  // Of bytes_received: large float32 pull values written into the caller's
  // buffer chunk by chunk as they arrived (no reply-sized buffer).
  uint64_t bytes_placed = 0;
  double wait_seconds = 0;  // time blocked in Wait (includes staleness waits)
  // Updates: rows of pushes (a dense slice counts 1), as the servers'
  // ServerStats::updates_applied counts them. Once every push is answered,
  // the sum of updates_applied over the shards equals updates_sent.
  uint64_t updates_sent = 0;    // handed to a socket
  uint64_t updates_failed = 0;  // could not be sent, or refused by the server (logged as errors)
  uint64_t send_waits = 0;      // sends that waited for room in the in-flight window (back-pressure)
  // Replicated shards followed to the next server of their chain when the
  // primary's connection went down (RequestChannel, "A replicated shard").
  uint64_t failovers = 0;
  // Key-list caching: messages that defined a list (sent keys and its id),
  // that named a list the shard held (no keys sent), and that were sent
  // again with their keys because the shard did not hold the list.
  uint64_t key_lists_defined = 0, key_lists_used = 0, key_lists_resent = 0;
  // Bytes of keys frames not sent: 8 × keys of every use not resent.
  uint64_t key_list_bytes_saved = 0;
  // Bytes of push values sent by reference to the caller's PushValues
  // buffer instead of copied into a frame (PushRows(PushValues)).
  uint64_t push_bytes_shared = 0;
  // 16-bit pushes (PushEncoder::Stats): values saturated, rows holding a
  // residual, rows whose residual was dropped for room and Σ |residual|
  // dropped.
  uint64_t push_values_saturated = 0;
  // 16-bit replies: values the shards saturated narrowing them
  // (WireBytes::received_saturated).
  uint64_t reply_values_saturated = 0;
  uint64_t residual_rows = 0;
  uint64_t residual_evicted = 0;
  double residual_evicted_l1 = 0;
  // Bytes on the wire per table and direction (worker/client/wire_bytes.h),
  // indexed by table id.
  std::vector<TableWireBytes> wire;
};

/// Push values that the caller fills in place and pushes without a copy:
/// ps-lite's ZPush contract (its SArray values are sent zero-copy), for
/// gradients that are computed straight into the buffer or pushed again
/// unchanged. Made by WorkerClient::NewPushValues: a pooled, pre-faulted
/// buffer of `size()` floats, 64-byte aligned, contents undefined until the
/// caller writes them.
///
/// Ownership: a handle to a shared buffer (copies share it). A push from it
/// hands ZeroMQ references to the buffer itself, not a copy; the buffer is
/// given back to the client's frame pool when the last handle and the last
/// message referring to it are gone (ZeroMQ frees a message on its I/O
/// thread once written; the reference count is atomic).
///
/// Contract: after a push from these values, the caller must not write to
/// them until that push's handle completed (Wait returned), or WaitAll,
/// Clock or JobSession::Barrier returned: the bytes may still be on their
/// way, and a push the shard has to be sent again (a key list it no longer
/// holds) sends them again. in_flight() says whether a message still refers to
/// the buffer. Thread-safety: as the client (one thread), except that the
/// buffer's release may run on ZeroMQ's I/O thread.
class PushValues {
 public:
  PushValues() = default;
  float* data() { return static_cast<float*>(frame_ ? frame_->data() : nullptr); }
  const float* data() const { return static_cast<const float*>(frame_ ? frame_->data() : nullptr); }
  /// Floats in the buffer.
  size_t size() const { return size_; }
  /// True while a message sent from the buffer has not been freed yet.
  bool in_flight() const { return frame_ && frame_.use_count() > 1; }

 private:
  friend class WorkerClient;
  std::shared_ptr<zmq::message_t> frame_;
  size_t size_ = 0;
};

/// Keys fixed once for requests that repeat them (a minibatch's keys pulled
/// and then pushed, a benchmark's keys: ps-lite's SArray keys), made by
/// WorkerClient::FixKeys. Immutable, so a key list this worker named with
/// them (ClientOptions::key_lists) is known to hold them by identity: a
/// request that sends them whole to one shard (a one-shard job, in one
/// message) names the list without comparing the keys again (10⁶ keys:
/// about 1 ms a request). Anything else is compared as with a vector.
///
/// Ownership: a handle to a shared const vector (copies share it); the
/// client's key-list mirror may keep a reference while the shard keeps
/// the list. Thread-safe to read.
class FixedKeys {
 public:
  // Explicit, so that PullRows(table, {}, out) still means an empty vector of keys.
  explicit FixedKeys() : keys_(std::make_shared<const std::vector<uint64_t>>()) {}
  const std::vector<uint64_t>& keys() const { return *keys_; }
  size_t size() const { return keys_->size(); }

 private:
  friend class WorkerClient;
  std::shared_ptr<const std::vector<uint64_t>> keys_;
};

class WorkerClient {
 public:
  /// Connects to every shard and exchanges HELLO, which checks protocol
  /// version, job id and generation, the shard index each server has in
  /// `servers` (case C26), staleness and the tables (worker 0's define them;
  /// a HELLO of another worker is answered once worker 0's arrived).
  /// Errors: InvalidArgument (no or a bad endpoint), FailedPrecondition (a server
  /// refused to pair: the message names the server's address and both
  /// values), DeadlineExceeded (a server did not answer within
  /// request_timeout_ms).
  static StatusOr<std::unique_ptr<WorkerClient>> Connect(const ClientOptions& options);
  /// Closes the sockets; handles still held report what they had, or
  /// Unavailable when their replies had not all arrived.
  ~WorkerClient();

  /// Pulls rows of `keys` (sorted, unique) of row table `table` into `out`
  /// (keys.size() × dim floats, row i ↔ keys[i]; must stay valid until the
  /// handle completed). Handle errors: the server's ERROR_REPLY text
  /// (FailedPrecondition), DataLoss (a reply of the wrong size), a send's
  /// error.
  [[nodiscard]] RequestHandle PullRows(uint32_t table, const std::vector<uint64_t>& keys, float* out);
  /// PullRows for evaluating a hashed model: a key the server does not hold
  /// comes back as dim zeros and is not created there (PULL with
  /// PullBody.absent_as_zeros). Bypasses the cache both ways (reads the
  /// servers' rows; stores nothing, so a zero row never stands in for a row
  /// training creates later). The keys go in slices of at most
  /// ClientOptions::eval_pull_bytes of values: the call waits for every
  /// slice's replies but the last one's, whose handle it returns (or the
  /// first failed slice's). Counted in pulls/rows_pulled/rows_read like
  /// PullRows (a message per slice and shard). Errors as PullRows.
  [[nodiscard]] RequestHandle PullRowsIfPresent(uint32_t table, const std::vector<uint64_t>& keys, float* out);
  /// PullRows of part of a buffer, possibly ahead of its clock (a pipelined
  /// worker, train.pipeline, pulls the rows of its next minibatch that the
  /// current one does not push while the current one computes): row i of
  /// `keys` (sorted, unique) lands at out + out_rows[i]·dim (`out_rows`:
  /// keys.size() distinct row indices, read during the call only).
  /// `read_clock` > clock() reads for that later clock: the cache serves
  /// rows fresh at it, and the messages carry it, so a shard answers under
  /// that clock's staleness bound (it defers the pull until its min clock is
  /// ≥ read_clock − s, as it would the pull made at that clock); otherwise
  /// a read now. Requests from one worker to one shard stay in order, so
  /// the pull sees every push sent before it and none sent after: the
  /// caller must not read ahead a row it pushes before it uses it
  /// (read-my-writes). Not with a replica (AVERAGE): the handle fails
  /// FailedPrecondition. Other errors as PullRows.
  ///
  /// Read versions (the staleness τ pushes report, see "Versions" above):
  /// a pull with read_clock ≥ 0 belongs to the table's read ahead, which
  /// StartReadAhead begins and UseReadAhead makes current once its pulls
  /// are answered; until then pushes carry the current read's versions.
  [[nodiscard]] RequestHandle PullRowsAt(uint32_t table, const std::vector<uint64_t>& keys, const uint32_t* out_rows,
                                         float* out, int64_t read_clock = -1);
  /// Begins a read ahead of `table` (forgets the last one's versions).
  void StartReadAhead(uint32_t table) { cache_.StartReadAhead(table); }
  /// The read ahead becomes the current read: later pushes of `table` carry
  /// its versions (call once every pull of it is answered).
  void UseReadAhead(uint32_t table) { cache_.UseReadAhead(table); }
  /// Pushes gradients `grads` (keys.size() × dim, copied at once) for `keys`
  /// (sorted, unique). The handle may be dropped (failures are also sticky).
  RequestHandle PushRows(uint32_t table, const std::vector<uint64_t>& keys, const float* grads);
  /// PushRows of part of a buffer: row i's gradient is at grads + in_rows[i]
  /// · dim (`in_rows`: keys.size() row indices, read during the call). A
  /// pipelined worker (train.pipeline) pushes the rows its next minibatch
  /// reads first, then pulls them, then pushes the others. As PushRows
  /// otherwise (also with a replica).
  RequestHandle PushRowsAt(uint32_t table, const std::vector<uint64_t>& keys, const uint32_t* in_rows,
                           const float* grads);
  /// A buffer of `num_floats` floats for PushRows(table, keys, values)
  /// below, from the client's frame pool (see PushValues). Throws
  /// std::bad_alloc when the mapping fails.
  PushValues NewPushValues(size_t num_floats);
  /// PushRows of `values` (at least keys.size() × dim floats; row i's
  /// gradient at values.data() + i·dim) without copying them: a message to
  /// a shard whose rows are a contiguous block of the buffer (every message
  /// of a one-shard job) refers to the buffer itself. Rows of several
  /// shards, which hash partitioning interleaves, are gathered per shard as
  /// PushRows does; so are pushes rescaled on the worker (adaptive batches,
  /// step_scaling LINEAR) and a replica's (AVERAGE). The values must stay
  /// unmodified until the handle completed (PushValues). Counted in
  /// ClientStats::push_bytes_shared. Errors as PushRows; fewer values than
  /// the keys need fails the handle with InvalidArgument.
  RequestHandle PushRows(uint32_t table, const std::vector<uint64_t>& keys, const PushValues& values);
  /// `keys` made immutable for repeated requests (FixedKeys); they must be
  /// sorted and unique, as every request's keys.
  static FixedKeys FixKeys(std::vector<uint64_t> keys);
  /// PullRows and PushRows(PushValues) of fixed keys: the same messages,
  /// rows and errors as with keys.keys(), less the key-list comparison
  /// where FixedKeys says.
  [[nodiscard]] RequestHandle PullRows(uint32_t table, const FixedKeys& keys, float* out);
  RequestHandle PushRows(uint32_t table, const FixedKeys& keys, const PushValues& values);
  /// Pulls a whole dense table into `out` (size floats). Errors as PullRows.
  [[nodiscard]] RequestHandle PullDense(uint32_t table, float* out);
  /// Pushes a gradient for a whole dense table (size floats, copied at once).
  RequestHandle PushDense(uint32_t table, const float* grad);

  /// Waits for every request in flight, then returns the sticky error (the
  /// first failed push). Errors: those of RequestHandle::Wait.
  Status WaitAll();

  /// Completes the current clock: sends CLOCK to every shard (after the
  /// clock's pushes, so the server applies them first). Returns the sticky
  /// error (a failed push or send so far).
  ///
  /// Shard 0 answers CLOCK (CLOCK_REPLY); before returning, Clock waits for
  /// the answer to the previous clock's CLOCK (normally long arrived), so a
  /// checkpoint clock that shard 0 picks (want_checkpoint) is known to every
  /// worker before it can pass it (server/coordinator/checkpoint_clock.h).
  /// `want_checkpoint`: ask shard 0 for a checkpoint at a clock it picks for
  /// every worker; see due_checkpoint_clock().
  Status Clock(bool want_checkpoint = false);
  /// Tells every shard that this worker waits at a round all workers take
  /// part in, at its current clock (`parked`), or that the round is over:
  /// while parked it does not hold the others' staleness bound (server
  /// ClockTracker::Park). Call with its pushes applied (WaitAll), and
  /// unpark before any pull or push of the next clock. Nobody answers.
  /// Errors: the channel's sticky error.
  Status ParkClock(bool parked);
  /// The clock of a checkpoint shard 0 asked every worker to take (−1:
  /// none). Take it when clock() equals it.
  int64_t due_checkpoint_clock() const { return due_checkpoint_clock_; }

  /// Adaptive batch sizes (train.adaptive_batch; server/coordinator/batch_controller.h).
  /// The next Clock() carries `report` (the clock's rows, the batch size they
  /// were trained with, the job's settings) to shard 0, once.
  void SetAdaptiveBatchReport(const AdaptiveBatchClock& report) { adaptive_report_ = report; }
  /// The minibatch size shard 0 last answered a CLOCK with (0: none yet).
  int adaptive_batch_size() const { return adaptive_batch_size_; }
  /// How the next pushes' steps follow their batch size (AdaptiveBatchConfig
  /// step_scaling): every gradient pushed is multiplied by
  /// `gradient_scale` as it is copied (LINEAR), and every PUSH carries
  /// `push_weight`, by which the shard multiplies its step (SERVER_WEIGHT;
  /// 1 sends none). Both finite and > 0; both 1 by default.
  void SetPushScaling(float gradient_scale, float push_weight) {
    gradient_scale_ = gradient_scale;
    push_weight_ = push_weight;
  }
  /// Completed clocks. A worker rejoining a running job starts at the clock
  /// the servers assign (the slowest live worker's), not 0.
  int64_t clock() const { return channel_.clock(); }
  /// When this process took the place of an earlier process of the same
  /// rank in a running job (a restart by hand or by a launcher), the clock
  /// that process had reached, as the shards told at HELLO (the largest of
  /// their answers); −1 for a first start. Set by Connect, then constant.
  int64_t rejoin_clock() const { return rejoin_clock_; }
  /// With rejoin_clock(): the rows the rank's earlier processes trained, as
  /// shard 0 counted them from their CLOCKs (0 for a first start).
  uint64_t rejoin_samples() const { return rejoin_samples_; }
  /// The rows this worker has trained so far (its own, plus what it resumed
  /// from or inherited): each CLOCK to shard 0 carries the latest value, so
  /// the job's count keeps them should this process die or leave.
  void set_samples_trained(uint64_t samples) { samples_trained_ = samples; }

  /// Sleeps `ms` milliseconds while keeping the worker alive (heartbeats) and
  /// processing replies; used to simulate a straggler (--slowdown). Returns
  /// the sticky error.
  Status Idle(int ms);

  /// True once a shard removed this worker for silence (its REMOVED
  /// message; cluster.worker_timeout_ms): every call fails with the reason.
  bool removed() const { return channel_.removed(); }
  /// The shard told to stop (RequestChannel::stopping_shard), or −1.
  int stopping_shard() const { return channel_.stopping_shard(); }

  /// The control side of the connection: a JobSession
  /// (worker/client/job_session.h) sends its control messages (checkpoint,
  /// barrier, evaluation gather, chunks, stats, goodbyes) over this
  /// client's channel, so that each shard gets them in order with the data
  /// path's, and their replies come back here, to the handler below.
  RequestChannel& channel() { return channel_; }
  const ClientOptions& options() const { return options_; }
  /// Messages sent over channel() with a tag that has kControlTag set are
  /// answered to `handler` (the tag as sent, kControlTag cleared); null
  /// drops such replies with their verdict.
  static constexpr uint64_t kControlTag = uint64_t{1} << 63;
  void set_control_replies(RequestChannel::ReplyHandler handler) { control_replies_ = std::move(handler); }
  /// Empties the parameter cache: the reads that follow see the servers'
  /// rows (after a checkpoint's cut, after the barrier).
  void ClearCache() { cache_.Clear(); }
  /// The checkpoint at clock() was taken: empties the cache, and forgets a
  /// due checkpoint clock (due_checkpoint_clock()) it reached.
  void CheckpointTaken();
  /// Leaving the job (a prompt BYE or an ABORT follows): from now on pull
  /// replies still arriving are dropped, never written (the pulls' buffers
  /// may be gone with the model that owned them), and the channel's sends
  /// and close are bounded by `bound_ms` (RequestChannel::BeginLeaving).
  void BeginLeaving(int bound_ms);
  /// Consistency model AVERAGE: from now on PullRows, PullDense, PushRows
  /// and PushDense go to `replica` (worker/client/local_replica.h), which trains a
  /// local copy and reaches the servers through this client; Clock() first
  /// has the replica push its period's deltas (PUSH_DELTA) and sends its
  /// local update count with the CLOCK. PullRowsIfPresent always
  /// reads the servers.
  /// Owned by the client from here on (destroyed with it).
  void AttachReplica(std::unique_ptr<LocalReplica> replica);
  LocalReplica* replica() const { return replica_; }
  /// While paused (evaluation), reads go to the servers (the merged model of
  /// the rounds closed so far), not to the replica. Pushes must not happen.
  void set_replica_paused(bool paused) { replica_paused_ = paused; }

  /// The servers' side of this client, past an attached replica: what a
  /// LocalReplica fetches its period's rows from and pushes its deltas to
  /// (PUSH_DELTA: no version, no scaling, no cache refresh). The same
  /// paths PullRows / PullDense / PushRows / PushDense take without a
  /// replica; errors as theirs (a delta's are sticky). A view over the
  /// client, cheap to copy, valid while the client is.
  class ServerPath {
   public:
    RequestHandle PullRows(uint32_t table, const std::vector<uint64_t>& keys, float* out) {
      return c_->PullRowsFrom(table, keys, out, /*absent_as_zeros=*/false);
    }
    RequestHandle PullDense(uint32_t table, float* out) { return c_->PullDenseFrom(table, out); }
    RequestHandle PushRowDeltas(uint32_t table, const std::vector<uint64_t>& keys, const float* deltas) {
      return c_->PushRowsAs(PUSH_DELTA, table, keys, deltas);
    }
    RequestHandle PushDenseDelta(uint32_t table, const float* delta) {
      return c_->PushDenseAs(PUSH_DELTA, table, delta);
    }
    /// A request with nothing to wait for: completed, OK.
    RequestHandle Done() { return c_->DoneRequest(); }

   private:
    friend class WorkerClient;
    explicit ServerPath(WorkerClient* c) : c_(c) {}
    WorkerClient* c_;
  };
  ServerPath servers() { return ServerPath(this); }

  /// 16-bit pushes and their error-feedback residuals: a checkpoint saves
  /// them, a resume restores them (worker/train/checkpointer.h).
  const PushEncoder& push_encoder() const { return push_encoder_; }
  PushEncoder* mutable_push_encoder() { return &push_encoder_; }

  /// Counters (a snapshot, valid until the next call on this client).
  const ClientStats& stats() const;
  /// The pool of outgoing keys and push values frames (its counters say how
  /// often a buffer was reused instead of mapped).
  const FramePool& frame_pool() const { return channel_.frame_pool(); }

 private:
  // What one message to one shard needs to use its reply; a recycled record
  // (see NewShardRequest), so a warm worker allocates none per minibatch.
  struct ShardRequest {
    MessageType expect = MSG_UNKNOWN;
    int shard = 0;
    uint32_t table = 0;
    float* out = nullptr;       // pull destination (base)
    uint32_t dim = 0;
    bool dense = false;
    uint64_t dense_begin = 0;   // dense pulls: offset of the shard's slice
    std::vector<uint32_t> positions;  // row pulls: destination row per key (unless identity)
    bool identity = false;      // row pulls: row i lands at first_position + i (positions unused)
    uint32_t first_position = 0;
    size_t num_rows = 0;        // row pulls: rows the reply must carry
    std::vector<uint64_t> keys;       // row pulls/pushes whose rows go into the cache
    bool want_values = false;   // pushes: refresh_on_push (the cache counts it pending)
    uint64_t updates = 0;       // pushes: rows (dense: 1), for the update counters
    // A message that named a key list and left its keys out: the list (its
    // keys), and for a push its values and version, to send it again with
    // its keys if the shard does not hold the list (ResendWithKeys).
    uint64_t key_list = 0;
    KeyListCache::List list_keys;
    zmq::message_t resend_values;
    uint64_t push_version = 0;
    int64_t stamp_clock = -1;   // pulls read ahead (PullRowsAt): the clock stamped, kept for a resend
    bool ahead = false;         // pulls: part of the table's read ahead (its versions)
  };

  explicit WorkerClient(const ClientOptions& options);
  // The server paths of PullDense / PushRows / PushDense (`type` PUSH, or
  // PUSH_DELTA for a replica's deltas: no cache refresh, no version).
  RequestHandle PullDenseFrom(uint32_t table, float* out);
  // `in_rows`: PushRowsAt's (null: row i at values + i·dim).
  // `shared`: PushRows(PushValues)'s buffer (values == shared->data()),
  // sent by reference where a message's rows are one block of it.
  RequestHandle PushRowsAs(MessageType type, uint32_t table, const std::vector<uint64_t>& keys, const float* values,
                           const uint32_t* in_rows = nullptr, const PushValues* shared = nullptr);
  RequestHandle PushDenseAs(MessageType type, uint32_t table, const float* values);
  // A request with nothing to wait for: completed, OK.
  RequestHandle DoneRequest() { return channel_.NewRequest(/*sticky=*/false); }
  // A cleared record for a message to `shard`; returns its tag.
  uint64_t NewShardRequest(MessageType expect, int shard, uint32_t table);
  // Sends `m` as part of `request` with record `tag`; a failed send frees the
  // record (and accounts a lost push).
  void SendPart(int shard, Message* m, const RequestHandle& request, uint64_t tag, int64_t stamp_clock = -1);
  // Gives record `tag` back, dropping what it holds for a resend.
  void Release(uint64_t tag);
  // The keys of a row message: ks[0..n) into m->keys or, when shard s holds
  // the list (key_lists_), none and the list's id (record `tag` keeps the
  // list for a resend); a new list is named and sent with its keys.
  // Returns the list named (it holds ks[0..n) themselves, compared), or
  // null when the keys went plainly.
  KeyListCache::List SetRequestKeys(int s, uint32_t table, const uint64_t* ks, size_t n, Message* m, uint64_t tag);
  // The shard did not hold the list record `tag` named: sends the request
  // again with its keys, as another part of the same request and record.
  Status ResendWithKeys(uint64_t tag);
  // The channel's ReplyHandler.
  Status OnReply(uint64_t tag, const Status& verdict, Message* reply);
  Status OnPullReply(const ShardRequest& r, Message* reply);
  // Where the values of request `tag`'s pull reply go in the caller's
  // buffer (RequestChannel::ValuesPlacer): a dense slice, or rows that land
  // in reply order; null for rows scattered by position or a reply of the
  // wrong size (joined, then checked and refused by OnPullReply).
  char* PullDestination(uint64_t tag, const MessageHeader& h, uint64_t bytes);
  // HELLO_REPLY `h` to request `r`: the shard it names, the clock to start
  // at, the key-list capacity it grants.
  Status OnHelloReply(const ShardRequest& r, const HelloReplyBody& h);
  // A new pull request of `table`: waits for the table's own pushes when
  // they carry rows back, and begins a read (read versions).
  RequestHandle StartPull(uint32_t table, bool ahead = false);
  // refresh_on_push tables: waits for the table's push replies, which carry
  // the rows with the worker's own updates, before the cache is consulted.
  Status AwaitOwnPushes(uint32_t table);
  void NoteLostPush(int shard, const Message& m, uint64_t updates, const Status& why);
  // Keys of row table `table` per message: within max_message_bytes, and at
  // most the table's budget.max_rows (the rows a shard may hold of it).
  size_t RowsPerMessage(uint32_t table) const;
  // Calls piece(shard, c0, c1, ks) for each message of a row request: keys
  // [c0, c1) of each shard's keys (ks points at key c0), at most
  // RowsPerMessage(table) per message. `whole`: one shard, `keys` unsplit;
  // otherwise split_keys_/split_pos_ hold the split.
  // PullRows and PullRowsIfPresent: one path; `absent_as_zeros` sets the
  // header flag and bypasses the cache.
  // `out_rows` and `read_clock`: PullRowsAt's (null and −1: PullRows').
  RequestHandle PullRowsFrom(uint32_t table, const std::vector<uint64_t>& keys, float* out, bool absent_as_zeros,
                             const uint32_t* out_rows = nullptr, int64_t read_clock = -1);
  template <typename Piece>
  void ForEachRowMessage(const std::vector<uint64_t>& keys, bool whole, uint32_t table, Piece&& piece);
  // SetPushScaling on a PUSH whose values frame holds the gradients
  // (`values_scaled`: a 16-bit frame, scaled as it was encoded).
  void ScalePush(Message* m, bool values_scaled = false) const;
  // Sets m->values to a row push's values: rows [c0, c1) of shard s's
  // part (see PushRowsAs), copied, gathered or narrowed. A narrowed frame
  // larger than one chunk is written while it is sent (m->write_values):
  // the writer returned must live until the message was sent, then
  // Finish(); null otherwise. `list`: SetRequestKeys' list for ks, or null.
  std::unique_ptr<PushRowWriter> SetPushRowValues(Message* m, uint32_t table, int s, size_t c0, size_t c1,
                                                  const uint64_t* ks, bool whole, const float* grads,
                                                  const uint32_t* in_rows, const PushValues* shared, bool delta,
                                                  const KeyListCache::List& list);

  ClientOptions options_;
  int num_shards_;
  RequestChannel channel_;
  ParamCache cache_;
  PushEncoder push_encoder_;  // 16-bit pushes and their residuals
  SlotPool<ShardRequest> requests_;  // tag → record
  mutable ClientStats stats_;  // the channel's counters are merged in by stats()
  double own_wait_seconds_ = 0;  // AwaitOwnPushes
  std::vector<std::vector<uint64_t>> split_keys_;
  std::vector<std::vector<uint32_t>> split_pos_;
  std::vector<uint64_t> fetch_keys_;  // cache misses of a row pull, and their positions
  std::vector<uint32_t> fetch_pos_;
  std::vector<float> scratch_;
  std::vector<float> at_scratch_;  // PullRowsAt: cache hits before they go to their rows
  std::vector<uint32_t> at_rows_;  // PushRowsAt: a message's rows in the caller's buffer
  std::vector<KeyListCache> key_lists_;  // per shard: the lists it holds (capacity from HELLO_REPLY)
  KeyListCache::List fixed_keys_;        // the FixedKeys of the call in progress (SetRequestKeys)
  RequestHandle clock_reply_;              // shard 0's answer to the last CLOCK
  int64_t due_checkpoint_clock_ = -1;      // from CLOCK_REPLY
  int64_t rejoin_clock_ = -1;              // from HELLO_REPLY (rejoin_clock)
  uint64_t rejoin_samples_ = 0;            // from shard 0's HELLO_REPLY (rejoin_samples)
  uint64_t samples_trained_ = 0;           // sent with each CLOCK to shard 0
  std::optional<AdaptiveBatchClock> adaptive_report_;  // for the next CLOCK to shard 0
  int adaptive_batch_size_ = 0;            // from CLOCK_REPLY
  float gradient_scale_ = 1.0f;            // SetPushScaling
  float push_weight_ = 1.0f;
  RequestChannel::ReplyHandler control_replies_;  // JobSession's (set_control_replies)
  bool leaving_ = false;                   // BeginLeaving was called: pull replies are dropped
  std::vector<bool> hello_refused_;        // by shard: it refused this worker's HELLO (Connect)
  std::string hello_refusal_;              // the first refusal's text (Connect)
  std::unique_ptr<LocalReplica> owned_replica_;  // AVERAGE: the local replica (AttachReplica)
  LocalReplica* replica_ = nullptr;
  bool replica_paused_ = false;
};

}  // namespace tether
