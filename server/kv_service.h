// KvService: the shard's key-value service. It holds the shard's part of
// every table (from worker 0's HELLO: DefineTables) and answers the data
// path: PULL (now, or parked until the staleness bound admits it: deferred
// pulls), PUSH (applied with the table's optimizer, scaled by the push's
// staleness τ: Zhang et al., IJCAI 2016, and with optimizer
// .delay_compensation corrected for the values the sender read: Zheng et
// al., ICML 2017, server/delay_backups.h), PUSH_DELTA (consistency AVERAGE:
// server/model_average.h merges each round's deltas into the tables once
// every counted worker ended it), and key lists (a request that names a
// list the worker defined earlier carries no keys: core/net/key_list_cache.h).
//
// Requests reach it checked (server/request_check.h): a known table, keys
// sorted, unique and this shard's, values finite, the sender the rank's own
// connection. The data path allocates nothing per row: reply values frames
// come from a pool of pre-faulted buffers (core/net/frame_pool.h), keys and
// values are read in place (copied only when a frame is unaligned), and a
// key list's rows are looked up once.
//
// Ownership: the shard owns it; the clock tracker, the counters and the
// Outbox it is given are the shard's and outlive it. Reply frames still
// queued in ZeroMQ when it is destroyed keep the pool's state alive until
// they are sent or dropped. Thread-safety: none (Run()'s thread).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/net/frame_pool.h"
#include "core/net/key_list_cache.h"
#include "core/net/message.h"
#include "core/status.h"
#include "proto/shard_state.pb.h"
#include "proto/stats.pb.h"
#include "proto/tables.pb.h"
#include "proto/wire.pb.h"
#include "server/clock_tracker.h"
#include "server/model_average.h"
#include "core/net/outbox.h"
#include "server/shard_stats.h"
#include "server/state_bytes.h"
#include "server/table.h"

namespace tether {

class KvService {
 public:
  /// Key-list counters over all workers so far: lists defined (kept),
  /// requests served from a kept list, uses answered key_list_unknown.
  struct KeyListStats {
    uint64_t defined = 0, used = 0, unknown = 0;
    uint64_t bytes_saved = 0;  // 8 × keys of the requests in `used`
  };

  /// Shard `shard` of `num_shards`; `clocks` says which pulls are ready.
  KvService(int shard, int num_shards, const ClockTracker* clocks, ServerStats* stats, Outbox* outbox);

  // ---- Tables.
  /// The job's tables as worker 0 declared them (validated): this shard's
  /// part of each, empty. Under consistency AVERAGE the tables take merged
  /// deltas as they are (SUM) and a ModelAverager merges the rounds.
  void DefineTables(const google::protobuf::RepeatedPtrField<TableSpec>& specs);
  bool defined() const { return !tables_.empty(); }
  const google::protobuf::RepeatedPtrField<TableSpec>& job_tables() const { return job_tables_; }
  /// This shard's tables, by table id (a checkpoint writes and restores them).
  std::vector<std::unique_ptr<ServerTable>>& tables() { return tables_; }
  const std::vector<std::unique_ptr<ServerTable>>& tables() const { return tables_; }

  // ---- Requests (checked).
  /// PULL: answered now when the table's bound admits its clock, else
  /// parked until ServeReadyPulls admits it. A key list is resolved on
  /// arrival, also for a pull that then waits.
  void Pull(const std::string& identity, Message* m);
  /// PUSH: applied and answered (PUSH_REPLY, with the rows as they are now
  /// when it asks: want_values), or refused with ERROR_REPLY (nothing
  /// applied; counted as a bad message).
  void Push(const std::string& identity, const Message& m);
  /// PUSH_DELTA (AVERAGE): joins the sender's pending delta of its round.
  void PushDelta(const std::string& identity, const Message& m);
  /// AVERAGE: `rank`'s CLOCK ending round clock − 1 with `updates` pushed
  /// (its weight in the merge). No-op for other jobs.
  void RoundEnded(int rank, int64_t clock, uint64_t updates);
  /// The min clock advanced: merges the AVERAGE rounds it closes, then
  /// answers every parked pull it admits, in arrival order.
  void ServeReadyPulls();

  // ---- Membership.
  /// `rank` (re)joined: its key lists start empty with `key_list_bytes`
  /// of room, its bound wait at 0; a rejoining rank's pending delta is
  /// dropped (its new process ends no old round).
  void WorkerJoined(int rank, bool rejoined, uint64_t key_list_bytes);
  /// `rank` at `identity` said BYE: its key lists, parked pulls and pending
  /// delta go (nobody is there to take the replies).
  void WorkerLeft(int rank, const std::string& identity);
  /// `rank` was removed for silence: its pending delta goes.
  void WorkerRemoved(int rank);

  /// Every parked pull gets an ERROR_REPLY with `why` (as it is). Returns
  /// how many.
  int FailWaiting(const std::string& why);
  /// Set when a merged AVERAGE round made a step that is not finite: the
  /// job cannot go on (Run() ends with it).
  const Status& fatal() const { return fatal_; }

  // ---- Counters.
  /// Seconds `rank`'s pulls waited on the staleness bound here (pulls of
  /// one minibatch waiting side by side count once).
  double bound_wait_s(int rank) const;
  const KeyListStats& key_list_stats() const { return key_list_stats_; }
  /// `rank`'s kept key lists (null before its HELLO).
  const KeyListCache* key_lists(int rank) const;
  const FramePool& reply_pool() const { return reply_pool_; }
  /// The same pool, for frames widened on receipt (WidenValues).
  FramePool* frame_pool() { return &reply_pool_; }
  /// Sets table_rows, rows_admitted, rows_evicted, rows_not_admitted,
  /// resident_bytes, key_lists and (AVERAGE) average of `stats`.
  void FillStats(ShardStats* stats) const;
  /// The exit lines: rows held, key lists, reply frames.
  void LogExit() const;

  // ---- Shard state (server/kv_service_state.cc), for a replica that joins
  // a running shard (proto/shard_state.proto KvServiceState).
  /// Ranks a state may name (cluster.max_workers' ceiling).
  static constexpr int kMaxRanks = 1 << 16;
  /// Writes the job's tables, every table's counters and shape, the parked
  /// pulls (EncodeShardInput bytes, their ages before `now`), the bound
  /// waits, each rank's key lists (least recently used first) and their
  /// counters, the AVERAGE merge and a fatal merge error into *state;
  /// table_rows gets one string per table (table id order) with the
  /// table's large parts: rows, index slots, backups, eviction metadata,
  /// sketch, key lists' and parked pulls' row offsets, AVERAGE sums
  /// (layout: proto/shard_state.proto). Not carried: the reply frame
  /// pool (buffers and their counters) and scratch space.
  void SaveState(KvServiceState* state, std::vector<std::string>* table_rows,
                 std::chrono::steady_clock::time_point now) const;
  /// On a fresh KvService (constructed as the sender's, no tables yet):
  /// defines the tables from the saved specs (DefineTables) and takes the
  /// state back, bit for bit; times become `now` − their ages. Errors:
  /// DataLoss naming the table and the field ("shard state: kv.tables[1]
  /// (w): rows: ...") for anything that does not fit (a string of the
  /// wrong length, a count past its bytes or the row limit, a rank past
  /// kMaxRanks, a key list's offsets outside its table, ...); the service
  /// is then unusable (the caller throws it away).
  Status RestoreState(const KvServiceState& state, std::vector<std::string> table_rows,
                      std::chrono::steady_clock::time_point now);

 private:
  struct ParkedPull {
    std::string identity;
    Message request;
    std::chrono::steady_clock::time_point since;  // when it started waiting
    KeyListCache::List offsets;  // a pull naming a key list: its rows (kept alive past an eviction)
  };
  struct BoundWait {
    double seconds = 0;
    std::chrono::steady_clock::time_point counted_until;  // `seconds` covers up to here
  };

  // `offsets`: the rows of the pull's key list (ResolveKeyList), or null.
  void ServePull(const std::string& identity, const Message& m, const std::vector<uint64_t>* offsets);
  void ApplyPush(const std::string& identity, const Message& m, const std::vector<uint64_t>* offsets);
  // A row table's push stepped from the pieces the inbox kept
  // (Message::value_pieces) or from the values frame.
  Status StepRows(ServerTable& t, const Message& m, const uint64_t* keys, const std::vector<uint64_t>* offsets,
                  float lr_scale);
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
  // A float32 PULL reply larger than one chunk (kReplyChunkBytes) to an
  // Outbox that writes values while it sends (a shard's socket to a worker
  // of protocol 9 or later): its frame is taken and the rows' lookups made
  // now, their copy set as reply->write_values, so that the shard copies
  // chunk i + 1 while ZeroMQ sends chunk i. *deferred: it did so (else
  // FillValues fills the reply). Not for 16-bit, budgeted or
  // delay-compensated tables. Errors: as FillValues.
  Status FillWhileSent(ServerTable& t, const uint64_t* keys, uint64_t n, const std::vector<uint64_t>* offsets,
                       Message* reply, bool* deferred);
  Status FillValues(ServerTable& t, const uint64_t* keys, uint64_t n, Message* reply,
                    const std::vector<uint64_t>* offsets = nullptr);
  // FillValues for a PULL with absent_as_zeros (row tables): absent keys
  // come back as zeros and are not created.
  void FillValuesIfPresent(const ServerTable& t, const uint64_t* keys, uint64_t n, Message* reply);
  // Delay compensation: worker `rank` was just sent the current values of
  // the rows FillValues filled (keys, or resolved `offsets`; a dense
  // table's slice), which become its backups (ServerTable::NoteRead).
  void NoteSent(ServerTable& t, int rank, const uint64_t* keys, uint64_t n, const std::vector<uint64_t>* offsets);
  // Where n float32 values of a reply go: its values frame (FP32), or,
  // with a 16-bit pull_wire, pull_scratch_, which NarrowReply then narrows
  // into the frame (TableSpec.pull_wire, core/net/value_frames.h).
  float* ValuesOut(const ServerTable& t, uint64_t n, Message* reply);
  void NarrowReply(const ServerTable& t, Message* reply);
  // FillValues of a 16-bit row table whose rows are at least
  // kMinNarrowedRowFloats wide: n rows at `offsets` narrowed straight from
  // the table into the reply's frame (no pull_scratch_ pass). Narrower rows
  // are gathered first: a call per short row would cost more than the pass.
  static constexpr uint32_t kMinNarrowedRowFloats = 16;
  void NarrowRows(const ServerTable& t, const uint64_t* offsets, uint64_t n, Message* reply);
  // FillValues of a 16-bit dense table: its slice narrowed straight from
  // the table into the reply's frame.
  void NarrowDense(const ServerTable& t, Message* reply);
  // The Narrow* calls: `saturated` values of the reply's frame were clamped
  // to the encoding's largest finite value; said in its header when > 0.
  static void SetSaturated(uint64_t saturated, Message* reply);
  void MergeAverageRounds();
  void DropAverageDeltas(int rank, const char* why);
  // RestoreState's parts (kv_service_state.cc); `in`: a reader per table.
  Status CheckJobTables(const KvServiceState& state) const;
  Status RestoreKeyLists(const KvServiceState& state, std::vector<StateReader>* in);
  Status RestoreParked(const KvServiceState& state, std::vector<StateReader>* in,
                       std::chrono::steady_clock::time_point now);
  Status RestoreBoundWaits(const KvServiceState& state, std::chrono::steady_clock::time_point now);
  // Reads n row offsets of table `table` (a row table whose rows do not
  // move) and checks them; `what` names them in an error.
  Status ReadRows(uint32_t table, uint64_t n, const std::string& what, std::vector<StateReader>* in,
                  KeyListCache::List* rows) const;
  // Refuses `m` with `what` (logged, counted as a bad message).
  void Refuse(const std::string& identity, const MessageHeader& h, const std::string& what);

  int shard_, num_shards_;
  const ClockTracker* clocks_;
  ServerStats* stats_;
  Outbox* outbox_;
  // The job's tables as worker 0 declared them, and the shard's part of
  // each; empty until worker 0's HELLO.
  google::protobuf::RepeatedPtrField<TableSpec> job_tables_;
  std::vector<std::unique_ptr<ServerTable>> tables_;
  std::unique_ptr<ModelAverager> averager_;  // AVERAGE jobs only
  std::deque<ParkedPull> parked_;
  std::vector<BoundWait> bound_wait_;  // by rank
  // Key lists kept per rank (reset at its HELLO, dropped at its BYE). They
  // hold row offsets, valid because a row never moves while its table
  // lives (server/table.h): anything that moves or drops rows of a live
  // shard must clear key_lists_.
  std::map<int, KeyListCache> key_lists_;
  KeyListStats key_list_stats_;
  // Reply values frames. Frames still queued in ZeroMQ when the shard is
  // destroyed keep the pool's state alive until they are sent or dropped.
  FramePool reply_pool_;
  Status fatal_;
  std::vector<uint64_t> key_scratch_;
  std::vector<float> value_scratch_;
  std::vector<ServerTable::GradientSpan> spans_;
  std::vector<float> pull_scratch_;  // a 16-bit reply's values before they are narrowed
};

}  // namespace tether
