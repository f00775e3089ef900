#include "core/partition.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace tether {

std::pair<uint64_t, uint64_t> DenseRange(uint64_t size, int shard, int num_shards) {
  // 128-bit products keep the split exact for tables beyond 2^32 floats.
  auto cut = [&](int s) {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(size) * s) / num_shards);
  };
  return {cut(shard), cut(shard + 1)};
}

namespace {

// MixKey(key) % S as ShardForKey computes it, the reduction chosen once per
// call: a mask for a power of two S (same value for unsigned operands; the
// 64-bit division was about a fifth of the old loop's time at 2 shards).
struct MaskShard {
  uint64_t mask;
  uint32_t operator()(uint64_t key) const { return static_cast<uint32_t>(MixKey(key) & mask); }
};

// Any other S keeps the division: Lemire's 128-bit fastmod (four 64-bit
// multiplies) measured slower than the divider of the AMD EPYC this was
// tuned on, at S = 3 and 7.
struct ModShard {
  uint64_t d;
  uint32_t operator()(uint64_t key) const { return static_cast<uint32_t>(MixKey(key) % d); }
};

// Two shards: shard 1's count is the sum of the ids, and pass 2 keeps both
// write cursors in registers. It writes each key and position at both
// cursors and advances only the owner's; the other write is overwritten by
// the next key of that shard or lands in one slack element, removed at the
// end. No counter in memory, so no write waits on the previous one of its
// shard (every other key at two shards): measured faster than SplitMany.
template <typename Id, typename ShardOf>
void SplitTwo(const std::vector<uint64_t>& keys, ShardOf shard_of, Id* id,
              std::vector<std::vector<uint64_t>>* per_shard, std::vector<std::vector<uint32_t>>* positions) {
  const std::size_t n = keys.size();
  const uint64_t* k = keys.data();
  std::size_t n1 = 0;
  for (std::size_t i = 0; i < n; ++i) {
    id[i] = static_cast<Id>(shard_of(k[i]));
    n1 += id[i];
  }
  const std::size_t n0 = n - n1;
  std::vector<uint64_t>& keys0 = (*per_shard)[0];
  std::vector<uint64_t>& keys1 = (*per_shard)[1];
  std::vector<uint32_t>& pos0 = (*positions)[0];
  std::vector<uint32_t>& pos1 = (*positions)[1];
  keys0.resize(n0 + 1);
  keys1.resize(n1 + 1);
  pos0.resize(n0 + 1);
  pos1.resize(n1 + 1);
  uint64_t* k0 = keys0.data();
  uint64_t* k1 = keys1.data();
  uint32_t* p0 = pos0.data();
  uint32_t* p1 = pos1.data();
  std::size_t c0 = 0, c1 = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t s = id[i];
    k0[c0] = k[i];
    k1[c1] = k[i];
    p0[c0] = static_cast<uint32_t>(i);
    p1[c1] = static_cast<uint32_t>(i);
    c0 += 1 - s;
    c1 += s;
  }
  keys0.resize(n0);
  keys1.resize(n1);
  pos0.resize(n0);
  pos1.resize(n1);
}

// More shards: four interleaved sets of counters, so that a run of keys of
// one shard does not make each count wait for the previous one.
template <typename Id, typename ShardOf>
void SplitMany(const std::vector<uint64_t>& keys, int num_shards, ShardOf shard_of, Id* id,
               std::vector<std::vector<uint64_t>>* per_shard, std::vector<std::vector<uint32_t>>* positions) {
  const std::size_t n = keys.size();
  const uint64_t* k = keys.data();
  // Scratch is on the stack up to kLocalShards: with the counters in a
  // local array the compiler knows the key and position stores cannot
  // change them and keeps no load-after-store chain through memory (held
  // as pointers in memory, the write cursors made pass 2 slower than the
  // old push_back loop).
  constexpr int kLocalShards = 64;
  std::size_t local_count[4 * kLocalShards];
  uint64_t* local_key_out[kLocalShards];
  uint32_t* local_pos_out[kLocalShards];
  std::vector<std::size_t> heap_count;
  std::vector<uint64_t*> heap_key_out;
  std::vector<uint32_t*> heap_pos_out;
  const auto shards = static_cast<std::size_t>(num_shards);
  std::size_t* count = local_count;
  uint64_t** key_out = local_key_out;
  uint32_t** pos_out = local_pos_out;
  if (num_shards > kLocalShards) {
    heap_count.resize(4 * shards);
    heap_key_out.resize(shards);
    heap_pos_out.resize(shards);
    count = heap_count.data();
    key_out = heap_key_out.data();
    pos_out = heap_pos_out.data();
  }
  std::fill(count, count + 4 * shards, std::size_t{0});
  std::size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    for (std::size_t j = 0; j < 4; ++j) {
      const Id s = static_cast<Id>(shard_of(k[i + j]));
      id[i + j] = s;
      ++count[j * shards + s];
    }
  }
  for (; i < n; ++i) {
    const Id s = static_cast<Id>(shard_of(k[i]));
    id[i] = s;
    ++count[s];
  }
  for (std::size_t s = 0; s < shards; ++s) {
    const std::size_t c = count[s] + count[shards + s] + count[2 * shards + s] + count[3 * shards + s];
    (*per_shard)[s].resize(c);
    (*positions)[s].resize(c);
    key_out[s] = (*per_shard)[s].data();
    pos_out[s] = (*positions)[s].data();
    count[s] = 0;  // from here on: keys of shard s written so far
  }
  for (i = 0; i < n; ++i) {
    const Id s = id[i];
    const std::size_t at = count[s]++;
    key_out[s][at] = k[i];
    pos_out[s][at] = static_cast<uint32_t>(i);
  }
}

// Pass 1 hashes every key once, keeps its shard in `shard_of_key` and counts
// each shard's keys; the outputs are then sized once and pass 2 writes every
// key and position in place: no push_back capacity checks, no regrowth, no
// second hash. Outputs are resized from whatever size they had (not cleared
// first), so a reused vector zero-fills only the part it grows by; every
// element is overwritten in pass 2.
template <typename Id, typename ShardOf>
void Split(const std::vector<uint64_t>& keys, int num_shards, ShardOf shard_of, std::vector<Id>* shard_of_key,
           std::vector<std::vector<uint64_t>>* per_shard, std::vector<std::vector<uint32_t>>* positions) {
  const std::size_t n = keys.size();
  if (shard_of_key->size() < n) shard_of_key->resize(n);
  Id* id = shard_of_key->data();
  if (num_shards == 2)
    SplitTwo(keys, shard_of, id, per_shard, positions);
  else
    SplitMany(keys, num_shards, shard_of, id, per_shard, positions);
}

template <typename ShardOf>
void SplitBy(const std::vector<uint64_t>& keys, int num_shards, ShardOf shard_of,
             std::vector<std::vector<uint64_t>>* per_shard, std::vector<std::vector<uint32_t>>* positions) {
  // Per-thread scratch for the shards of one request's keys (one byte a key
  // up to 256 shards), kept between calls like the outputs: a fresh buffer
  // per call would be fresh pages to fault in at 10⁶ keys.
  if (num_shards <= 256) {
    thread_local std::vector<uint8_t> ids;
    Split(keys, num_shards, shard_of, &ids, per_shard, positions);
  } else {
    thread_local std::vector<uint32_t> ids;
    Split(keys, num_shards, shard_of, &ids, per_shard, positions);
  }
}

}  // namespace

void SplitKeysByShard(const std::vector<uint64_t>& keys, int num_shards,
                      std::vector<std::vector<uint64_t>>* per_shard,
                      std::vector<std::vector<uint32_t>>* positions) {
  per_shard->resize(num_shards);
  positions->resize(num_shards);
  const auto s = static_cast<uint64_t>(num_shards);
  if (s == 1) {
    (*per_shard)[0].assign(keys.begin(), keys.end());
    std::vector<uint32_t>& pos = (*positions)[0];
    pos.resize(keys.size());
    for (std::size_t i = 0; i < keys.size(); ++i) pos[i] = static_cast<uint32_t>(i);
  } else if ((s & (s - 1)) == 0) {
    SplitBy(keys, num_shards, MaskShard{s - 1}, per_shard, positions);
  } else {
    SplitBy(keys, num_shards, ModShard{s}, per_shard, positions);
  }
}

}  // namespace tether
