#include "worker/client/residual_store.h"

#include <algorithm>
#include <cmath>

namespace tether {

ResidualStore::ResidualStore(uint32_t dim, uint64_t capacity_rows, uint64_t key_range)
    : dim_(std::max<uint32_t>(1, dim)), capacity_(std::max<uint64_t>(1, capacity_rows)) {
  if (key_range > 0 && key_range <= capacity_) direct_range_ = key_range;
}

void ResidualStore::Unlink(uint32_t slot) {
  if (prev_[slot] != kNone) next_[prev_[slot]] = next_[slot];
  else head_ = next_[slot];
  if (next_[slot] != kNone) prev_[next_[slot]] = prev_[slot];
  else tail_ = prev_[slot];
}

void ResidualStore::PushFront(uint32_t slot) {
  prev_[slot] = kNone;
  next_[slot] = head_;
  if (head_ != kNone) prev_[head_] = slot;
  head_ = slot;
  if (tail_ == kNone) tail_ = slot;
}

uint32_t ResidualStore::TakeSlot() {
  if (index_.size() < capacity_) {
    const uint32_t slot = static_cast<uint32_t>(keys_.size());
    keys_.push_back(0);
    prev_.push_back(kNone);
    next_.push_back(kNone);
    values_.resize(values_.size() + dim_);
    return slot;
  }
  // Full: the least recently used row's residual is dropped.
  const uint32_t slot = tail_;
  Unlink(slot);
  index_.erase(keys_[slot]);
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
  auto it = index_.find(key);
  if (it != index_.end()) {
    if (head_ != it->second) {
      Unlink(it->second);
      PushFront(it->second);
    }
    return values_.data() + size_t{it->second} * dim_;
  }
  const uint32_t slot = TakeSlot();
  keys_[slot] = key;
  index_.emplace(key, slot);
  PushFront(slot);
  float* v = values_.data() + size_t{slot} * dim_;
  std::fill(v, v + dim_, 0.0f);
  return v;
}

void ResidualStore::ForEachRow(const std::function<void(uint64_t key, const float* values)>& fn) const {
  // Rows addressed by key have no recency: their order is the keys'.
  for (uint64_t k = 0; k < touched_.size(); ++k)
    if (touched_[k]) fn(k, direct_.data() + k * dim_);
  for (uint32_t slot = tail_; slot != kNone; slot = prev_[slot]) fn(keys_[slot], values_.data() + size_t{slot} * dim_);
}

const float* ResidualStore::Find(uint64_t key) const {
  if (key < direct_range_) return !touched_.empty() && touched_[key] ? direct_.data() + key * dim_ : nullptr;
  auto it = index_.find(key);
  return it == index_.end() ? nullptr : values_.data() + size_t{it->second} * dim_;
}

}  // namespace tether
