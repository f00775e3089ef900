#include "core/partition.h"

#include <cstddef>

namespace tether {

std::pair<uint64_t, uint64_t> DenseRange(uint64_t size, int shard, int num_shards) {
  // 128-bit products keep the split exact for tables beyond 2^32 floats.
  auto cut = [&](int s) {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(size) * s) / num_shards);
  };
  return {cut(shard), cut(shard + 1)};
}

void SplitKeysByShard(const std::vector<uint64_t>& keys, int num_shards,
                      std::vector<std::vector<uint64_t>>* per_shard,
                      std::vector<std::vector<uint32_t>>* positions) {
  per_shard->resize(num_shards);
  positions->resize(num_shards);
  for (int s = 0; s < num_shards; ++s) {
    (*per_shard)[s].clear();
    (*positions)[s].clear();
  }
  for (std::size_t i = 0; i < keys.size(); ++i) {
    int s = ShardForKey(keys[i], num_shards);
    (*per_shard)[s].push_back(keys[i]);
    (*positions)[s].push_back(static_cast<uint32_t>(i));
  }
}

}  // namespace tether
