#include "server/table.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>

#if defined(__linux__)
#include <sys/mman.h>
#endif
#include <unistd.h>

#include "core/partition.h"
#include "core/process_limits.h"
#include "core/prefetch.h"
#include "optim/delay_compensation.h"
#include "optim/shard_budget.h"

namespace tether {

namespace table_internal {

namespace {
constexpr size_t kHugePage = kHugePageBytes;
}  // namespace

void* HugePageAllocate(size_t bytes) {
  if (bytes < kHugePage) return ::operator new(bytes);
  const size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  void* p = std::aligned_alloc(kHugePage, rounded);
  if (p == nullptr) throw std::bad_alloc();
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  madvise(p, rounded, MADV_HUGEPAGE);  // a hint: failure only costs speed
#endif
  return p;
}

void HugePageDeallocate(void* p, size_t bytes) {
  if (bytes < kHugePage) {
    ::operator delete(p);
  } else {
    std::free(p);
  }
}

}  // namespace table_internal

ServerTable::ServerTable(const TableSpec& spec, uint64_t begin, uint64_t end, uint64_t max_rows)
    : spec_(spec),
      optimizer_(spec.optimizer()),
      seed_(spec.init().seed()),
      zeros_(spec.init().kind() == TableInitializer::ZEROS),
      init_bound_(spec.init().bound()),
      dim_(spec.dim()),
      staleness_(TableStaleness(spec)),
      begin_(begin),
      end_(end),
      max_rows_(max_rows == kRowsMemoryHolds ? MemoryRowLimit(spec) : max_rows),
      memory_limit_(max_rows == kRowsMemoryHolds && IsRowTable(spec)) {
  const uint64_t seed = seed_;
  stride_ = static_cast<uint32_t>(dim_ + optimizer_.StateFloats(dim_));
  if (IsDenseTable(spec)) {
    const uint64_t n = end - begin;
    data_.resize(n + optimizer_.StateFloats(n));
    for (uint64_t i = 0; i < n; ++i)
      data_[i] = zeros_ ? 0.0f : InitialWeight(seed, spec.id(), 0, static_cast<uint32_t>(begin + i), init_bound_);
    optimizer_.InitState(data_.data() + n, n);
  }
  if (DelayBackupFloats(spec, 1) > 0) {
    backups_ = std::make_unique<DelayBackups>(spec.backup_workers(), IsDenseTable(spec) ? end - begin : dim_);
    if (IsDenseTable(spec)) backups_->Add(data_.data());
  }
  if (IsRowTable(spec) && spec.has_budget()) {
    const TableBudget& b = spec.budget();
    if (RowAdmission::Enabled(b)) admission_ = std::make_unique<RowAdmission>(b, seed, spec.id());
    if (b.evict() != EVICT_NONE)
      eviction_ = std::make_unique<RowEviction>(b.evict(), b.ttl_clocks(), MixKey(seed + spec.id()));
    budgeted_ = admission_ != nullptr || eviction_ != nullptr;
    if (b.max_rows() > 0) {
      // Reserved now, so the table never allocates more than its limit
      // (BudgetedTableBytes, optim/shard_budget.h); pages are touched as
      // rows are created.
      if (b.max_rows() < max_rows_) memory_limit_ = false;
      max_rows_ = std::min(max_rows_, b.max_rows());
      ReserveRows(max_rows_);
      if (budgeted_) row_keys_.reserve(max_rows_);
      if (backups_ != nullptr) backups_->Reserve(max_rows_);
    }
  }
}

uint64_t ServerTable::MemoryRowLimit(const TableSpec& spec) {
  if (!IsRowTable(spec)) return 0;
  const uint64_t memory = MemoryCeilingBytes(CurrentProcessLimits(), nullptr);
  // Unknown memory: no limit but the index's (a row number is 64-bit).
  if (memory == 0) return uint64_t{1} << 62;
  return memory / ShardRowBytes(spec);
}

uint64_t ServerTable::resident_bytes() const {
  // Blocks from the HugePageAllocator as allocated: in whole huge pages.
  uint64_t bytes = HugePageRoundedBytes(data_.capacity() * sizeof(float));
  if (IsDenseTable(spec_)) return bytes + (backups_ != nullptr ? backups_->bytes() : 0);
  bytes += HugePageRoundedBytes(index_.bytes()) + row_keys_.capacity() * sizeof(uint64_t);
  if (eviction_ != nullptr) bytes += eviction_->rows() * RowEviction::kBytesPerRow;
  if (admission_ != nullptr) bytes += admission_->sketch().bytes();
  if (backups_ != nullptr) bytes += backups_->bytes();
  return bytes;
}

namespace {

// Rows whose lookups or updates are started ahead of the one being worked
// on. Two rows (6 KB of Adam rows at dim 256) cover an L3 miss at the Bibtex
// shape; more measured no better (tether-bench updates and a table-only
// loop at 1,836 × 256).
constexpr uint64_t kRowsAhead = 2;
// A lookup that hits is a few ns, so slots are hinted far enough ahead to
// cover a miss to DRAM (~100 ns).
constexpr uint64_t kKeysAhead = 32;
// Ordered slots a 4 KiB page or more apart per key, on average over a
// request, are hinted as hashed ones are (RowIndex::Scattered): the
// hardware prefetchers follow an ascending walk within a page but not
// across pages. Hinting keys ~350 B apart (10^5 keys of a 1.1 M-row
// index) cost a 10^5-key push 10-30% (tether-bench kv).
constexpr uint64_t kScatteredLines = 64;

// Hints the cache lines of floats [p, p + n) (for writing or reading), or
// only the first `max_lines` of them (a row's first lines are what the
// hardware prefetcher has not seen coming; it follows the rest).
inline void PrefetchSpan(const float* p, uint64_t n, uint64_t max_lines, bool for_write) {
  const char* b = reinterpret_cast<const char*>(p);
  const uint64_t bytes = n * sizeof(float), lines = (bytes + 63) / 64;
  const auto hint = [for_write](const char* q) {
    if (for_write) {
      HintWrite(q);
    } else {
      HintRead(q);
    }
  };
  // Whole span: its last float first (Adam reads its step count there before
  // anything else in the row; it may also sit on a line past `lines` when p
  // is not line-aligned).
  if (max_lines > lines) hint(b + bytes - 1);
  for (uint64_t l = 0; l < std::min(lines, max_lines); ++l) hint(b + l * 64);
}

}  // namespace

namespace {

bool IsPrime(uint64_t n) {
  if (n < 2) return false;
  for (uint64_t d = 2; d * d <= n; ++d)
    if (n % d == 0) return false;
  return true;
}

}  // namespace

__attribute__((always_inline)) inline uint64_t ServerTable::RowIndex::Home(uint64_t key) const {
  if (__builtin_expect(hashed_, 0)) return table_internal::HashedSlot(MixKey(key), slots_.size(), fastmod_m_);
  // Monotone in the key (rounding to double is monotone too), so sorted
  // keys walk the slots forward. Keys outside [lo_, hi_] (none inside a
  // LookUp pass, which Covers its keys first) go to the first or last slot.
  const double x = (static_cast<double>(key) - lo_) * scale_;
  if (!(x > 0)) return 0;
  const uint64_t last = slots_.size() - 1;
  return x >= static_cast<double>(last) ? last : static_cast<uint64_t>(x);
}

uint64_t ServerTable::RowIndex::HomeOutOfLine(uint64_t key) const { return Home(key); }

void ServerTable::RowIndex::Prefetch(uint64_t key) const {
  if (!slots_.empty()) HintRead(&slots_[Home(key)]);
}

bool ServerTable::RowIndex::Scattered(uint64_t lo, uint64_t hi, uint64_t n, uint64_t lines) const {
  if (hashed_) return true;
  if (slots_.empty() || n < 2) return false;
  constexpr uint64_t kSlotsPerLine = 64 / sizeof(Slot);
  return Home(hi) - Home(lo) >= (n - 1) * lines * kSlotsPerLine;
}

void ServerTable::RowIndex::FallBackToHash() {
  hashed_ = true;
  Rebuild(slots_.size());
}

__attribute__((always_inline)) inline uint64_t ServerTable::RowIndex::FindOrInsert(uint64_t key, bool* inserted) {
  if (__builtin_expect(2 * (size_ + 1) > slots_.size(), 0)) Grow();
  uint64_t probes = 0;
  for (uint64_t i = Home(key);; i = Next(i)) {
    Slot& s = slots_[i];
    if (s.row_plus_one == 0) {
      if (__builtin_expect(probes > kMaxProbe && !hashed_, 0)) {
        // Clustered keys: give up the order (see the file comment), and
        // look again from the key's new home.
        FallBackToHash();
        probes = 0;
        i = Home(key);
        while (slots_[i].row_plus_one != 0) i = Next(i);
        Slot& h = slots_[i];
        h.key = key;
        h.row_plus_one = first_ + ++size_;
        *inserted = true;
        return size_ - 1;
      }
      s.key = key;
      s.row_plus_one = first_ + ++size_;
      *inserted = true;
      return size_ - 1;
    }
    if (s.key == key) {
      *inserted = false;
      return s.row_plus_one - 1 - first_;
    }
    ++probes;
  }
}

void ServerTable::RowIndex::SetScale() {
  // hi_ − lo_ + 1 key values over the slots; at most one key per value, so
  // a range no wider than the slots puts every key in a slot of its own.
  scale_ = slots_.empty() ? 0.0 : static_cast<double>(slots_.size()) / (hi_ - lo_ + 1.0);
}

bool ServerTable::RowIndex::Rebuild(uint64_t cap) {
  auto old = std::move(slots_);
  const uint64_t old_fastmod = fastmod_m_;
  const double old_scale = scale_;
  slots_.assign(cap, Slot{0, 0});
  fastmod_m_ = UINT64_MAX / cap + 1;
  SetScale();
  for (const Slot& s : old) {
    if (s.row_plus_one == 0) continue;
    uint64_t i = Home(s.key), probes = 0;
    while (slots_[i].row_plus_one != 0) {
      i = Next(i);
      if (++probes > kMaxProbe && !hashed_) {
        slots_ = std::move(old);
        fastmod_m_ = old_fastmod;
        scale_ = old_scale;
        return false;
      }
    }
    slots_[i] = s;
  }
  return true;
}

void ServerTable::RowIndex::Grow(uint64_t min_slots) {
  uint64_t cap = std::max(slots_.empty() ? 61 : 2 * slots_.size() + 1, min_slots | 1);
  while (!IsPrime(cap)) cap += 2;
  if (!Rebuild(cap)) {
    hashed_ = true;
    Rebuild(cap);
  }
}

void ServerTable::RowIndex::Cover(uint64_t lo, uint64_t hi) {
  if (hashed_) return;
  const double l = static_cast<double>(lo), h = static_cast<double>(hi);
  if (!have_range_) {
    have_range_ = true;
    lo_ = l;
    hi_ = h;
  } else {
    if (l >= lo_ && h <= hi_) return;
    // Widen by at least a quarter of the span on the side that grows, so
    // that keys arriving in increasing order re-place the slots a few dozen
    // times at most; keys then fill at least 4/5 of the range, a local load
    // of at most 5/8. While the slots are mostly empty (reserved for a
    // checkpoint's rows, restored one by one in row order), by the whole
    // span: each re-placement walks every slot, so their number must stay
    // near log2 of the range, and the load is low anyway.
    const double span = hi_ - lo_ + 1.0;
    const double slack = std::max(1.0, 8 * size_ < slots_.size() ? span : span / 4);
    if (l < lo_) lo_ = std::max(0.0, std::min(l, lo_ - slack));
    if (h > hi_) hi_ = std::min(18446744073709551615.0, std::max(h, hi_ + slack));
  }
  if (slots_.empty()) return;  // SetScale at the first Grow
  if (!Rebuild(slots_.size())) {
    hashed_ = true;
    Rebuild(slots_.size());
  }
}

__attribute__((always_inline)) inline float* ServerTable::Row(uint64_t key) {
  bool inserted = false;
  const uint64_t offset = index_.FindOrInsert(key, &inserted) * stride_;
  if (__builtin_expect(inserted, 0)) return NewRow(key, offset);
  return data_.data() + offset;
}

float* ServerTable::NewRow(uint64_t key, uint64_t offset) {
  const uint32_t dim = dim_;
  data_.resize(data_.size() + stride_);
  float* row = data_.data() + offset;
  for (uint32_t j = 0; j < dim; ++j) row[j] = zeros_ ? 0.0f : InitialWeight(seed_, spec_.id(), key, j, init_bound_);
  optimizer_.InitState(row + dim, dim);
  if (backups_ != nullptr) backups_->Add(row);  // read by nobody yet: w_bak = w
  ++rows_admitted_;
  if (budgeted_) {
    row_keys_.push_back(key);
    if (eviction_ != nullptr) eviction_->Added(offset / stride_, clock_, serial_, creating_by_push_);
  }
  return row;
}

void ServerTable::InitRowWeights(uint64_t row, uint64_t key) {
  float* w = data_.data() + row * stride_;
  for (uint32_t j = 0; j < dim_; ++j) w[j] = zeros_ ? 0.0f : InitialWeight(seed_, spec_.id(), key, j, init_bound_);
}

void ServerTable::ForEachRow(const std::function<void(uint64_t key, const float* weights)>& fn) const {
  index_.ForEach([&](uint64_t key, uint64_t row) { fn(key, data_.data() + row * stride_); });
}

bool ServerTable::RowIndex::Contains(uint64_t key) const {
  if (slots_.empty()) return false;
  for (uint64_t i = Home(key);; i = Next(i)) {
    if (slots_[i].row_plus_one == 0) return false;
    if (slots_[i].key == key) return true;
  }
}

uint64_t ServerTable::RowIndex::Find(uint64_t key) const {
  if (slots_.empty()) return kAbsent;
  for (uint64_t i = Home(key);; i = Next(i)) {
    if (slots_[i].row_plus_one == 0) return kAbsent;
    if (slots_[i].key == key) return slots_[i].row_plus_one - 1 - first_;
  }
}

void ServerTable::RowIndex::Erase(uint64_t key) {
  uint64_t i = Home(key);
  while (slots_[i].key != key || slots_[i].row_plus_one == 0) i = Next(i);
  // Backward shift: a later slot of the run moves into the hole unless its
  // home lies cyclically in (hole, slot], where a probe still finds it.
  for (uint64_t j = Next(i); slots_[j].row_plus_one != 0; j = Next(j)) {
    const uint64_t k = Home(slots_[j].key);
    const bool stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
    if (stays) continue;
    slots_[i] = slots_[j];
    i = j;
  }
  slots_[i] = Slot{0, 0};
  --size_;
}

void ServerTable::RowIndex::Renumber(uint64_t key, uint64_t row) {
  uint64_t i = Home(key);
  while (slots_[i].key != key || slots_[i].row_plus_one == 0) i = Next(i);
  slots_[i].row_plus_one = first_ + row + 1;
}

Status ServerTable::TooManyRows(uint64_t rows) const {
  std::string why = " (use more servers)";
  if (memory_limit_) {
    std::string memory;
    (void)MemoryCeilingBytes(CurrentProcessLimits(), &memory);
    why = " (what " + memory + " holds at " + std::to_string(ShardRowBytes(spec_)) +
          " bytes a row; use more servers, or a budget: --server_memory or the table's max_rows)";
  } else if (budgeted_ || spec_.budget().max_rows() > 0) {
    why = " (its budget's max_rows)";
  }
  return Status::ResourceExhausted("table " + spec_.name() + " would hold " + std::to_string(rows) +
                                   " rows on this shard; the limit is " + std::to_string(max_rows_) + why);
}

void ServerTable::Evict(uint64_t row) {
  const uint64_t last = index_.size() - 1;
  index_.Erase(row_keys_[row]);
  if (row != last) {
    std::memcpy(data_.data() + row * stride_, data_.data() + last * stride_, size_t{stride_} * sizeof(float));
    row_keys_[row] = row_keys_[last];
    index_.Renumber(row_keys_[row], row);
  }
  row_keys_.pop_back();
  data_.resize(last * stride_);
  if (backups_ != nullptr) {  // the row's backups go with it
    backups_->Move(last, row);
    backups_->PopBack();
  }
  eviction_->Removed(row);
  ++rows_evicted_;
}

Status ServerTable::LookUpBudgeted(const uint64_t* keys, uint64_t n, bool push) {
  ++serial_;
  not_admitted_ = 0;
  wanted_.resize(n);
  // Rows held are touched first, which keeps them from this request's
  // evictions; an absent key is admitted (pushes only) or left out.
  uint64_t missing = 0;
  for (uint64_t i = 0; i < n; ++i) {
    const uint64_t row = index_.Find(keys[i]);
    if (row != RowIndex::kAbsent) {
      if (eviction_ != nullptr) eviction_->Touched(row, clock_, serial_, push);
      wanted_[i] = 1;
      continue;
    }
    const bool admit = admission_ == nullptr || (push && admission_->AdmitOnPush(keys[i]));
    wanted_[i] = admit ? 1 : 0;
    missing += admit ? 1 : 0;
    not_admitted_ += admit ? 0 : 1;
  }
  if (push) rows_not_admitted_ += not_admitted_;
  if (eviction_ != nullptr)
    for (uint64_t r; (r = eviction_->Expired(clock_, serial_)) != RowEviction::kNone;) Evict(r);
  while (index_.size() + missing > max_rows_) {
    const uint64_t victim = eviction_ == nullptr ? RowEviction::kNone : eviction_->Victim(serial_);
    if (victim == RowEviction::kNone) return TooManyRows(index_.size() + missing);
    Evict(victim);
  }
  offsets_.resize(n);
  if (n == 0) return Status::OK();
  creating_by_push_ = push;
  index_.Cover(std::min(keys[0], keys[n - 1]), std::max(keys[0], keys[n - 1]));
  for (uint64_t i = 0; i < n; ++i) {
    if (wanted_[i] == 0) {
      offsets_[i] = kNotAdmitted;
      continue;
    }
    if (index_.full()) index_.Reserve(std::min(max_rows_, index_.size() + (n - i)));
    offsets_[i] = static_cast<uint64_t>(Row(keys[i]) - data_.data());
  }
  return Status::OK();
}

Status ServerTable::LookUp(const uint64_t* keys, uint64_t n) {
  if (index_.size() + n > max_rows_) {
    // Near the limit only: count the rows this request would create.
    uint64_t missing = 0;
    for (uint64_t i = 0; i < n; ++i) missing += index_.Contains(keys[i]) ? 0 : 1;
    if (index_.size() + missing > max_rows_) return TooManyRows(index_.size() + missing);
  }
  offsets_.resize(n);
  if (n == 0) return Status::OK();
  // Keys arrive sorted (the shard checks them), so the first and last bound them.
  index_.Cover(std::min(keys[0], keys[n - 1]), std::max(keys[0], keys[n - 1]));
  // Slots of ordered keys far apart (a batch of 10^3 keys from 2·10^6
  // rows lands ~67 KB apart) miss like hashed ones: 55 ns a key on a 2 GiB
  // table (tether-bench updates). Denser keys are left to the hardware.
  const bool scattered =
      index_.Scattered(std::min(keys[0], keys[n - 1]), std::max(keys[0], keys[n - 1]), n, kScatteredLines);
  for (uint64_t i = 0; i < n; ++i) {
    // Growing in the middle of a request: room for all its remaining keys
    // at once. Sorted keys inserted into slots sized for only some of them
    // would pile up at the front of the range (the home slot is ordered).
    if (index_.full()) index_.Reserve(std::min(max_rows_, index_.size() + (n - i)));
    // Hashed homes are random, scattered ordered ones too: hint them ahead
    // (dense ordered ones walk forward, which the hardware follows).
    if ((scattered || index_.hashed()) && i + kKeysAhead < n) index_.Prefetch(keys[i + kKeysAhead]);
    // Row() may grow data_, so offsets (not pointers) are kept.
    offsets_[i] = static_cast<uint64_t>(Row(keys[i]) - data_.data());
  }
  return Status::OK();
}

std::vector<uint64_t> ServerTable::KeysByRow() const {
  std::vector<uint64_t> keys(index_.size());
  index_.ForEach([&keys](uint64_t key, uint64_t row) { keys[row] = key; });
  return keys;
}

void ServerTable::ReserveRows(uint64_t rows) {
  rows = std::min(rows, max_rows_);
  index_.Reserve(rows);
  data_.reserve(rows * stride_);
}

Status ServerTable::RestoreRow(uint64_t key, const float* values) {
  const uint64_t admitted = rows_admitted_;
  creating_by_push_ = false;  // its metadata comes with the checkpoint's budget file, if any
  TETHER_RETURN_IF_ERROR(LookUp(&key, 1));
  rows_admitted_ = admitted;  // a restored row was admitted before the checkpoint
  std::memcpy(data_.data() + offsets_[0], values, size_t{stride_} * sizeof(float));
  return Status::OK();
}

Status ServerTable::ResolveRows(const uint64_t* keys, uint64_t n, std::vector<uint64_t>* offsets) {
  const uint64_t* found = nullptr;
  TETHER_RETURN_IF_ERROR(LookUpRows(keys, n, &found));
  offsets->assign(found, found + n);
  return Status::OK();
}

Status ServerTable::LookUpRows(const uint64_t* keys, uint64_t n, const uint64_t** offsets) {
  if (budgeted_)
    return Status::FailedPrecondition("table " + spec_.name() +
                                      " admits or evicts rows: its rows move, so they are not resolved");
  TETHER_RETURN_IF_ERROR(LookUp(keys, n));
  *offsets = offsets_.data();
  return Status::OK();
}

bool ServerTable::ValidOffsets(const uint64_t* offsets, uint64_t n) const {
  const uint64_t rows = index_.size();
  uint64_t bad = 0;
  for (uint64_t i = 0; i < n; ++i) bad |= static_cast<uint64_t>(offsets[i] % stride_ != 0 || offsets[i] / stride_ >= rows);
  return bad == 0;
}

uint64_t ServerTable::KeyAtOffset(uint64_t offset) const {
  uint64_t key = 0;
  index_.ForEach([&](uint64_t k, uint64_t row) {
    if (row * stride_ == offset) key = k;
  });
  return key;
}

Status ServerTable::PullRows(const uint64_t* keys, uint64_t n, float* out) {
  if (!budgeted_) {
    TETHER_RETURN_IF_ERROR(LookUp(keys, n));
    PullRowsAt(offsets_.data(), n, out);
    return Status::OK();
  }
  TETHER_RETURN_IF_ERROR(LookUpBudgeted(keys, n, /*push=*/false));
  if (not_admitted_ == 0) {
    PullRowsAt(offsets_.data(), n, out);
    return Status::OK();
  }
  // Keys without a row read as zeros (not their initializer: nothing was
  // created for them).
  for (uint64_t i = 0; i < n; ++i) {
    if (offsets_[i] == kNotAdmitted) {
      std::memset(out + i * dim_, 0, size_t{dim_} * sizeof(float));
    } else {
      std::memcpy(out + i * dim_, data_.data() + offsets_[i], size_t{dim_} * sizeof(float));
    }
  }
  return Status::OK();
}

void ServerTable::PullRowsAt(const uint64_t* offsets, uint64_t n, float* out) const {
  const uint32_t dim = dim_;
  const float* base = data_.data();
  // Rows that lie one after the other in the table (no state between them,
  // and created in the order of the keys asked for: a key list's rows) are
  // copied as one span, at every dim; at dim 1 a 10^6-key pull was a
  // gather of 10^6 single floats.
  const bool runs = stride_ == dim;
  if (dim <= Optimizer::kMaxGatheredDim) {
    for (uint64_t i = 0; i < n;) {
      uint64_t rows = 1;
      if (runs)
        while (i + rows < n && offsets[i + rows] == offsets[i] + rows * dim) ++rows;
      const float* src = base + offsets[i];
      float* dst = out + i * dim;
      const uint64_t m = rows * dim;
      if (m >= 16) {
        std::memcpy(dst, src, m * sizeof(float));
      } else {  // a call per short row would dominate
        for (uint64_t j = 0; j < m; ++j) dst[j] = src[j];
      }
      i += rows;
    }
    return;
  }
  for (uint64_t i = 0; i < n;) {
    if (i + kRowsAhead < n) PrefetchSpan(base + offsets[i + kRowsAhead], dim, 4, /*for_write=*/false);
    uint64_t rows = 1;
    if (runs)
      while (i + rows < n && offsets[i + rows] == offsets[i] + rows * dim) ++rows;
    std::memcpy(out + i * dim, base + offsets[i], rows * dim * sizeof(float));
    i += rows;
  }
}

void ServerTable::PullRowsIfPresent(const uint64_t* keys, uint64_t n, float* out) const {
  const uint32_t dim = dim_;
  const float* base = data_.data();
  for (uint64_t i = 0; i < n; ++i) {
    if (i + kKeysAhead < n) index_.Prefetch(keys[i + kKeysAhead]);
    const uint64_t row = index_.Find(keys[i]);
    if (row == RowIndex::kAbsent) {
      std::memset(out + i * dim, 0, dim * sizeof(float));
    } else {
      std::memcpy(out + i * dim, base + row * stride_, dim * sizeof(float));
    }
  }
}

Status ServerTable::NonFiniteStep(const float* span, uint64_t j, const std::string& where,
                                  uint64_t rows_applied) const {
  // A row is its dim weights then its state; a dense slice is its n weights
  // then its state.
  const uint64_t weights = IsDenseTable(spec_) ? end_ - begin_ : dim_;
  std::string what;
  if (j < weights) {
    what = IsDenseTable(spec_) ? "index " + std::to_string(begin_ + j) : where + ", column " + std::to_string(j);
  } else {
    what = (IsDenseTable(spec_) ? std::string("the slice") : where) + "'s optimizer state (float " +
           std::to_string(j - weights) + ")";
  }
  return Status::FailedPrecondition("table " + spec_.name() + ": the server's " + optimizer_.Describe() +
                                    " step made " + what + " " + (std::isnan(span[j]) ? "NaN" : "infinite") +
                                    (IsDenseTable(spec_) || rows_applied == 0
                                         ? std::string("; nothing of this push was applied")
                                         : "; that row was left as it was, and the push's " +
                                               std::to_string(rows_applied) + " earlier row(s) kept their updates"));
}

Status ServerTable::PushRows(const uint64_t* keys, uint64_t n, const float* g, float lr_scale, int pusher) {
  const GradientSpan whole{g, n};
  return PushRowSpans(keys, nullptr, n, &whole, 1, lr_scale, pusher);
}

Status ServerTable::PushRowsAt(const uint64_t* offsets, uint64_t n, const float* g, float lr_scale,
                               const uint64_t* keys, int pusher) {
  TETHER_RETURN_IF_ERROR(StepRowsAt(offsets, n, g, lr_scale, keys, pusher, 0));
  ++version_;
  return Status::OK();
}

Status ServerTable::PushRowSpans(const uint64_t* keys, const uint64_t* offsets, uint64_t n, const GradientSpan* spans,
                                 size_t num_spans, float lr_scale, int pusher) {
  uint64_t rows = 0;
  for (size_t s = 0; s < num_spans; ++s) rows += spans[s].rows;
  if (rows != n)
    return Status::InvalidArgument("table " + spec_.name() + ": a push of " + std::to_string(n) + " keys carries " +
                                   std::to_string(rows) + " rows of gradients");
  bool drop_not_admitted = false;
  if (offsets == nullptr) {
    if (budgeted_) {
      TETHER_RETURN_IF_ERROR(LookUpBudgeted(keys, n, /*push=*/true));
      drop_not_admitted = not_admitted_ > 0;
    } else {
      TETHER_RETURN_IF_ERROR(LookUp(keys, n));
    }
    offsets = offsets_.data();
  }
  uint64_t first = 0;
  for (size_t s = 0; s < num_spans; ++s) {
    const uint64_t* at = offsets + first;
    const uint64_t* k = keys != nullptr ? keys + first : nullptr;
    const float* g = spans[s].g;
    uint64_t m = spans[s].rows;
    if (drop_not_admitted) {
      // The gradients of keys not admitted are dropped (counted by LookUpBudgeted).
      m = KeepAdmitted(offsets_.data() + first, k, g, m);
      k = kept_keys_.data();
      g = kept_g_.data();
    }
    TETHER_RETURN_IF_ERROR(StepRowsAt(at, m, g, lr_scale, k, pusher, first));
    first += spans[s].rows;
  }
  ++version_;
  return Status::OK();
}

uint64_t ServerTable::KeepAdmitted(uint64_t* offsets, const uint64_t* keys, const float* g, uint64_t n) {
  kept_keys_.clear();
  kept_g_.clear();
  uint64_t m = 0;
  for (uint64_t i = 0; i < n; ++i) {
    if (offsets[i] == kNotAdmitted) continue;
    offsets[m++] = offsets[i];
    kept_keys_.push_back(keys[i]);
    kept_g_.insert(kept_g_.end(), g + i * dim_, g + (i + 1) * dim_);
  }
  return m;
}

Status ServerTable::StepRowsAt(const uint64_t* offsets, uint64_t n, const float* g, float lr_scale,
                               const uint64_t* keys, int pusher, uint64_t first) {
  g = Compensated(offsets, n, g, pusher);
  const uint32_t dim = dim_;
  const uint32_t stride = stride_;
  float* base = data_.data();
  auto key_of = [&](uint64_t i) { return keys != nullptr ? keys[i] : KeyAtOffset(offsets[i]); };
  // No non-finite value enters a table (C22): a row whose step would store
  // a NaN or an infinity is left as it was (rows without state: the step
  // is checked before it is stored, Optimizer::ApplyGathered; rows with
  // state: undone from a copy), and the push fails, naming the key. The
  // rows before it in this push keep their (finite) updates: keeping a copy
  // of every row of a push to undo it whole cost 12 % of Bibtex's
  // samples/s in one process, and the failed push fails the
  // worker's run. The refused step is computed again on a copy of the row
  // (`undo`, one row of scratch) to name the value.
  if (undo_.size() < stride) undo_.resize(stride);
  float* undo = undo_.data();
  auto refused = [&](uint64_t i) {
    std::memcpy(undo, base + offsets[i], stride * sizeof(float));
    (void)optimizer_.Apply(undo, undo + dim, g + i * dim, dim, lr_scale);
    uint64_t j = 0;
    while (j + 1 < stride && std::isfinite(undo[j])) ++j;
    if (first + i > 0) ++version_;  // the rows before it were updated
    return NonFiniteStep(undo, j, "key " + std::to_string(key_of(i)), first + i);
  };
  if (stride == dim && optimizer_.CanApplyGathered(dim)) {
    // Rows without state: one call for the whole push (per-row calls and
    // hints cost more than the step at dim 1), and rows that follow one
    // another in the table stepped as one span.
    const uint64_t bad = optimizer_.ApplyGathered(base, offsets, n, g, dim, lr_scale);
    if (__builtin_expect(bad < n, 0)) return refused(bad);
    return Status::OK();
  }
  // The whole row (weights and state) is hinted: its parts are separate
  // streams to the hardware prefetcher, and the last line holds Adam's step.
  for (uint64_t i = 0; i < std::min(n, kRowsAhead); ++i) PrefetchSpan(base + offsets[i], stride, ~0ull, true);
  for (uint64_t i = 0; i < n; ++i) {
    if (i + kRowsAhead < n) PrefetchSpan(base + offsets[i + kRowsAhead], stride, ~0ull, true);
    float* row = base + offsets[i];
    // A row with state is copied aside (into `undo`, in L1) and stepped in
    // place in one pass; a refused step is undone from the copy. (A check
    // pass before the step instead costs Adam a second computation of it:
    // 870-1,080 against 700 ns a row on rows that miss the cache.)
    std::memcpy(undo, row, stride * sizeof(float));
    if (__builtin_expect(!optimizer_.Apply(row, row + dim, g + i * dim, dim, lr_scale), 0)) {
      std::memcpy(row, undo, stride * sizeof(float));
      return refused(i);
    }
  }
  return Status::OK();
}

void ServerTable::PullDense(float* out) const {
  std::memcpy(out, data_.data(), (end_ - begin_) * sizeof(float));
}

Status ServerTable::PushDense(const float* g, float lr_scale, int pusher) {
  const uint64_t n = end_ - begin_;
  if (backups_ != nullptr && backups_->Covers(pusher)) {
    compensated_.resize(n);
    CompensateDelay(g, data_.data(), backups_->Backup(pusher, 0), n, spec_.optimizer().delay_compensation(),
                    compensated_.data());
    g = compensated_.data();
  }
  // As PushRows: undone whole if the step made a NaN or an infinity.
  undo_.assign(data_.begin(), data_.end());
  if (__builtin_expect(!optimizer_.Apply(data_.data(), data_.data() + n, g, n, lr_scale), 0)) {
    uint64_t j = 0;
    while (std::isfinite(data_[j])) ++j;
    const Status st = NonFiniteStep(data_.data(), j, "", 0);
    std::copy(undo_.begin(), undo_.end(), data_.begin());
    return st;
  }
  ++version_;
  return Status::OK();
}

}  // namespace tether
