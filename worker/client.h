// WorkerClient: a worker's connection to every server shard (one DEALER
// socket per shard), with ps-lite style asynchronous Push/Pull: each call
// returns a timestamp at once and Wait(ts) blocks until every shard touched
// by that call has answered (Li et al., OSDI 2014).
//
// Keys passed to PullRows/PushRows must be sorted and unique; the client
// splits them by owner shard and scatters replies back into the caller's
// buffer. Buffers passed to Pull*/Push* must stay alive and unmodified until
// the matching Wait (pushes copy their values at call time, so push buffers
// may be reused at once).
//
// Ordering: requests from one worker to one shard are delivered in order, so
// a pull issued after a push from the same worker sees that push
// (read-my-writes), and a CLOCK arrives after the pushes of its clock.
//
// Cache (the SSP table of Petuum Bösen, Ho et al. NIPS 2013; Wei et al.
// SoCC 2015): for tables with a bound s ≥ 0 and consistency.cache on, every
// row the worker receives is kept with r, the shard's min clock when the row
// was read there. A read at clock c is served from the cache while r ≥ c − s,
// which is exactly the SSP guarantee, and fetched again otherwise. With
// consistency.refresh_on_push, pushes ask for the updated rows back so the
// cache holds the worker's own writes; otherwise a push evicts its rows. A
// row with a push still in flight is always fetched from the server, which
// has applied the push by then (read-my-writes). ASP tables are never cached.
//
// Versions: every pull reply carries the table's version on the shard; each
// push carries the oldest version among the rows of that shard the caller
// last read, so the server can measure the push's staleness τ.
//
// Not thread-safe: one client per worker thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <zmq.hpp>

#include "core/config.h"
#include "core/net/frame_pool.h"
#include "core/net/message.h"
#include "core/status.h"

namespace tether {

struct ClientOptions {
  int rank = 0;
  int heartbeat_interval_ms = 1000;  // heartbeat while blocked longer than this
  std::vector<std::string> servers;  // endpoint per shard, in shard order
  int64_t staleness = 0;             // must equal the servers' bound
  std::string model_fingerprint;     // must equal the servers'
  int request_timeout_ms = 120000;   // Wait fails after this long with no reply
  int max_outstanding = 64;          // in-flight requests per shard before a call blocks
                                     // (kept ≤ send_hwm and ≤ recv_hwm; see Send)
  int send_hwm = 1000;               // ZeroMQ high-water marks of the sockets, in
  int recv_hwm = 1000;               // messages (cluster.send_hwm / recv_hwm)
  /// Row pulls and pushes whose values would exceed this many bytes in one
  /// message are split into several messages per shard (and joined again);
  /// at most kMaxFrameBytes. Dense slices are checked at set-up instead
  /// (ValidateJobConfig).
  uint64_t max_message_bytes = kMaxFrameBytes;
  std::vector<TableSpec> tables;
  /// ZeroMQ context for the sockets, or null for one of the client's own.
  /// Must be the servers' context for `inproc://` endpoints (one-process
  /// jobs, see tools/worker_main.cc --in_process), and outlive the client.
  zmq::context_t* context = nullptr;
  /// When set (by another thread), every wait of this client gives up within
  /// a heartbeat interval with Unavailable ("aborted"): one-process jobs set
  /// it when another worker failed, so no one waits for a peer that is gone.
  const std::atomic<bool>* abort = nullptr;
  /// Push values and request keys of at least kMinPooledFrameBytes are
  /// built in recycled, pre-faulted buffers that ZeroMQ sends zero-copy
  /// (core/net/frame_pool.h); at most this many bytes of them are kept idle
  /// between requests. 0 maps a fresh buffer per message.
  uint64_t frame_pool_idle_bytes = kDefaultFramePoolIdleBytes;
};

/// Per-client counters.
struct ClientStats {
  uint64_t pulls = 0, pushes = 0;        // messages to servers
  uint64_t rows_pulled = 0, rows_pushed = 0;  // rows on the wire
  uint64_t rows_read = 0;                // rows handed to the caller by PullRows
  uint64_t cache_hits = 0;               // of rows_read, served from the cache
  uint64_t bytes_sent = 0, bytes_received = 0;
  double wait_seconds = 0;  // time blocked in Wait (includes staleness waits)
  // Updates: rows of pushes (a dense slice counts 1), as the servers'
  // ServerStats::updates_applied counts them. Once every push is answered,
  // the sum of updates_applied over the shards equals updates_sent.
  uint64_t updates_sent = 0;    // handed to a socket
  uint64_t updates_failed = 0;  // could not be sent, or refused by the server (logged as errors)
  uint64_t send_waits = 0;      // sends that waited for room in the in-flight window (back-pressure)
};

class WorkerClient {
 public:
  /// Connects to every shard and exchanges HELLO (which checks staleness and
  /// model settings). Errors: InvalidArgument (bad endpoint),
  /// FailedPrecondition (a server refused to pair, naming both values),
  /// DeadlineExceeded (a server did not answer within request_timeout_ms).
  static StatusOr<std::unique_ptr<WorkerClient>> Connect(const ClientOptions& options);
  ~WorkerClient();

  /// Pulls rows of `keys` (sorted, unique) of row table `table` into `out`
  /// (keys.size() × dim floats, row i ↔ keys[i]). Returns a timestamp.
  int64_t PullRows(uint32_t table, const std::vector<uint64_t>& keys, float* out);
  /// Pushes gradients `grads` (keys.size() × dim) for `keys` (sorted, unique).
  int64_t PushRows(uint32_t table, const std::vector<uint64_t>& keys, const float* grads);
  /// Pulls a whole dense table into `out` (size floats).
  int64_t PullDense(uint32_t table, float* out);
  /// Pushes a gradient for a whole dense table (size floats).
  int64_t PushDense(uint32_t table, const float* grad);

  /// Blocks until request `ts` completed. Errors: the server's ERROR_REPLY
  /// text, DeadlineExceeded naming the silent shard, or an earlier push's
  /// failure (push errors are sticky and surface at the next Wait).
  Status Wait(int64_t ts);
  /// Like Wait(ts) but gives up after `timeout_ms` with DeadlineExceeded,
  /// leaving the request outstanding (c10d's Work::wait(timeout)).
  Status Wait(int64_t ts, int timeout_ms);
  /// Waits for every outstanding request.
  Status WaitAll();

  /// Completes the current clock: sends CLOCK to every shard (after the
  /// clock's pushes, so the server applies them first). Errors as Wait.
  Status Clock();
  /// Completed clocks. A worker rejoining a running job starts at the clock
  /// the servers assign (the slowest live worker's), not 0.
  int64_t clock() const { return clock_; }

  /// Sleeps `ms` milliseconds while keeping the worker alive (heartbeats) and
  /// processing replies; used to simulate a straggler (--slowdown).
  Status Idle(int ms);

  /// Asks every shard for its counters (STATS), one shard at a time after
  /// every outstanding request: one ShardStats per shard, in shard order,
  /// each with the WorkerStats every worker sent at its Barrier. Errors as
  /// Wait.
  StatusOr<std::vector<ShardStats>> FetchServerStats();

  /// Says this worker finished training (it stops counting towards the
  /// servers' min clock) and blocks until every worker has. `samples`: rows
  /// this worker trained on; `stats`: its counters, which every shard keeps
  /// for FetchServerStats. Returns the total samples over all workers.
  /// Errors as Wait.
  StatusOr<uint64_t> Barrier(uint64_t samples, const WorkerStats& stats);

  /// Leaves the job: waits for outstanding requests, then BYE to every shard.
  Status Bye();

  const ClientStats& stats() const { return stats_; }
  /// The pool of outgoing keys and push values frames (its counters say how
  /// often a buffer was reused instead of mapped).
  const FramePool& frame_pool() const { return frame_pool_; }

 private:
  struct Group {
    int remaining = 0;
    bool detached = false;  // nobody will Wait: erase when complete
    Status status;
    uint64_t samples = 0;
  };
  struct Sub {
    int64_t ts = 0;
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
    std::vector<uint64_t> keys;       // row pulls/pushes to be cached
    MessageType expect = MSG_UNKNOWN;
    uint64_t updates = 0;       // pushes: rows (dense: 1), for the update counters
  };
  struct CachedRow {
    std::vector<float> values;
    int64_t row_clock = 0;   // shard's min clock when the values were read
    uint64_t version = 0;    // table version on the shard then
    int pending_pushes = 0;  // pushes of this row not yet answered
  };
  struct TableCache {
    bool enabled = false;
    bool refresh_on_push = true;
    int pushes_in_flight = 0;  // refresh_on_push: push messages not yet answered
    std::unordered_map<uint64_t, CachedRow> rows;   // row tables
    std::vector<CachedRow> dense;                  // dense tables: one per shard
    std::vector<uint64_t> read_version;            // per shard: oldest version last read
  };

  explicit WorkerClient(const ClientOptions& options);
  int64_t NewGroup(bool detached);
  void Send(int shard, Message* m, Sub sub);
  Status Progress(int timeout_ms);  // receive and dispatch what has arrived
  void Store(uint32_t table, int shard, const uint64_t* keys, size_t n, const float* values, int64_t row_clock,
             uint64_t version);
  bool Fresh(const CachedRow& row, int64_t staleness) const;
  void SendHeartbeats();
  // refresh_on_push tables: waits for the table's push replies, which carry
  // the rows with the worker's own updates, before the cache is consulted.
  Status AwaitOwnPushes(uint32_t table);
  uint64_t PushVersion(uint32_t table, int shard) const;
  void Complete(uint64_t request_id, Message* reply);
  void Fail(int64_t ts, const Status& st);
  void NoteLostPush(int shard, const Message& m, uint64_t updates, const Status& why);
  size_t RowsPerMessage(uint32_t dim) const;  // row-table keys per message (size limit)

  ClientOptions options_;
  int num_shards_;
  std::string log_prefix_;
  std::unique_ptr<zmq::context_t> own_ctx_;  // when options.context is null
  zmq::context_t* ctx_;
  std::vector<zmq::socket_t> sockets_;
  // Outgoing keys and push values frames; frames ZeroMQ has not sent yet
  // when the client goes keep the pool's buffers alive on their own.
  FramePool frame_pool_;
  std::vector<int> outstanding_;
  int64_t clock_ = 0;
  int64_t next_ts_ = 1;
  uint64_t next_request_ = 1;
  std::unordered_map<int64_t, Group> groups_;
  std::unordered_map<uint64_t, Sub> subs_;
  Status sticky_error_;
  ClientStats stats_;
  std::vector<std::vector<uint64_t>> split_keys_;
  std::vector<std::vector<uint32_t>> split_pos_;
  std::vector<float> scratch_;
  std::vector<TableCache> caches_;
  std::chrono::steady_clock::time_point last_send_;
  ShardStats* stats_sink_ = nullptr;  // STATS_REPLY destination during FetchServerStats
};

}  // namespace tether
