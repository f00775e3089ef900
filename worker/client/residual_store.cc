#include "worker/client/residual_store.h"

#include <algorithm>
#include <cmath>

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

void ResidualStore::Touch(uint32_t slot) {
  stamps_[slot] = ++clock_;
  if (log_.size() > log_head_ && log_.back().slot == slot) {
    log_.back().stamp = clock_;
  } else {
    log_.push_back(Use{slot, clock_});
  }
  if (log_.size() - log_head_ > 2 * held_ + 64 || log_head_ > log_.size() / 2 + 64) Compact();
}

// Keeps each slot's last touch only, in order: the recency list.
void ResidualStore::Compact() {
  size_t out = 0;
  for (size_t i = log_head_; i < log_.size(); ++i)
    if (stamps_[log_[i].slot] == log_[i].stamp) log_[out++] = log_[i];
  log_.resize(out);
  log_head_ = 0;
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
  uint32_t slot = kNone;
  while (slot == kNone) {
    const Use t = log_[log_head_++];
    if (stamps_[t.slot] == t.stamp) slot = t.slot;
  }
  Erase(keys_[slot]);
  const float* v = values_.data() + size_t{slot} * dim_;
  for (uint32_t j = 0; j < dim_; ++j) evicted_l1_ += std::fabs(v[j]);
  ++evicted_;
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
  if (!index_.empty()) {
    const Entry& e = index_[Probe(key)];
    if (e.slot != kNone) {
      Touch(e.slot);
      return values_.data() + size_t{e.slot} * dim_;
    }
  }
  const uint32_t slot = TakeSlot();
  // At most 3/4 full: probes stay short.
  if (4 * held_ > 3 * index_.size()) Grow();
  index_[Probe(key)] = Entry{key, slot};
  keys_[slot] = key;
  Touch(slot);
  float* v = values_.data() + size_t{slot} * dim_;
  std::fill(v, v + dim_, 0.0f);
  return v;
}

void ResidualStore::ForEachRow(const std::function<void(uint64_t key, const float* values)>& fn) const {
  // Rows addressed by key have no recency: their order is the keys'.
  for (uint64_t k = 0; k < touched_.size(); ++k)
    if (touched_[k]) fn(k, direct_.data() + k * dim_);
  for (size_t i = log_head_; i < log_.size(); ++i) {
    const uint32_t slot = log_[i].slot;
    if (stamps_[slot] == log_[i].stamp) fn(keys_[slot], values_.data() + size_t{slot} * dim_);
  }
}

const float* ResidualStore::Find(uint64_t key) const {
  if (key < direct_range_) return !touched_.empty() && touched_[key] ? direct_.data() + key * dim_ : nullptr;
  if (index_.empty()) return nullptr;
  const Entry& e = index_[Probe(key)];
  return e.slot == kNone ? nullptr : values_.data() + size_t{e.slot} * dim_;
}

}  // namespace tether
