#include "server/row_eviction.h"

#include <limits>

#include "core/partition.h"

namespace tether {

RowEviction::RowEviction(EvictPolicy policy, uint64_t ttl_clocks, uint64_t seed)
    : policy_(policy), ttl_clocks_(ttl_clocks), rng_(MixKey(seed ^ 0x5bd1e995ull) | 1) {}

void RowEviction::Unlink(uint64_t row) {
  const uint64_t p = prev_[row], n = next_[row];
  if (p == kNone) {
    head_ = n;
  } else {
    next_[p] = n;
  }
  if (n == kNone) {
    tail_ = p;
  } else {
    prev_[n] = p;
  }
}

void RowEviction::PushFront(uint64_t row) {
  prev_[row] = kNone;
  next_[row] = head_;
  if (head_ != kNone) prev_[head_] = row;
  head_ = row;
  if (tail_ == kNone) tail_ = row;
}

void RowEviction::Added(uint64_t row, int64_t clock, uint64_t serial, bool push) {
  prev_.push_back(kNone);
  next_.push_back(kNone);
  clock_.push_back(clock);
  serial_.push_back(serial);
  count_.push_back(push ? 1 : 0);
  PushFront(row);
}

void RowEviction::Touched(uint64_t row, int64_t clock, uint64_t serial, bool push) {
  if (clock > clock_[row]) clock_[row] = clock;
  serial_[row] = serial;
  if (push && count_[row] != std::numeric_limits<uint32_t>::max()) ++count_[row];
  if (head_ == row) return;
  Unlink(row);
  PushFront(row);
}

uint64_t RowEviction::NextRandom() {
  // xorshift64*: a fixed sequence per table, so runs repeat.
  rng_ ^= rng_ >> 12;
  rng_ ^= rng_ << 25;
  rng_ ^= rng_ >> 27;
  return rng_ * 0x2545f4914f6cdd1dull;
}

uint64_t RowEviction::Victim(uint64_t serial) {
  // The tail is the row touched longest ago; if the current request touched
  // it, it touched every row (touches move rows to the head).
  if (tail_ == kNone || serial_[tail_] == serial) return kNone;
  if (policy_ != LFU) return tail_;
  uint64_t best = kNone;
  for (int s = 0; s < kSamples; ++s) {
    const uint64_t r = NextRandom() % rows();
    if (serial_[r] == serial) continue;
    if (best == kNone || count_[r] < count_[best] || (count_[r] == count_[best] && clock_[r] < clock_[best]) ||
        (count_[r] == count_[best] && clock_[r] == clock_[best] && r < best))
      best = r;
  }
  // Every sample was a row of this request: the least recently touched
  // row, which is not.
  return best == kNone ? tail_ : best;
}

uint64_t RowEviction::Expired(int64_t clock, uint64_t serial) const {
  if (policy_ != TTL || tail_ == kNone || serial_[tail_] == serial) return kNone;
  // Clocks only grow, so the tail (oldest touch) expires first.
  return clock - clock_[tail_] >= static_cast<int64_t>(ttl_clocks_) ? tail_ : kNone;
}

void RowEviction::Removed(uint64_t row) {
  Unlink(row);
  const uint64_t last = rows() - 1;
  if (row != last) {
    // The last row takes `row`'s number: its neighbours point at it there.
    const uint64_t p = prev_[last], n = next_[last];
    prev_[row] = p;
    next_[row] = n;
    if (p == kNone) {
      head_ = row;
    } else {
      next_[p] = row;
    }
    if (n == kNone) {
      tail_ = row;
    } else {
      prev_[n] = row;
    }
    clock_[row] = clock_[last];
    serial_[row] = serial_[last];
    count_[row] = count_[last];
  }
  prev_.pop_back();
  next_.pop_back();
  clock_.pop_back();
  serial_.pop_back();
  count_.pop_back();
}

Status RowEviction::Restore(const std::vector<uint64_t>& order, const std::vector<int64_t>& clocks,
                            const std::vector<uint32_t>& counts, uint64_t sample_state,
                            const std::vector<uint64_t>* serials) {
  const size_t n = order.size();
  if (clocks.size() != n || counts.size() != n || (serials != nullptr && serials->size() != n))
    return Status::InvalidArgument("eviction metadata of " + std::to_string(n) + " rows has " +
                                   std::to_string(clocks.size()) + " clocks and " + std::to_string(counts.size()) +
                                   " counts");
  std::vector<bool> seen(n, false);
  for (uint64_t r : order) {
    if (r >= n || seen[r]) return Status::InvalidArgument("the recency order is not a permutation of the rows");
    seen[r] = true;
  }
  prev_.assign(n, kNone);
  next_.assign(n, kNone);
  for (size_t i = 0; i < n; ++i) {
    if (i > 0) prev_[order[i]] = order[i - 1];
    if (i + 1 < n) next_[order[i]] = order[i + 1];
  }
  head_ = n == 0 ? kNone : order.front();
  tail_ = n == 0 ? kNone : order.back();
  clock_ = clocks;
  if (serials != nullptr) {
    serial_ = *serials;
  } else {
    serial_.assign(n, 0);  // no request is in progress; ServerTable's serials start above 0
  }
  count_ = counts;
  rng_ = sample_state;
  return Status::OK();
}

std::vector<uint64_t> RowEviction::RecencyOrder() const {
  std::vector<uint64_t> order;
  for (uint64_t r = head_; r != kNone; r = next_[r]) order.push_back(r);
  return order;
}

}  // namespace tether
