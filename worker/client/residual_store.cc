#include "worker/client/residual_store.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <glog/logging.h>

namespace tether {

ResidualStore::ResidualStore(uint32_t dim, uint64_t capacity_rows, uint64_t key_range)
    : dim_(std::max<uint32_t>(1, dim)), capacity_(std::max<uint64_t>(1, capacity_rows)) {
  CHECK_LE(capacity_, kMaxCapacityRows) << "ResidualStore: capacity of " << capacity_ << " rows";
  if (key_range > 0 && key_range <= capacity_) direct_range_ = key_range;
}

size_t ResidualStore::Probe(uint64_t key) const {
  const size_t mask = index_.size() - 1;
  size_t i = Home(key);
  while (index_[i].slot != kNone && index_[i].key != key) i = (i + 1) & mask;
  return i;
}

void ResidualStore::Grow() {
  std::vector<Entry> old = std::move(index_);
  const size_t size = std::max<size_t>(16, old.size() * 2);
  index_.assign(size, Entry{});
  shift_ = 64 - __builtin_ctzll(size);
  for (const Entry& e : old)
    if (e.slot != kNone) index_[Probe(e.key)] = e;
}

// Linear probing's deletion without tombstones: the entries after the hole
// that may move into it do (Knuth, TAOCP vol. 3, 6.4, Algorithm R).
void ResidualStore::Erase(uint64_t key) {
  const size_t mask = index_.size() - 1;
  size_t hole = Probe(key);
  DCHECK_NE(index_[hole].slot, kNone);
  for (size_t j = (hole + 1) & mask; index_[j].slot != kNone; j = (j + 1) & mask) {
    const size_t home = Home(index_[j].key);
    const bool stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
    if (stays) continue;
    index_[hole] = index_[j];
    hole = j;
  }
  index_[hole].slot = kNone;
}

size_t ResidualStore::ReadUse(size_t i, uint32_t* slot, uint32_t* stamp, uint32_t* count) const {
  *stamp = log_[i].stamp;
  if ((log_[i].slot & kRunHead) == 0) {
    *slot = log_[i].slot;
    *count = 1;
    return i + 1;
  }
  *slot = log_[i].slot & kSlotBits;
  *count = log_[i + 1].slot & kSlotBits;
  return i + 2;
}

void ResidualStore::AppendUse(std::vector<Use>* log, size_t head, uint32_t slot, uint32_t stamp, uint32_t count) {
  if (log->size() > head) {
    Use& last = log->back();
    if (last.slot & kRunLength) {  // a run continued (a key list pushed again in its first order)
      const Use& first = (*log)[log->size() - 2];
      const uint32_t length = last.slot & kSlotBits;
      if ((first.slot & kSlotBits) + length == slot && first.stamp + length == stamp) {
        last.slot = kRunLength | (length + count);
        return;
      }
    } else if (last.slot + 1 == slot && last.stamp + 1 == stamp) {  // a touch becomes a run
      last.slot |= kRunHead;
      log->push_back(Use{kRunLength | (count + 1), 0});
      return;
    }
  }
  // Fields set in place (a Use built whole on the stack and copied stalls
  // on store forwarding).
  Use& first = log->emplace_back();
  first.stamp = stamp;
  if (count == 1) {
    first.slot = slot;
  } else {
    first.slot = slot | kRunHead;
    log->emplace_back().slot = kRunLength | count;
  }
}

void ResidualStore::Materialize() {
  for (uint32_t j = 0; j < lazy_count_; ++j) stamps_[lazy_slot_ + j] = lazy_stamp_ + j;
  lazy_count_ = 0;
}

void ResidualStore::Stamp(uint32_t slot, uint32_t count, uint32_t stamp) {
  if (slot == lazy_slot_ && count == lazy_count_) {  // the lazy run again
    lazy_stamp_ = stamp;
    return;
  }
  Materialize();
  // A run's stamps are written when something reads them (most often
  // never: the same run touched again replaces them).
  if (count >= kLazyRun) {
    lazy_slot_ = slot;
    lazy_count_ = count;
    lazy_stamp_ = stamp;
    return;
  }
  for (uint32_t j = 0; j < count; ++j) stamps_[slot + j] = stamp + j;
}

bool ResidualStore::Retouch(uint32_t slot, uint32_t count, uint32_t stamp) {
  const size_t entries = log_.size() - log_head_;
  if (entries == 0) return false;
  Use* head = &log_.back();
  if (count == 1) {
    if (head->slot != slot) return false;
  } else if (entries < 2 || head->slot != (kRunLength | count) || (head - 1)->slot != (slot | kRunHead)) {
    return false;
  } else {
    --head;
  }
  // The same rows again: the entry's touches, all superseded, make way for
  // these (no stale touch added). A run's stamps stay lazy.
  head->stamp = stamp;
  Stamp(slot, count, stamp);
  clock_ += count;
  retouched_ += count;
  if (!stale_free_ && retouched_ > 2 * held_ + 64) Compact();
  return true;
}

void ResidualStore::Touch(uint32_t slot, uint32_t count) {
  const uint32_t stamp = clock_ + 1;
  if (Retouch(slot, count, stamp)) return;
  Stamp(slot, count, stamp);
  clock_ += count;
  log_touches_ += count;
  stale_free_ = false;
  AppendUse(&log_, log_head_, slot, stamp, count);
  // Memory: the log holds at most 1.5 entries a row, and 1 more while it
  // is compacted.
  if (log_touches_ + retouched_ > 2 * held_ + 64 || log_.size() - log_head_ > held_ + held_ / 2 + 64 ||
      log_head_ > log_.size() / 2 + 64)
    Compact();
}

// Keeps each slot's last touch only, in order: the recency list. The kept
// touches go after the log's end, then move to its front: a run with stale
// touches inside splits into more entries, and the log's memory is reused
// from one compaction to the next (no new pages to fault in).
void ResidualStore::Compact() {
  Materialize();
  const size_t end = log_.size();
  log_.reserve(end + std::min<size_t>(end - log_head_, held_) + 2);
  uint64_t kept = 0;
  for (size_t i = log_head_; i < end;) {
    uint32_t slot, stamp, count;
    i = ReadUse(i, &slot, &stamp, &count);
    const uint32_t* stamps = stamps_.data() + slot;
    uint32_t j = 0;
    while (j < count) {
      // Blocks of 8 touches all still current (a repeated key list's run)
      // are checked without a branch each.
      uint32_t live = j;
      for (; live + 8 <= count; live += 8) {
        uint32_t diff = 0;
        for (uint32_t k = live; k < live + 8; ++k) diff |= stamps[k] ^ (stamp + k);
        if (diff != 0) break;
      }
      while (live < count && stamps[live] == stamp + live) ++live;
      if (live > j) {
        AppendUse(&log_, end, slot + j, stamp + j, live - j);
        kept += live - j;
      }
      // And blocks of 8 all stale (a run touched again later as a whole).
      for (j = live; j + 8 <= count; j += 8) {
        uint32_t same = 0;
        for (uint32_t k = j; k < j + 8; ++k) same |= static_cast<uint32_t>(stamps[k] == stamp + k);
        if (same != 0) break;
      }
      while (j < count && stamps[j] != stamp + j) ++j;
    }
  }
  log_.erase(log_.begin(), log_.begin() + static_cast<std::ptrdiff_t>(end));
  log_head_ = 0;
  log_touches_ = kept;
  retouched_ = 0;
  stale_free_ = true;
}

uint32_t ResidualStore::TakeSlot() {
  if (held_ < capacity_) {
    const uint32_t slot = static_cast<uint32_t>(keys_.size());
    keys_.push_back(0);
    stamps_.push_back(0);
    values_.resize(values_.size() + dim_);
    ++held_;
    return slot;
  }
  // Full: the least recently used row's residual is dropped. The log's
  // oldest touch that is still its slot's last names it.
  Materialize();
  uint32_t slot = kNone;
  while (slot == kNone) {
    Use& t = log_[log_head_];
    const uint32_t s = t.slot & kSlotBits;
    if (stamps_[s] == t.stamp) slot = s;
    --log_touches_;
    if ((t.slot & kRunHead) == 0) {
      ++log_head_;
    } else if (Use& length = log_[log_head_ + 1]; (length.slot & kSlotBits) > 1) {  // the run's rest stays
      t.slot = (s + 1) | kRunHead;
      ++t.stamp;
      --length.slot;
    } else {
      log_head_ += 2;
    }
  }
  Erase(keys_[slot]);
  const float* v = values_.data() + size_t{slot} * dim_;
  for (uint32_t j = 0; j < dim_; ++j) evicted_l1_ += std::fabs(v[j]);
  ++evicted_;
  return slot;
}

uint32_t ResidualStore::Slot(uint64_t key) {
  if (!index_.empty()) {
    const Entry& e = index_[Probe(key)];
    if (e.slot != kNone) {
      Touch(e.slot, 1);
      return e.slot;
    }
  }
  const uint32_t slot = TakeSlot();
  // At most 3/4 full: probes stay short.
  if (4 * held_ > 3 * index_.size()) Grow();
  index_[Probe(key)] = Entry{key, slot};
  keys_[slot] = key;
  ++moves_;
  Touch(slot, 1);
  std::fill_n(values_.data() + size_t{slot} * dim_, dim_, 0.0f);
  return slot;
}

float* ResidualStore::Row(uint64_t key) {
  if (key < direct_range_) {
    if (direct_.empty()) {
      direct_.assign(direct_range_ * dim_, 0.0f);
      touched_.assign(direct_range_, 0);
    }
    direct_rows_ += touched_[key] == 0;
    touched_[key] = 1;
    return direct_.data() + key * dim_;
  }
  const uint32_t slot = Slot(key);  // may move values_
  return values_.data() + size_t{slot} * dim_;
}

float* ResidualStore::Rows(const uint64_t* keys, size_t n, size_t* taken) {
  *taken = 1;
  if (keys[0] < direct_range_) return Row(keys[0]);
  // Where earlier runs ended: a key list pushed again in its first order,
  // or merged from a few such lists, goes on at one of them. A slot found
  // there holds the key (keys_ has one per slot, never a key addressed
  // directly), so it is the key's row.
  const bool look = TryRun();
  size_t cursor = kCursors;
  if (look)
    for (size_t c = 0; c < kCursors && cursor == kCursors; ++c)
      if (cursors_[c] < keys_.size() && keys_[cursors_[c]] == keys[0]) cursor = c;
  const bool hit = cursor < kCursors;
  uint32_t slot;
  if (hit) {
    slot = cursors_[cursor];
  } else {
    slot = Slot(keys[0]);  // touched
    cursor = kCursors - 1;  // the one used longest ago makes way
  }
  size_t m = 1;
  if (look) {
    const size_t limit = std::min<size_t>(n, keys_.size() - slot);
    const uint64_t* held = keys_.data() + slot;
    // A long run is compared a block at a time by memcmp (vectorized),
    // the block where it ends key by key.
    constexpr size_t kBlock = 64;
    while (m + kBlock <= limit && std::memcmp(held + m, keys + m, kBlock * sizeof(uint64_t)) == 0) m += kBlock;
    while (m < limit && held[m] == keys[m]) ++m;
  }
  // One log entry for the run.
  if (hit) Touch(slot, static_cast<uint32_t>(m));
  else if (m > 1) Touch(slot + 1, static_cast<uint32_t>(m - 1));
  run_misses_ = hit || m > 1 ? 0 : run_misses_ + 1;
  if (tracing_) {
    if (!trace_.empty() && trace_.back().slot + trace_.back().stamp == slot)
      trace_.back().stamp += static_cast<uint32_t>(m);
    else
      trace_.push_back(Use{slot, static_cast<uint32_t>(m)});
  }
  // Most recently used first.
  for (size_t c = cursor; c > 0; --c) cursors_[c] = cursors_[c - 1];
  cursors_[0] = slot + static_cast<uint32_t>(m);
  *taken = m;
  return values_.data() + size_t{slot} * dim_;
}

void ResidualStore::BeginList(const KeyList& list) {
  tracing_ = true;
  trace_evicted_ = evicted_;
  trace_.clear();
  list_ = list;
  list_moves_ = moves_;
}

ResidualStore::KnownList* ResidualStore::FindKnown(const KeyList& list) {
  for (KnownList& k : known_)
    if (!k.list.expired() && !k.list.owner_before(list) && !list.owner_before(k.list)) return &k;
  return nullptr;
}

float* ResidualStore::KnownRun() {
  if (list_ == nullptr || list_->empty() || !trace_.empty()) return nullptr;
  // The run's slots still hold the list's keys when none was given a key,
  // and no row moved, since it was found.
  const KnownList* k = FindKnown(list_);
  if (k == nullptr || k->moves != moves_ || k->runs != 1) return nullptr;
  const auto n = static_cast<uint32_t>(list_->size());
  ++known_runs_;
  Touch(k->slot, n);
  run_misses_ = 0;
  trace_.push_back(Use{k->slot, n});
  for (size_t c = kCursors - 1; c > 0; --c) cursors_[c] = cursors_[c - 1];
  cursors_[0] = k->slot + n;
  return values_.data() + size_t{k->slot} * dim_;
}

void ResidualStore::EndList() {
  tracing_ = false;
  uint64_t rows = 0;
  for (const Use& run : trace_) rows += run.stamp;
  // A named list whose rows all lie in slots, none changed meanwhile: in
  // one run, KnownRun() takes it next time; in more, found the same way as
  // at its last push (it repeats), it is laid out below.
  bool repeats = false;
  if (list_ != nullptr && moves_ == list_moves_ && !trace_.empty() && rows == list_->size()) {
    KnownList* k = FindKnown(list_);
    repeats = k != nullptr && k->moves == moves_ && k->runs == trace_.size() && trace_.size() > 1;
    if (k == nullptr) k = &known_[known_next_++ % kKnownLists];
    k->list = list_;
    k->slot = trace_[0].slot;
    k->runs = trace_.size();
    k->moves = moves_;
  }
  list_.reset();
  const bool short_runs = rows >= 1024 && trace_.size() > 1 + rows / 16;
  if ((short_runs || repeats) && 2 * rows >= held_ && evicted_ == trace_evicted_) {
    std::vector<uint32_t> order;
    order.reserve(rows);
    for (const Use& run : trace_)
      for (uint32_t j = 0; j < run.stamp; ++j) order.push_back(run.slot + j);
    LayOut(order);
  }
  trace_.clear();
}

void ResidualStore::LayOut(const std::vector<uint32_t>& order) {
  Materialize();
  ++moves_;
  const size_t slots = keys_.size();
  std::vector<uint32_t> to(slots, kNone);  // old slot → new slot
  uint32_t next = 0;
  for (const uint32_t s : order)
    if (to[s] == kNone) to[s] = next++;
  for (size_t s = 0; s < slots; ++s)
    if (to[s] == kNone) to[s] = next++;
  // The recency log, touch by touch in the new slots: the list's touches,
  // consecutive, become one run again.
  std::vector<Use> log;
  log.reserve(log_.size() - log_head_ + 2);
  uint64_t kept = 0;
  for (size_t i = log_head_; i < log_.size();) {
    uint32_t slot, stamp, count;
    i = ReadUse(i, &slot, &stamp, &count);
    for (uint32_t j = 0; j < count; ++j) {
      if (stamps_[slot + j] != stamp + j) continue;
      AppendUse(&log, 0, to[slot + j], stamp + j, 1);
      ++kept;
    }
  }
  log_ = std::move(log);
  log_head_ = 0;
  log_touches_ = kept;
  retouched_ = 0;
  stale_free_ = true;
  for (Entry& e : index_)
    if (e.slot != kNone) e.slot = to[e.slot];
  // The rows move along the permutation's cycles, one row carried at a
  // time (no second copy of the values).
  std::vector<float> carry(dim_);
  for (size_t s = 0; s < slots; ++s) {
    if (to[s] == kNone || to[s] == s) continue;
    std::copy_n(values_.data() + s * dim_, dim_, carry.data());
    uint64_t key = keys_[s];
    uint32_t stamp = stamps_[s];
    for (size_t cur = s; to[cur] != kNone;) {
      const uint32_t dst = to[cur];
      to[cur] = kNone;
      std::swap_ranges(carry.begin(), carry.end(), values_.begin() + size_t{dst} * dim_);
      std::swap(key, keys_[dst]);
      std::swap(stamp, stamps_[dst]);
      cur = dst;
    }
  }
  std::fill_n(cursors_, kCursors, kNone);
  run_misses_ = 0;
}

void ResidualStore::ForEachRow(const std::function<void(uint64_t key, const float* values)>& fn) const {
  // Rows addressed by key have no recency: their order is the keys'.
  for (uint64_t k = 0; k < touched_.size(); ++k)
    if (touched_[k]) fn(k, direct_.data() + k * dim_);
  for (size_t i = log_head_; i < log_.size();) {
    uint32_t first, stamp, count;
    i = ReadUse(i, &first, &stamp, &count);
    for (uint32_t j = 0; j < count; ++j)
      if (StampOf(first + j) == stamp + j) fn(keys_[first + j], values_.data() + size_t{first + j} * dim_);
  }
}

const float* ResidualStore::Find(uint64_t key) const {
  if (key < direct_range_) return !touched_.empty() && touched_[key] ? direct_.data() + key * dim_ : nullptr;
  if (index_.empty()) return nullptr;
  const Entry& e = index_[Probe(key)];
  return e.slot == kNone ? nullptr : values_.data() + size_t{e.slot} * dim_;
}

}  // namespace tether
