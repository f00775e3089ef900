// Key partitioning: which server shard owns a key of a row table, and which
// slice of a dense table. Pure functions; thread-safe.
//
// Row tables are hash-partitioned (Li et al., OSDI 2014 use consistent
// ranges; a mixing hash gives the same balance for the dense integer ids of
// XMC features and labels without a key-range map). Dense tables are
// range-partitioned into near-equal contiguous slices.
//
// The hash covers the whole 64-bit key space, so a table of unknown width
// (hashed feature ids, data.hashed_features: any uint64 key) needs no range
// map either: every key, 0 to 2^64 - 1, has exactly one owner.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace tether {

/// SplitMix64 finaliser (Steele et al., OOPSLA 2014): a bijective 64-bit mix.
inline uint64_t MixKey(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// Shard in [0, num_shards) that owns `key` of a row table. num_shards ≥ 1.
inline int ShardForKey(uint64_t key, int num_shards) {
  return static_cast<int>(MixKey(key) % static_cast<uint64_t>(num_shards));
}

/// [begin, end) of a dense table of `size` floats owned by `shard`: shard s
/// gets floor(s·size/S) .. floor((s+1)·size/S), so every index is owned by
/// exactly one shard and slice sizes differ by at most one.
std::pair<uint64_t, uint64_t> DenseRange(uint64_t size, int shard, int num_shards);

/// Splits sorted unique `keys` by owner shard. On return, (*per_shard)[s]
/// holds the keys of shard s (still sorted) and (*positions)[s][i] is the
/// index in `keys` of (*per_shard)[s][i]; keys.size() < 2³². Shard s is
/// ShardForKey(key, num_shards), exactly. Vectors are reused (resized, never
/// shrunk) to avoid per-minibatch allocation. Also keeps a per-thread
/// scratch of one byte per key (four above 256 shards), the size of the
/// largest request split on that thread.
void SplitKeysByShard(const std::vector<uint64_t>& keys, int num_shards,
                      std::vector<std::vector<uint64_t>>* per_shard,
                      std::vector<std::vector<uint32_t>>* positions);

}  // namespace tether
