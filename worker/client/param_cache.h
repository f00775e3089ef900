// ParamCache: a worker's SSP parameter cache (the process cache of Petuum
// Bösen's SSP table; Ho et al., NIPS 2013; Wei et al., SoCC 2015), and the
// read versions that tag its pushes. A pure class: no sockets, no clocks of
// its own, no time; WorkerClient (worker/client/client.h) feeds it what it sends
// and receives, and asks it what a read may take from memory.
//
// Rows. For a table with a bound s ≥ 0 and consistency.cache on, every row
// the worker receives is kept with r, its row clock: the shard's min clock
// when the row was read there, and the table's version on the shard then.
// Freshness: a read at clock c may use a kept row while r ≥ c − s (so the
// row holds every update of clocks ≤ c − s − 1: exactly the SSP guarantee)
// and no push of that row is in flight; otherwise the row is fetched again.
// A dense table is kept as one slice per shard, with the same rule. ASP
// tables (s < 0) and tables with cache off keep nothing.
//
// Pushes. With consistency.refresh_on_push a push asks for the updated rows
// back (want_values): from the push until its reply the rows count a pending
// push and are never fresh, and the reply's values (the server's rows with
// this worker's update applied) replace them: read-my-writes from memory.
// Without it, a push evicts its rows, so the next read goes to the server,
// which has applied the push by then (one worker → one shard is in order).
//
// Read versions (for the server's staleness τ, Zhang et al. IJCAI 2016):
// StartRead() begins a read of a table; every row or slice served from
// memory and every pull reply lowers the table's read version of that shard
// to the version it carried. A push to that shard carries PushVersion(): the
// oldest version among what the caller last read there (0 when nothing).
// Tracked for every table, cached or not. A read ahead (StartReadAhead: a
// pipelined worker reading its next minibatch while the current one still
// pushes) lowers versions of its own, which become the read's at
// UseReadAhead; until then pushes carry the current read's.
//
// Memory. Every kept row or dense slice is charged its values' bytes plus
// kEntryOverheadBytes of bookkeeping (hash-map node, LRU link, allocator
// headers); bytes() is the sum. With capacity_bytes = 0 (unbounded) nothing
// is evicted except by pushes. With a capacity, bytes() never exceeds it:
// keeping an entry first evicts the least recently used entries of any
// table (rows and dense slices alike) until it fits, and an entry larger
// than the whole capacity is not kept at all. "Used" is kept or served by a
// read. Why LRU rather than oldest row clock first: rows are kept in the
// order they are read, so the LRU tail is also where the oldest row clocks
// are, while a row read every minibatch (an output layer, a frequent
// feature) stays at the head whatever its clock; LRU costs O(1) per touch
// and needs no knowledge of the worker's clock.
//
// Eviction never breaks the rules above: an evicted row is fetched again
// from its shard, which answers under the same SSP bound; reads copy hits
// into the caller's buffer at once, so evicting a row afterwards (say while
// the same minibatch's misses are kept) takes nothing from that read; and
// a row with a push in flight is never fresh, so evicting its values takes
// nothing a read could use, while its pending count stays until the push is
// answered (read-my-writes: the push's reply, or the server, supplies the
// row). An entry left with a pending count and no values is not charged:
// there is one per row of a push in flight, bounded by the in-flight
// window, and none is left once the table's pushes are answered (every pull
// of a refresh_on_push table waits for that first).
//
// Thread-safety: not thread-safe; owned by one WorkerClient.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <unordered_map>
#include <vector>

#include "core/memory_fit.h"

namespace tether {

class ParamCache {
 public:
  /// How one table is cached; indexed by table id.
  struct TableOptions {
    bool dense = false;         // dense table (else row table)
    uint32_t dim = 1;           // row tables: floats per row
    uint64_t size = 0;          // dense tables: floats in all (split by DenseRange)
    int64_t staleness = 0;      // the table's bound s; < 0 is ASP
    bool cache = true;          // consistency.cache
    bool refresh_on_push = true;  // consistency.refresh_on_push
  };

  /// Bookkeeping bytes charged per kept row or dense slice on top of its
  /// values (an estimate of the hash-map node, LRU link and heap headers).
  static constexpr uint64_t kEntryOverheadBytes = kCacheEntryOverheadBytes;

  /// What the cache did so far (counters since construction; Clear() keeps
  /// them).
  struct Stats {
    uint64_t evictions = 0;       // entries dropped to make room (capacity only; not pushes)
    uint64_t evicted_bytes = 0;   // their charged bytes
    uint64_t not_kept = 0;        // entries larger than the whole capacity, never kept
    uint64_t peak_bytes = 0;      // largest bytes() so far
  };

  /// `num_shards` ≥ 1. A table caches when `cache` is on and s ≥ 0.
  /// `capacity_bytes`: the most bytes() may reach, over all tables; 0 =
  /// unbounded.
  ParamCache(std::vector<TableOptions> tables, int num_shards, uint64_t capacity_bytes = 0);

  /// Whether `table` keeps rows at all.
  bool enabled(uint32_t table) const { return tables_[table].enabled; }
  /// Whether pushes to `table` ask for their rows back (cached tables only).
  bool refresh_on_push(uint32_t table) const {
    return tables_[table].enabled && tables_[table].options.refresh_on_push;
  }
  /// refresh_on_push tables: push messages whose reply has not arrived.
  int pushes_in_flight(uint32_t table) const { return tables_[table].pushes_in_flight; }
  /// Row tables: keys held (fresh or not, including rows with a pending push).
  size_t num_rows(uint32_t table) const { return tables_[table].rows.size(); }
  /// Bytes charged for what is kept now (values + kEntryOverheadBytes per
  /// row or slice), all tables; ≤ capacity_bytes() when that is not 0.
  uint64_t bytes() const { return bytes_; }
  /// The capacity given at construction (0: unbounded).
  uint64_t capacity_bytes() const { return capacity_bytes_; }
  const Stats& stats() const { return stats_; }

  // ---- reads

  /// A new read of `table` begins: forgets its read versions.
  void StartRead(uint32_t table);
  /// Reads ahead (a pipelined worker reading its next minibatch before the
  /// current one pushed): StartReadAhead begins the next read, whose
  /// versions ReadRows / NoteReadVersion with `ahead` lower, apart from the
  /// current read's, which the current pushes still carry; UseReadAhead
  /// makes it the current read (its versions are what PushVersion gives).
  void StartReadAhead(uint32_t table);
  void UseReadAhead(uint32_t table);
  /// Serves the fresh rows among `keys` (n keys) of row table `table` for a
  /// read at clock `clock`: copies each into `out` + i·dim (out: n × dim
  /// floats, row i ↔ keys[i]) and lowers the read version of its shard. The
  /// others are appended to *miss_keys and their indices i to
  /// *miss_positions (both cleared first). Returns the rows served. A table
  /// that is not enabled serves nothing.
  size_t ReadRows(uint32_t table, const uint64_t* keys, size_t n, int64_t clock, float* out,
                  std::vector<uint64_t>* miss_keys, std::vector<uint32_t>* miss_positions, bool ahead = false);
  /// Dense table: copies shard `shard`'s slice into `out` (the slice's
  /// floats, DenseRange) when it is fresh at `clock`, setting the shard's
  /// read version; returns whether it did.
  bool ReadDense(uint32_t table, int shard, int64_t clock, float* out);
  /// A pull reply from `shard` carried `version`: lowers the read version.
  void NoteReadVersion(uint32_t table, int shard, uint64_t version, bool ahead = false);
  /// Keeps `n` rows (`values`: n × dim) of `keys`, read when the shard's min
  /// clock was `row_clock`, at table version `version`, evicting as the
  /// capacity requires. No-op when the table is not enabled.
  void InsertRows(uint32_t table, const uint64_t* keys, size_t n, const float* values, int64_t row_clock,
                  uint64_t version);
  /// Keeps shard `shard`'s dense slice (`n` floats, which must be the
  /// slice's size: otherwise nothing is kept and false is returned). Returns
  /// true also when the slice is larger than the whole capacity (not kept).
  bool InsertDense(uint32_t table, int shard, const float* values, uint64_t n, int64_t row_clock, uint64_t version);

  // ---- pushes

  /// The version a push of `table` to `shard` carries (0: nothing read).
  uint64_t PushVersion(uint32_t table, int shard) const;
  /// A push of rows `keys` (n) is about to be sent. refresh_on_push: marks
  /// them pending and returns true (the push must set want_values);
  /// otherwise evicts them and returns false.
  bool StartPushRows(uint32_t table, const uint64_t* keys, size_t n);
  /// The same for shard `shard`'s slice of a dense table.
  bool StartPushDense(uint32_t table, int shard);
  /// The push started by StartPushRows returning true was answered or
  /// failed: its rows stop counting it (InsertRows then keeps the values the
  /// reply carried, if any).
  void FinishPushRows(uint32_t table, const uint64_t* keys, size_t n);
  void FinishPushDense(uint32_t table, int shard);

  /// Forgets every cached row and read version (a checkpoint: the worker
  /// reads fresh after it, exactly as a resumed worker, whose cache starts
  /// empty, does). Call with no push in flight. Keeps stats().
  void Clear();

 private:
  // One entry of the LRU list: a row (shard < 0) or a dense slice.
  struct LruEntry {
    uint32_t table;
    int shard;
    uint64_t key;
  };
  using LruList = std::list<LruEntry>;
  struct CachedRow {
    std::vector<float> values;  // empty: nothing kept
    int64_t row_clock = 0;      // shard's min clock when the values were read
    uint64_t version = 0;       // table version on the shard then
    int pending_pushes = 0;     // pushes of this row not yet answered
    LruList::iterator lru;      // valid while values are kept and capacity_bytes_ > 0
  };
  struct Table {
    TableOptions options;
    bool enabled = false;
    int pushes_in_flight = 0;
    std::unordered_map<uint64_t, CachedRow> rows;  // row tables
    std::vector<CachedRow> dense;                  // dense tables: one per shard
    std::vector<uint64_t> read_version;            // per shard: oldest version last read
    std::vector<uint64_t> ahead_version;           // the same for the read ahead (StartReadAhead)
  };

  bool Fresh(const Table& t, const CachedRow& row, int64_t clock) const {
    return !row.values.empty() && row.pending_pushes == 0 && row.row_clock >= clock - t.options.staleness;
  }

  static uint64_t EntryBytes(uint64_t floats) { return floats * sizeof(float) + kEntryOverheadBytes; }
  // Makes room for an entry of `bytes` (evicting from the LRU tail); false
  // when it can never fit.
  bool MakeRoom(uint64_t bytes);
  // Keeps `values` (n floats) in `entry` (whose values are empty), charging
  // them and linking it at the LRU head; `where` names it for eviction.
  // False when it does not fit (entry left empty).
  bool Keep(CachedRow* entry, const float* values, uint64_t n, const LruEntry& where);
  // Drops `entry`'s values (uncharging, unlinking); the entry itself stays.
  void Drop(CachedRow* entry);
  // Moves a kept entry to the LRU head (a read or a refresh used it).
  void Touch(CachedRow* entry) {
    if (capacity_bytes_ > 0) lru_.splice(lru_.begin(), lru_, entry->lru);
  }

  std::vector<Table> tables_;
  int num_shards_;
  uint64_t capacity_bytes_ = 0;
  uint64_t bytes_ = 0;
  LruList lru_;  // kept entries, most recently used first (capacity_bytes_ > 0 only)
  Stats stats_;
};

}  // namespace tether
