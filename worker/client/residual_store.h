// ResidualStore: one table's error-feedback residuals on a worker, bounded.
// With a 16-bit push encoding (TableSpec.push_wire) the worker sends each
// row's gradient plus the residual the row kept from its previous push,
// rounded; what the rounding lost becomes the row's new residual (Seide et
// al., "1-Bit Stochastic Gradient Descent", Interspeech 2014; Karimireddy
// et al., "Error Feedback Fixes SignSGD", ICML 2019). So over n pushes of a
// row the shard receives the sum of its n gradients less one final
// rounding error, not n of them.
//
// The store exists whatever the parameter cache's setting. It holds at most
// `capacity_rows` rows of `dim` floats; a new row beyond that evicts the
// least recently used one, whose residual is dropped and counted
// (evicted(), and the sum of its absolute values, evicted_l1()). A table
// whose keys lie in [0, key_range) with key_range ≤ capacity_rows never
// evicts: its rows are addressed by key (no lookup, no recency list).
//
// Cost: a row is found in an open-addressing index (one cache line;
// Prefetch() lets the caller overlap the lookups) and its touch appended to
// a recency log; exact LRU order is kept without a linked list: each touch
// stamps the row and appends (row, stamp) to the log, eviction takes the
// oldest log entry whose stamp is still the row's, and the log is compacted
// once it holds more than twice the rows' touches (or 1.5 entries a row).
// A new row takes the next slot (an evicted row's when full), so the rows
// of a key list lie side by side in the order it first came. Pushed again
// in that order, Rows() finds them by comparing the keys of the slots that
// follow (and, at a break, those after the ends of its last few runs: a
// list merged from a few earlier ones) without the index, and logs each run
// of touches as one entry: a few ns a row instead of a random memory access
// (worst on an index larger than the caches). Keys in another order cost
// the lookup as before. A list the caller names (BeginList(list): the
// worker's key-list cache holds it, immutable, and the caller compared the
// request's keys with it) that was found as one run and whose slots have
// not changed since is taken as that run without comparing a key
// (KnownRun()). A run touched again as a whole, as the log's last entry,
// replaces that entry, and its rows' stamps are written only when
// something else reads or touches them: a repeated list costs its
// residuals' pass and no per-row bookkeeping. Memory per row: its dim floats plus about 60 bytes
// (index entries at a load of 3/8 to 3/4, key, stamp, up to 2.5 log
// entries of 8 bytes while the log is compacted).
//
// Ownership: owns its rows; a pointer from Row() or Rows() is valid until
// the next Row() or Rows() call of another key. Thread-compatible (the
// client's one thread).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace tether {

class ResidualStore {
 public:
  /// The most rows a store holds (its recency stamps are 32-bit).
  static constexpr uint64_t kMaxCapacityRows = (uint64_t{1} << 30) - 1;
  /// An immutable key list shared with its owner (the worker's key-list
  /// cache, core/net/key_list_cache.h): its identity names its keys.
  using KeyList = std::shared_ptr<const std::vector<uint64_t>>;

  /// `dim` ≥ 1 floats a row; 1 ≤ `capacity_rows` ≤ kMaxCapacityRows;
  /// `key_range`: the table's num_keys (0: any key).
  ResidualStore(uint32_t dim, uint64_t capacity_rows, uint64_t key_range = 0);

  /// The residual of `key` (dim floats; zeros for a key not held), made the
  /// most recently used. May evict the least recently used row.
  float* Row(uint64_t key);
  /// Row(keys[0]) and, after it in memory, the residuals of keys[1],
  /// keys[2], ... as long as those are held right after it (a key list
  /// pushed again in the order it was first pushed): row j at
  /// result + j·dim for j < *taken, 1 ≤ *taken ≤ n (n ≥ 1). The same rows,
  /// values, recency and evictions as Row() on keys[0 .. *taken), in order.
  float* Rows(const uint64_t* keys, size_t n, size_t* taken);
  /// Whether the last Rows() found its rows where earlier runs ended or
  /// after its first row, without the index: a caller then need not
  /// Prefetch() the next keys.
  bool in_runs() const { return run_misses_ == 0; }
  /// Brackets one request's key list, whose rows are then looked up with
  /// Rows() in the list's order. EndList() lays the rows the list found
  /// out side by side in that order (the rows' values, recency and
  /// evictions unchanged), so that the list pushed again is one run: when
  /// they came in short runs (16 rows or fewer on average, at least 1,024
  /// rows, the rows of another list interleaved with them), or, for a
  /// named list (below), in the same runs as at its previous push with no
  /// slot changed between (a list that repeats: say a few rows of another
  /// list inside it), and when the list holds at least half the rows held,
  /// so that the O(rows held + index) pass costs no more than a few of the
  /// list's pushes. Not when a row was evicted during the list. Memory
  /// while laying out: 4 bytes a slot and a copy of the recency log (the
  /// rows move in place). Pointers from Row() and Rows() are invalid after
  /// EndList().
  /// BeginList(list): `list` is null or holds the request's keys
  /// themselves, in order (the caller compared them); the store then
  /// remembers how the last kKnownLists such lists were found (weak
  /// references: it keeps no list alive).
  void BeginList(const KeyList& list = nullptr);
  void EndList();
  /// Inside BeginList(list) with a list, before any Rows(): when the last
  /// bracket of that same list (the same object) found all its rows in one
  /// run and no row has taken a slot, left or moved since, returns that
  /// run (row j at result + j·dim, j < list->size()), touched as Rows() on
  /// the whole list would touch it, without comparing a key. Else null:
  /// look the rows up with Rows().
  float* KnownRun();
  /// The residual of `key`, or null when not held; does not touch recency.
  const float* Find(uint64_t key) const;
  /// A hint that Row(key) comes soon: starts loading its index entry.
  void Prefetch(uint64_t key) const {
    if (!index_.empty()) __builtin_prefetch(index_.data() + Home(key));
  }

  /// Calls fn(key, dim floats) for every row held, least recently used
  /// first: Row() on the keys in this order rebuilds the same recency (a
  /// checkpoint's residuals, checkpoint/residual_file.h). Touches nothing.
  void ForEachRow(const std::function<void(uint64_t key, const float* values)>& fn) const;
  /// Sets the dropped-row counters (a resumed store continues the
  /// checkpoint's).
  void SetEvicted(uint64_t rows, double l1) {
    evicted_ = rows;
    evicted_l1_ = l1;
  }

  uint32_t dim() const { return dim_; }
  uint64_t capacity_rows() const { return capacity_; }
  uint64_t rows() const { return direct_rows_ + held_; }
  uint64_t evicted() const { return evicted_; }
  /// KnownRun() calls that found their list's run.
  uint64_t known_runs() const { return known_runs_; }
  /// Σ |residual| over the evicted rows' values: what error feedback lost.
  double evicted_l1() const { return evicted_l1_; }

 private:
  static constexpr uint32_t kNone = ~0u;
  struct Entry {
    uint64_t key = 0;
    uint32_t slot = kNone;  // kNone: empty
  };
  // A log entry: a touch of `slot` stamped `stamp`; stamps are the low 32
  // bits of the touch count, which cannot wrap while a stale touch waits in
  // the log (it is compacted within 3·rows + 64 touches, and rows < 2^30).
  // A run of touches of slot, slot + 1, ... stamped stamp, stamp + 1, ...
  // takes two entries: {slot | kRunHead, stamp}, {kRunLength | length, 0}.
  struct Use {
    uint32_t slot;
    uint32_t stamp;
  };
  static constexpr uint32_t kRunHead = 1u << 31;
  static constexpr uint32_t kRunLength = 1u << 30;
  static constexpr uint32_t kSlotBits = kRunLength - 1;
  // Entry i's touches (one, or a run's); returns the next entry's index.
  size_t ReadUse(size_t i, uint32_t* slot, uint32_t* stamp, uint32_t* count) const;
  // Appends `count` touches from (slot, stamp) to `log` (entries from
  // `head`), continuing its last run where they follow it.
  static void AppendUse(std::vector<Use>* log, size_t head, uint32_t slot, uint32_t stamp, uint32_t count);
  size_t Home(uint64_t key) const { return (key * 0x9E3779B97F4A7C15ull) >> shift_; }
  // The index position of `key`, or of the empty entry where it would go.
  size_t Probe(uint64_t key) const;
  void Grow();
  void Erase(uint64_t key);
  // The slot of `key` (taken, evicting if full, when not held), touched.
  uint32_t Slot(uint64_t key);
  void Touch(uint32_t slot, uint32_t count);
  // Touch() of exactly the rows of the log's last entry: that entry takes
  // the new stamps (the old touches would be stale). False when it is not.
  bool Retouch(uint32_t slot, uint32_t count, uint32_t stamp);
  // Writes a lazy run's stamps (see lazy_count_).
  void Materialize();
  // Stamps slots [slot, + count) stamp, stamp + 1, ...: a run of
  // kLazyRun rows or more lazily.
  void Stamp(uint32_t slot, uint32_t count, uint32_t stamp);
  static constexpr uint32_t kLazyRun = 64;
  // The stamp of `slot`'s last touch, the lazy run's included.
  uint32_t StampOf(uint32_t slot) const {
    return slot - lazy_slot_ < lazy_count_ ? lazy_stamp_ + (slot - lazy_slot_) : stamps_[slot];
  }
  void Compact();
  uint32_t TakeSlot();
  // Moves the rows in slots order[0..) to slots 0, 1, ... in that order,
  // the other rows after them in their order (see EndList()).
  void LayOut(const std::vector<uint32_t>& order);
  // Whether Rows() looks for runs (at the cursors, and after its first
  // row): not while that keeps failing (keys pushed in another order), so
  // that those memory accesses stay rare there.
  bool TryRun() const { return run_misses_ < 4 || run_misses_ % 64 == 0; }
  static constexpr size_t kCursors = 4;

  uint32_t dim_;
  uint64_t capacity_;
  uint64_t direct_range_ = 0;       // keys below it live in direct_ (0: none)
  std::vector<float> direct_;       // key k: direct_[k·dim, (k+1)·dim), made at first use
  std::vector<uint8_t> touched_;    // key k has a row in direct_
  uint64_t direct_rows_ = 0;
  std::vector<float> values_;       // slot s: values_[s·dim, (s+1)·dim)
  std::vector<uint64_t> keys_;      // slot → key
  std::vector<uint32_t> stamps_;    // slot → its last touch (but see lazy_count_)
  // A run touched as a whole whose stamps are not written yet: slots
  // [lazy_slot_, + lazy_count_) were last touched at lazy_stamp_ + j.
  // Written (Materialize()) before anything else reads or writes stamps_.
  uint32_t lazy_slot_ = 0;
  uint32_t lazy_count_ = 0;
  uint32_t lazy_stamp_ = 0;
  uint32_t clock_ = 0;              // touches so far (mod 2^32)
  // Touches that replaced the log's last entry (Retouch()) since the last
  // compaction: while a stale touch may wait in the log (stale_free_
  // false) they count towards compacting it, so that stamps cannot wrap
  // around to a stale touch's.
  uint64_t retouched_ = 0;
  bool stale_free_ = true;          // every touch in the log is its slot's last
  std::vector<Use> log_;            // touches, oldest first from log_head_
  size_t log_head_ = 0;
  uint64_t log_touches_ = 0;        // touches in log_ from log_head_
  uint32_t run_misses_ = 0;         // Rows() calls in a row that found no run
  uint32_t cursors_[kCursors] = {kNone, kNone, kNone, kNone};  // the slots after recent runs, latest first
  bool tracing_ = false;            // between BeginList() and EndList()
  uint64_t trace_evicted_ = 0;      // evicted_ at BeginList()
  std::vector<Use> trace_;          // the list's runs: {first slot, rows}
  uint64_t moves_ = 0;              // slots given a key, or rows laid out, so far
  KeyList list_;                    // the bracketed list's keys (null: not named)
  uint64_t list_moves_ = 0;         // moves_ at BeginList()
  // Lists found in one run (one a shard, where a request is split), the
  // latest kKnownLists. Weak references: a list's control block outlives
  // it while referenced here, so the same block is the same list.
  struct KnownList {
    std::weak_ptr<const std::vector<uint64_t>> list;
    uint32_t slot = kNone;          // its first slot
    size_t runs = 0;                // the runs it was found in (KnownRun(): 1)
    uint64_t moves = 0;             // moves_ when it was found
  };
  // The entry of `list`, or null.
  KnownList* FindKnown(const KeyList& list);
  static constexpr size_t kKnownLists = 8;
  KnownList known_[kKnownLists];
  size_t known_next_ = 0;           // the entry a new list takes
  uint64_t known_runs_ = 0;
  std::vector<Entry> index_;        // open addressing, linear probing; size a power of two
  int shift_ = 64;                  // 64 − log2(index_.size())
  uint64_t held_ = 0;               // rows in values_ (not direct)
  uint64_t evicted_ = 0;
  double evicted_l1_ = 0;
};

}  // namespace tether
