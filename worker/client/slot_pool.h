// SlotPool: records addressed by a small index and recycled through a free
// list, so that a record per message in flight costs no allocation once the
// pool has grown to the most ever in flight at once (bounded by the request
// window: max_outstanding × shards). A recycled record keeps its members as
// they were (vectors keep their capacity); the taker resets what it uses.
//
// Not thread-safe. References from operator[] stay valid until the next
// Take() (which may grow the pool).
#pragma once

#include <cstdint>
#include <vector>

namespace tether {

template <typename T>
class SlotPool {
 public:
  /// A free slot's index (a new one when none is free).
  uint32_t Take() {
    if (free_.empty()) {
      slots_.emplace_back();
      return static_cast<uint32_t>(slots_.size() - 1);
    }
    const uint32_t i = free_.back();
    free_.pop_back();
    return i;
  }
  /// Gives slot `i` back (taken before and not given back since).
  void Give(uint32_t i) { free_.push_back(i); }
  T& operator[](uint32_t i) { return slots_[i]; }
  const T& operator[](uint32_t i) const { return slots_[i]; }
  /// Slots ever made (taken or free).
  size_t size() const { return slots_.size(); }

 private:
  std::vector<T> slots_;
  std::vector<uint32_t> free_;
};

}  // namespace tether
