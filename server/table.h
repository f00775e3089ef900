// Parameter tables held by one server shard: row tables (uint64 key → row of
// `dim` floats, created on first touch) and dense slices (a contiguous range
// of a dense table). Each row stores its weights followed by its optimizer
// state, so one push touches one cache-friendly span.
//
// Row lookup: an open-addressing index (linear probing, 16-byte slots, load
// at most 1/2, a prime number of slots), so a lookup is one probe into one
// cache line in the common case rather than the bucket-then-node chase of
// std::unordered_map. The home slot is monotone in the key: the key's place
// in the range [lo, hi] of the keys seen so far (with slack), scaled to the
// slots. Requests carry sorted keys, so a lookup pass walks the slots
// forward whatever the keys are (dense ids, strided ids, random 64-bit or
// hashed ids), which the hardware prefetcher follows; with key mod a prime,
// random 64-bit keys made every lookup a cache miss (62% of the server's
// time on a 10^6-key push). A key outside the range widens it by at least
// an eighth (one re-placement of the slots, so at most a few dozen in a
// table's life). Keys bunched in a few clusters (e.g. two far-apart id
// ranges) would make long runs of full slots: an insert that probes more
// than kMaxProbe slots switches the index to a mixing hash for good
// (MixKey mod slots; random access, but short probes). Pushes and pulls look every key up first, then
// walk the rows with the next rows prefetched, so the rows' cache misses
// overlap the optimizer arithmetic. Row data and index blocks of 2 MiB or
// more ask for transparent huge pages (see HugePageAllocator).
//
// A row table with a budget (TableSpec.budget) also admits keys
// (server/row_admission.h: a key not admitted holds no row, reads as
// zeros, and its gradients are dropped and counted) and evicts rows
// (server/row_eviction.h: an evicted row's place is taken by the last row,
// so rows stay numbered 0 .. num_rows() − 1 and a checkpoint writes them as
// before). Rows of such a table move: their offsets (ResolveRows) are not
// stable, so it takes no part in key lists.
//
// With optimizer.delay_compensation λ > 0 the table keeps, per row (or for
// its dense slice) and per worker rank, the weights it last sent that
// worker (server/delay_backups.h; backup_workers × dim floats a row,
// outside the row's stride, so checkpoints and key lists are as without),
// and a push names its sender: its gradient g becomes g + λ·g⊙g⊙(w_now −
// w_bak) before the optimizer's step (optim/delay_compensation.h). The
// caller says what it sent (NoteRead*); an evicted row's backups go with
// it.
//
// Not thread-safe: a shard's event loop owns its tables.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/table_spec.h"
#include "optim/optimizer.h"
#include "proto/budget_state.pb.h"
#include "proto/shard_state.pb.h"
#include "server/delay_backups.h"
#include "server/row_admission.h"
#include "server/row_eviction.h"
#include "server/state_bytes.h"

namespace tether {

namespace table_internal {

/// The slot of a hashed key among `slots` slots: Lemire's fastmod of the
/// 32-bit fold of `mixed` (Lemire, Kaser & Kurz 2019; `fastmod_m` =
/// ⌊(2⁶⁴ − 1) / slots⌋ + 1) below 2³² slots, and from 2³² on the high half
/// of mixed × slots (Lemire's multiply-shift range reduction), which
/// reaches every slot where the 32-bit fold would reach only 2³² of them.
/// Always < slots.
inline uint64_t HashedSlot(uint64_t mixed, uint64_t slots, uint64_t fastmod_m) {
  if (__builtin_expect(slots > 0xffffffffull, 0))
    return static_cast<uint64_t>((static_cast<unsigned __int128>(mixed) * slots) >> 64);
  const uint32_t folded = static_cast<uint32_t>(mixed ^ (mixed >> 32));
  const uint64_t low = fastmod_m * folded;
  return static_cast<uint64_t>((static_cast<unsigned __int128>(low) * slots) >> 64);
}

void* HugePageAllocate(size_t bytes);
void HugePageDeallocate(void* p, size_t bytes);

/// std::allocator, except that blocks of 2 MiB or more are 2 MiB-aligned and
/// marked MADV_HUGEPAGE (Linux), so the transparent-huge-page setting
/// "madvise" (a common default) backs them with huge pages. The optimizer
/// walks rows scattered over the whole table; with 4 KiB pages nearly every
/// row costs a TLB miss once a table outgrows the TLB's reach (~8 MB).
template <typename T>
struct HugePageAllocator {
  using value_type = T;
  HugePageAllocator() = default;
  template <typename U>
  HugePageAllocator(const HugePageAllocator<U>&) {}  // NOLINT: rebinding is implicit
  T* allocate(size_t n) { return static_cast<T*>(HugePageAllocate(n * sizeof(T))); }
  void deallocate(T* p, size_t n) { HugePageDeallocate(p, n * sizeof(T)); }
  template <typename U>
  bool operator==(const HugePageAllocator<U>&) const { return true; }
  template <typename U>
  bool operator!=(const HugePageAllocator<U>&) const { return false; }
};

}  // namespace table_internal

class ServerTable {
 public:
  /// For a dense table, this shard holds [begin, end) of its `size` floats.
  /// `spec` must have passed ValidateTableSpecs (core/table_spec.h); its
  /// initializer (kind, bound, seed) gives every value's start.
  /// `max_rows`: the most rows this shard holds of a row table; the default
  /// kRowsMemoryHolds is MemoryRowLimit(spec); tests lower it. Row numbers
  /// and the index's slots are 64-bit, so nothing else bounds a shard's rows.
  /// A budget's max_rows reserves that many rows, their keys and the index
  /// here (address space; pages are touched as rows are created).
  ServerTable(const TableSpec& spec, uint64_t begin, uint64_t end, uint64_t max_rows = kRowsMemoryHolds);

  /// The constructor's max_rows that means MemoryRowLimit(spec).
  static constexpr uint64_t kRowsMemoryHolds = 0;
  /// The rows of row table `spec` the process's memory ceiling holds at
  /// ShardRowBytes(spec) bytes a row (MemoryCeilingBytes,
  /// core/process_limits.h: physical memory, or the cgroup's or the
  /// address-space limit when lower) (optim/shard_budget.h: the row with its
  /// optimizer state, its index slots, and its key and eviction metadata
  /// when it has a budget): the row limit of a table without max_rows.
  /// Past it a request is refused (ResourceExhausted naming the memory)
  /// rather than the shard running out of memory.
  static uint64_t MemoryRowLimit(const TableSpec& spec);

  const TableSpec& spec() const { return spec_; }
  /// The bound this table's pulls are answered under (TableStaleness).
  int64_t staleness() const { return staleness_; }
  uint64_t dense_begin() const { return begin_; }
  uint64_t dense_end() const { return end_; }

  /// Row tables: copies the rows of `n` keys into out (n × dim floats),
  /// creating untouched rows with the initializer. Errors:
  /// ResourceExhausted when the new rows would take the shard past
  /// max_rows() (nothing is created or copied then).
  Status PullRows(const uint64_t* keys, uint64_t n, float* out);
  /// Row tables: copies the rows of `n` keys into out (n × dim floats),
  /// writing dim zeros for a key this shard does not hold and creating
  /// nothing: evaluation of a hashed model (PullBody.absent_as_zeros),
  /// where an id never trained contributes nothing to the scores and must
  /// not grow the table. Cannot fail.
  void PullRowsIfPresent(const uint64_t* keys, uint64_t n, float* out) const;
  /// Row tables: applies gradients g (n × dim) to the rows of `keys`.
  /// Errors: as PullRows (nothing is applied then, and version() does not
  /// move); FailedPrecondition when the optimizer's own step makes a weight
  /// or a state value NaN or infinite (case C22: e.g. AdaGrad with h0 = 0
  /// and ε = 0 on a zero gradient, or an overflowing step): the message
  /// names the table, the key and column, the optimizer and its settings.
  /// The optimizer's kernels check every value they store (in registers,
  /// vectorised with the step); each row is copied aside just before its
  /// step, so that row is left as it was and no non-finite value stays in
  /// the table; the push's rows before it keep their (finite) updates.
  /// `pusher`: the sending worker's rank, whose gradient delay
  /// compensation corrects (−1, or a table without it: none).
  [[nodiscard]] Status PushRows(const uint64_t* keys, uint64_t n, const float* g, float lr_scale = 1.0f,
                                int pusher = -1);
  // ---- Resolved rows (key-list caching, core/net/key_list_cache.h). A
  // row's offset in the table's data (row number × stride()) never changes
  // while the table lives: rows are only appended (data_ may move, so
  // offsets, not pointers, are kept), and the index's growth and
  // re-placement move slots, not rows. So offsets resolved once stay valid
  // for every later request of the same keys to the same table.
  /// Row tables: the offsets of the rows of `n` keys into *offsets (n
  /// values), creating untouched rows as PullRows does. Errors: as PullRows
  /// (nothing created then).
  Status ResolveRows(const uint64_t* keys, uint64_t n, std::vector<uint64_t>* offsets);
  /// True when every offset of offsets[0..n) points at a row of this table
  /// (offsets resolved by this table; a check, O(n)).
  bool ValidOffsets(const uint64_t* offsets, uint64_t n) const;
  /// ResolveRows without the copy (not for a budgeted table: its rows
  /// move): *offsets points at the n offsets, valid until the next call on
  /// this table. Errors: as ResolveRows.
  Status LookUpRows(const uint64_t* keys, uint64_t n, const uint64_t** offsets);
  /// PullRows of rows resolved by ResolveRows (no lookups): out gets
  /// n × dim floats, the same bits PullRows gives for the same keys.
  void PullRowsAt(const uint64_t* offsets, uint64_t n, float* out) const;
  /// The rows PullRowsAt copies, lent instead, for a caller that converts
  /// them as it copies (a 16-bit pull reply): fn(i, src, rows) once per run
  /// of rows [i, i + rows) that lie one after another in the table, in
  /// order; src holds their rows × dim floats until the table changes.
  template <typename Fn>
  void ForEachRowRun(const uint64_t* offsets, uint64_t n, Fn&& fn) const {
    const bool runs = stride_ == dim_;  // rows with state are never one span
    for (uint64_t i = 0; i < n;) {
      uint64_t rows = 1;
      if (runs)
        while (i + rows < n && offsets[i + rows] == offsets[i] + rows * dim_) ++rows;
      fn(i, data_.data() + offsets[i], rows);
      i += rows;
    }
  }
  /// PushRows of rows resolved by ResolveRows: the same arithmetic and
  /// errors as PushRows (not ResourceExhausted: the rows exist). `keys`
  /// (n, or null) name a row in an error; with null the key is found from
  /// the row (slow, on errors only).
  [[nodiscard]] Status PushRowsAt(const uint64_t* offsets, uint64_t n, const float* g, float lr_scale,
                                  const uint64_t* keys, int pusher = -1);
  /// One piece of a push's gradients: `rows` rows of dim floats at `g`.
  struct GradientSpan {
    const float* g;
    uint64_t rows;
  };
  /// PushRows (offsets null) or PushRowsAt (offsets: n resolved rows) of a
  /// push whose gradients come in pieces (a push kept as it came,
  /// Message::value_pieces): spans[0..num_spans) hold the rows of
  /// keys[0..n) in order. The same arithmetic, version step, admission
  /// (budgeted tables) and errors as one call on the joined gradients (a
  /// refused row is named by its index in the whole push). PushRows is
  /// this with one span. Errors: InvalidArgument when the spans' rows are
  /// not n; those of PushRows.
  [[nodiscard]] Status PushRowSpans(const uint64_t* keys, const uint64_t* offsets, uint64_t n,
                                    const GradientSpan* spans, size_t num_spans, float lr_scale, int pusher = -1);
  /// Dense slice: copies its end−begin floats into out.
  void PullDense(float* out) const;
  /// Dense slice: its end−begin floats, valid until the next push or restore.
  const float* dense_values() const { return data_.data(); }
  /// Dense slice: applies g (end−begin floats). Errors: FailedPrecondition,
  /// as PushRows, naming the index in the whole dense table.
  [[nodiscard]] Status PushDense(const float* g, float lr_scale = 1.0f, int pusher = -1);

  // ---- Delay compensation (optimizer.delay_compensation > 0).
  /// True when the table keeps backups (λ > 0 and backup_workers ≥ 1).
  bool delay_compensated() const { return backups_ != nullptr; }
  /// Worker `rank` was just sent the current weights of the rows of `keys`
  /// (n; keys this shard holds no row for are skipped), of resolved rows
  /// (`offsets`), or of the dense slice: they become its backups. No-op
  /// without delay compensation or for a rank it does not cover. NoteRead
  /// looks each key up again (a pull already did once).
  void NoteRead(int rank, const uint64_t* keys, uint64_t n);
  void NoteReadAt(int rank, const uint64_t* offsets, uint64_t n);
  void NoteDenseRead(int rank);
  /// Every backup becomes the weights held now (after a checkpoint's or a
  /// kept model's weights were put in).
  void ResetDelayBackups();
  /// The backups (null without delay compensation; tests).
  const DelayBackups* delay_backups() const { return backups_.get(); }

  uint64_t num_rows() const { return index_.size(); }

  // ---- Budget (TableSpec.budget; row tables).
  /// True when the table admits keys or evicts rows (its rows then move:
  /// no key lists).
  bool budgeted() const { return budgeted_; }
  /// The row limit in force: the smaller of the constructor's max_rows and
  /// budget.max_rows.
  uint64_t max_rows() const { return max_rows_; }
  /// The clock of the request being served (the shard calls it before each
  /// pull and push); the table keeps the largest seen. Rows touched are
  /// stamped with it (LRU, TTL).
  void set_clock(int64_t clock) {
    if (clock > clock_) clock_ = clock;
  }
  int64_t clock() const { return clock_; }
  /// Rows created so far (first touches admitted; restored rows not
  /// counted), rows evicted, and rows of pushed gradients dropped because
  /// their key was not admitted. Without a restore, num_rows() ==
  /// rows_admitted() − rows_evicted().
  uint64_t rows_admitted() const { return rows_admitted_; }
  uint64_t rows_evicted() const { return rows_evicted_; }
  uint64_t rows_not_admitted() const { return rows_not_admitted_; }
  /// Bytes the table holds: row data (allocated), index slots, row keys,
  /// eviction metadata and the admission sketch; dense slices their floats.
  /// Row data and index blocks of 2 MiB or more count in whole huge pages
  /// (HugePageRoundedBytes), as the kernel backs them.
  uint64_t resident_bytes() const;
  /// The admission rule, or null (tests, checkpoints).
  const RowAdmission* admission() const { return admission_.get(); }
  /// The eviction metadata, or null (tests, checkpoints).
  const RowEviction* eviction() const { return eviction_.get(); }
  /// The budget's state (counters, clock, version, sketch, eviction
  /// metadata by row number) into *state, for a checkpoint written with the
  /// rows (this and the next two: server/table_budget_state.cc).
  void SaveBudgetState(TableBudgetState* state) const;
  /// Restores SaveBudgetState's state over rows restored in the same order
  /// (a resume on the same number of shards). Errors: DataLoss naming what
  /// disagrees (sketch size, row count); nothing of the metadata changes
  /// then.
  Status RestoreBudgetState(const TableBudgetState& state);
  /// Adds another shard's sketch counters to this one's, saturating (a
  /// resume on another number of shards: an over-count, which admits keys
  /// earlier, never later). Errors: DataLoss when the widths differ.
  Status MergeSketch(const TableBudgetState& state);
  /// True when this shard holds a row for `key` (creates nothing).
  bool Contains(uint64_t key) const { return index_.Contains(key); }
  /// True once the row index gave up its key-ordered layout (tests; see the
  /// file comment).
  bool index_hashed() const { return index_.hashed(); }
  /// Tests only, on a table without rows: the index numbers its rows from
  /// `first` (first, first + 1, ...) instead of 0, and stores those numbers
  /// in its slots; the rows' data, keys and eviction metadata stay at
  /// positions 0 .. num_rows() − 1 and every interface keeps speaking in
  /// positions. A test can so put row numbers across 2³¹ and 2³² without
  /// holding 2³¹ rows.
  void SetFirstRowNumberForTesting(uint64_t first) { index_.set_first(first); }
  /// Tests only: the number the index stores for `key`'s row (first + its
  /// position), or ~0 when absent.
  uint64_t RowNumberForTesting(uint64_t key) const {
    const uint64_t row = index_.Find(key);
    return row == RowIndex::kAbsent ? row : index_.first() + row;
  }

  // ---- Checkpoints (server/table_checkpoint.h): the table's whole state, raw.
  /// Floats per row of a row table: dim, then the optimizer's state
  /// (Optimizer::StateFloats(dim)).
  uint32_t stride() const { return stride_; }
  /// Row tables: num_rows() × stride() floats, in row-number order (the
  /// order of KeysByRow()); dense slices: the end−begin weights, then the
  /// slice's optimizer state. Valid until the next push, pull or restore.
  const float* raw_data() const { return data_.data(); }
  uint64_t raw_floats() const { return data_.size(); }
  /// Row tables: the key of each row, by row number (num_rows() keys).
  std::vector<uint64_t> KeysByRow() const;
  /// Row tables: sets row `key` (created if absent) to `values`, stride()
  /// floats: weights then optimizer state. Errors: ResourceExhausted past
  /// the row limit.
  Status RestoreRow(uint64_t key, const float* values);
  /// Row tables: room for `rows` rows in all without regrowing (restore).
  void ReserveRows(uint64_t rows);
  /// Row tables: row number `row` (< num_rows()) of `key` gets its
  /// initializer's weights again (the optimizer state is left): the row as
  /// a model cut taken before it existed holds it (server/kept_model.h).
  void InitRowWeights(uint64_t row, uint64_t key);
  /// Dense slices: raw_floats() floats, writable (restore).
  float* mutable_raw_data() { return data_.data(); }
  /// Sets the update counter (restore on the same number of shards).
  void set_version(uint64_t version) { version_ = version; }
  /// Row tables: calls fn(key, weights) for every row this shard holds
  /// (weights: dim floats, without the optimizer state; valid during the
  /// call), in no particular order. Creates nothing. For reading a finished
  /// table (model export); not while the shard's loop mutates it.
  void ForEachRow(const std::function<void(uint64_t key, const float* weights)>& fn) const;

  /// Updates applied to this table on this shard so far (one per push).
  uint64_t version() const { return version_; }

  // ---- Shard state (server/table_state.cc): a running table's whole
  // state, for a replica that joins a running shard (KvService::SaveState).
  /// Writes the counters, clocks, limits, room reserved and the index's
  /// mapping into *state, and appends the rows' keys, their index slots,
  /// the rows, the backups, the eviction metadata and the sketch to *bytes
  /// (layout: proto/shard_state.proto TableState).
  void SaveState(TableState* state, std::string* bytes) const;
  /// On a table just made from the same spec and range (no request yet):
  /// takes SaveState's state back bit for bit (row numbers, index slots,
  /// room reserved, eviction order and metadata, sketch, backups,
  /// counters), reading its parts from `bytes`. Errors: DataLoss naming
  /// the table and the part (a count past the bytes or the row limit, a
  /// layout the index cannot have made, ...); the table is then unusable
  /// (the caller throws it away).
  Status RestoreState(const TableState& state, StateReader* bytes);

 private:
  // key → row number, created on first touch. Open addressing with linear
  // probing; a slot's row is stored + 1 so that 0 marks an empty slot.
  // Slots hold 64-bit row numbers, and a hashed index reduces to more than
  // 2³² slots (table_internal::HashedSlot), so rows are bounded by memory
  // alone. Rows are numbered from first_ (0 outside tests) in the slots;
  // the interface speaks in positions (number − first_).
  class RowIndex {
   public:
    uint64_t size() const { return size_; }
    void set_first(uint64_t first) { first_ = first; }
    uint64_t first() const { return first_; }
    // The row number of `key`, or, when absent, inserts it as row size()
    // and sets *inserted.
    uint64_t FindOrInsert(uint64_t key, bool* inserted);
    // Hints the slot of `key` into the cache (no effect on the contents).
    void Prefetch(uint64_t key) const;
    // True when sorted keys spread from `lo` to `hi` (lo <= hi, covered)
    // land on average `lines` cache lines or more apart in the slots, or
    // the index is hashed: a lookup pass then misses the cache on every
    // key unless its slots are hinted ahead (the hardware prefetcher
    // follows only near-sequential walks).
    bool Scattered(uint64_t lo, uint64_t hi, uint64_t n, uint64_t lines) const;
    bool Contains(uint64_t key) const;
    // Removes `key` (present) and its slot (backward-shift deletion, so no
    // tombstones); the other keys keep their row numbers.
    void Erase(uint64_t key);
    // Gives `key` (present) row number `row`.
    void Renumber(uint64_t key, uint64_t row);
    uint64_t bytes() const { return slots_.capacity() * sizeof(Slot); }
    // The row number of `key`, or kAbsent; inserts nothing.
    static constexpr uint64_t kAbsent = ~uint64_t{0};
    uint64_t Find(uint64_t key) const;
    // Grows the slots (in one step) for `rows` rows at a load of at most 1/2.
    void Reserve(uint64_t rows) {
      if (2 * (rows + 1) > slots_.size()) Grow(2 * (rows + 1));
    }
    // True when the next insert would grow the slots.
    bool full() const { return 2 * (size_ + 1) > slots_.size(); }
    // The slot of each row, by row number (size() values), and the mapping.
    std::vector<uint64_t> SlotsByRow() const;
    void SaveState(TableIndexState* state) const;
    // On an empty index: row r (key keys[r]) in slot slots[r], under the
    // mapping of `state`, at most max_slots slots. Errors: DataLoss (the
    // message names the part) when a slot is out of range or taken twice,
    // or a key is not found at its row from its home slot.
    Status Restore(const TableIndexState& state, const std::vector<uint64_t>& keys,
                   const std::vector<uint64_t>& slots, uint64_t max_slots);
    // Calls fn(key, row) for every row, in slot order.
    template <typename Fn>
    void ForEach(Fn&& fn) const {
      for (const Slot& s : slots_)
        if (s.row_plus_one != 0) fn(s.key, s.row_plus_one - 1 - first_);
    }

    // Makes [lo, hi] (lo <= hi) part of the ordered range, re-placing the
    // slots when it was not; LookUp calls it with a request's first and last
    // key, so no re-placement happens inside its pass. No effect once hashed.
    void Cover(uint64_t lo, uint64_t hi);
    // True once the index fell back to the mixing hash (tests).
    bool hashed() const { return hashed_; }

    // Probes past which an insert gives up the ordered layout.
    static constexpr uint64_t kMaxProbe = 64;

   private:
    struct Slot {
      uint64_t key;
      uint64_t row_plus_one;  // 0: empty
    };
    uint64_t Home(uint64_t key) const;
    uint64_t HomeOutOfLine(uint64_t key) const;  // Home, for server/table_state.cc
    uint64_t Next(uint64_t i) const { return i + 1 == slots_.size() ? 0 : i + 1; }
    // At least doubles the slots, to at least min_slots.
    void Grow(uint64_t min_slots = 0);
    // Re-places every slot into `cap` slots under the current mapping;
    // false (slots unchanged) when an ordered placement probed more than
    // kMaxProbe (the caller then hashes).
    bool Rebuild(uint64_t cap);
    void SetScale();
    // Gives up the ordered layout (clustered keys).
    void FallBackToHash();

    std::vector<Slot, table_internal::HugePageAllocator<Slot>> slots_;  // a prime count
    uint64_t fastmod_m_ = 0;  // ⌊(2⁶⁴ − 1) / slots_.size()⌋ + 1 (the hashed Home's reduction)
    uint64_t size_ = 0;
    uint64_t first_ = 0;  // the number of position 0 (SetFirstRowNumberForTesting)
    // Ordered mapping: Home = ⌊(key − lo_) · scale_⌋, clamped to the slots.
    bool hashed_ = false;
    bool have_range_ = false;
    double lo_ = 0, hi_ = 0, scale_ = 0;
  };

  // RestoreState's parts (server/table_state.cc).
  Status RestoreRows(const TableState& state, StateReader* bytes);
  Status RestoreBackups(const TableState& state, StateReader* bytes);
  Status RestoreBudget(const TableState& state, StateReader* bytes);
  // The most floats of room a table of `needed` floats (`unit` a row or
  // span) may have reserved: its growth, or its budget's reservation.
  uint64_t RoomBound(uint64_t needed, uint64_t unit, uint64_t fresh) const;

  float* Row(uint64_t key);  // creates on first touch
  // LookUp of a budgeted table: admits (pushes only) or leaves out absent
  // keys (offsets_[i] = kNotAdmitted, counted in not_admitted_), expires
  // idle rows, evicts to make room. Errors: ResourceExhausted when the
  // request alone needs more rows than max_rows_ (or, without eviction,
  // the new rows would pass it).
  Status LookUpBudgeted(const uint64_t* keys, uint64_t n, bool push);
  // Evicts row `row`: the last row takes its number.
  void Evict(uint64_t row);
  Status TooManyRows(uint64_t rows) const;
  static constexpr uint64_t kNotAdmitted = ~uint64_t{0};
  float* NewRow(uint64_t key, uint64_t offset);  // Row's first touch: appends and initialises the row
  // Offsets in data_ of the rows of keys[0..n) (creating untouched rows),
  // in offsets_; afterwards data_ does not move until the next call.
  // ResourceExhausted (nothing created) past max_rows_.
  Status LookUp(const uint64_t* keys, uint64_t n);
  // The key of the row at data_[offset] (a scan of the index: errors only).
  uint64_t KeyAtOffset(uint64_t offset) const;
  // The FailedPrecondition for a step that made span[j] non-finite; `where`
  // names the span ("key 9" or "" for a dense slice starting at begin_);
  // `rows_applied`: rows of the push updated before this one.
  Status NonFiniteStep(const float* span, uint64_t j, const std::string& where, uint64_t rows_applied) const;
  // PushRowsAt's steps without its version step; `first`: the index of
  // offsets[0]'s row in the whole push (errors name it).
  Status StepRowsAt(const uint64_t* offsets, uint64_t n, const float* g, float lr_scale, const uint64_t* keys,
                    int pusher, uint64_t first);
  // A budgeted push's span: the rows of keys admitted by the last
  // LookUpBudgeted, their offsets compacted in place at offsets[0..m),
  // their keys and gradients copied into kept_keys_ and kept_g_; returns m.
  uint64_t KeepAdmitted(uint64_t* offsets, const uint64_t* keys, const float* g, uint64_t n);
  // A push's gradients of rows at `offsets` (n), compensated for `pusher`'s
  // delay into compensated_ (returned), or g when there is nothing to do.
  const float* Compensated(const uint64_t* offsets, uint64_t n, const float* g, int pusher);

  TableSpec spec_;
  Optimizer optimizer_;
  uint64_t seed_;
  bool zeros_;        // initializer ZEROS
  float init_bound_;  // initializer UNIFORM's bound
  uint32_t dim_;      // row tables: spec_.dim()
  int64_t staleness_;  // TableStaleness(spec_)
  uint64_t begin_ = 0, end_ = 0;
  uint64_t version_ = 0;
  uint32_t stride_;  // dim + optimizer state floats per row
  uint64_t max_rows_;
  bool memory_limit_;  // max_rows_ is MemoryRowLimit (the refusal names the memory)
  RowIndex index_;           // key → row number; the row is at data_[row · stride_]
  std::vector<float, table_internal::HugePageAllocator<float>> data_;
  std::vector<uint64_t> offsets_;  // scratch of LookUp, reused
  // Budget (row tables with TableSpec.budget).
  bool budgeted_ = false;
  std::unique_ptr<RowAdmission> admission_;
  std::unique_ptr<RowEviction> eviction_;
  std::vector<uint64_t> row_keys_;  // budgeted: the key of each row, by row number
  int64_t clock_ = 0;
  uint64_t serial_ = 0;          // requests looked up (RowEviction's request stamp)
  bool creating_by_push_ = false;  // the rows LookUpBudgeted creates now come with a push
  uint64_t not_admitted_ = 0;    // keys of the last LookUpBudgeted left without a row
  uint64_t rows_admitted_ = 0, rows_evicted_ = 0, rows_not_admitted_ = 0;
  std::vector<uint8_t> wanted_;      // LookUpBudgeted scratch: key i gets (or has) a row
  std::vector<uint64_t> kept_keys_;  // a push span's admitted keys, compacted
  std::vector<float> kept_g_;        // and their gradients
  std::vector<float> undo_;        // the row (or the slice) as before its step, reused
  // Delay compensation: the backups, and a push's compensated gradients.
  std::unique_ptr<DelayBackups> backups_;
  std::vector<float> compensated_;
};

}  // namespace tether
