#include "core/net/key_list_cache.h"

#include <algorithm>

namespace tether {

uint64_t KeyListSignature(const uint64_t* keys, size_t n) {
  // Four independent multiply-rotate lanes (the loop is bound by loads, not
  // by one chain of multiplies), mixed with n at the end.
  constexpr uint64_t kP1 = 0x9e3779b97f4a7c15ull, kP2 = 0xc2b2ae3d27d4eb4full;
  uint64_t a = 0x243f6a8885a308d3ull, b = 0x13198a2e03707344ull, c = 0xa4093822299f31d0ull,
           d = 0x082efa98ec4e6c89ull;
  auto lane = [](uint64_t h, uint64_t k) {
    h ^= k * kP2;
    h = (h << 31) | (h >> 33);
    return h * kP1;
  };
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    a = lane(a, keys[i]);
    b = lane(b, keys[i + 1]);
    c = lane(c, keys[i + 2]);
    d = lane(d, keys[i + 3]);
  }
  for (; i < n; ++i) a = lane(a, keys[i]);
  uint64_t h = a ^ ((b << 17) | (b >> 47)) ^ ((c << 29) | (c >> 35)) ^ ((d << 43) | (d >> 21));
  h ^= static_cast<uint64_t>(n) * kP1;
  // splitmix64's finaliser.
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  h ^= h >> 31;
  return h == 0 ? 1 : h;
}

uint64_t KeyListProbe(const uint64_t* keys, size_t n) {
  uint64_t sample[kKeyListProbes];
  size_t m = 0;
  if (n <= kKeyListProbes) {
    for (; m < n; ++m) sample[m] = keys[m];
  } else {
    for (; m < kKeyListProbes; ++m) sample[m] = keys[(n - 1) * m / (kKeyListProbes - 1)];
  }
  const uint64_t h = KeyListSignature(sample, m) ^ (static_cast<uint64_t>(n) * 0xd6e8feb86659fd93ull);
  const uint64_t id = h & ~(uint64_t{1} << 63);
  return id == 0 ? 1 : id;
}

void KeyListCache::Drop(Index::iterator it) {
  bytes_ -= Charge(it->second->list->size());
  lru_.erase(it->second);
  index_.erase(it);
}

bool KeyListCache::Put(uint32_t table, uint64_t id, List list) {
  const Key key{table, id};
  auto it = index_.find(key);
  if (it != index_.end()) Drop(it);
  const uint64_t charge = Charge(list->size());
  if (charge > capacity_) return false;
  while (bytes_ + charge > capacity_) {
    const Entry& last = lru_.back();
    Drop(index_.find(Key{last.table, last.id}));
    ++stats_.evictions;
  }
  lru_.push_front(Entry{table, id, std::move(list)});
  index_.emplace(key, lru_.begin());
  bytes_ += charge;
  stats_.peak_bytes = std::max(stats_.peak_bytes, bytes_);
  ++stats_.puts;
  return true;
}

KeyListCache::List KeyListCache::Find(uint32_t table, uint64_t id) {
  auto it = index_.find(Key{table, id});
  if (it == index_.end()) {
    ++stats_.misses;
    return nullptr;
  }
  ++stats_.hits;
  lru_.splice(lru_.begin(), lru_, it->second);  // iterators stay valid
  return it->second->list;
}

KeyListCache::List KeyListCache::Peek(uint32_t table, uint64_t id) const {
  auto it = index_.find(Key{table, id});
  return it == index_.end() ? nullptr : it->second->list;
}

void KeyListCache::Erase(uint32_t table, uint64_t id) {
  auto it = index_.find(Key{table, id});
  if (it != index_.end()) Drop(it);
}

void KeyListCache::Clear() {
  lru_.clear();
  index_.clear();
  bytes_ = 0;
}

}  // namespace tether
