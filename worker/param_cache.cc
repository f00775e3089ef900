#include "worker/param_cache.h"

#include <algorithm>
#include <cstring>

#include "core/partition.h"

namespace tether {

ParamCache::ParamCache(std::vector<TableOptions> tables, int num_shards) : num_shards_(num_shards) {
  tables_.resize(tables.size());
  for (size_t i = 0; i < tables.size(); ++i) {
    Table& t = tables_[i];
    t.options = tables[i];
    t.enabled = t.options.cache && t.options.staleness >= 0;
    t.dense.resize(num_shards);
    t.read_version.assign(num_shards, UINT64_MAX);
  }
}

void ParamCache::Clear() {
  for (Table& t : tables_) {
    t.rows.clear();
    for (CachedRow& d : t.dense) d = CachedRow();
    t.read_version.assign(num_shards_, UINT64_MAX);
  }
}

void ParamCache::StartRead(uint32_t table) {
  std::vector<uint64_t>& rv = tables_[table].read_version;
  std::fill(rv.begin(), rv.end(), UINT64_MAX);
}

size_t ParamCache::ReadRows(uint32_t table, const uint64_t* keys, size_t n, int64_t clock, float* out,
                            std::vector<uint64_t>* miss_keys, std::vector<uint32_t>* miss_positions) {
  miss_keys->clear();
  miss_positions->clear();
  Table& t = tables_[table];
  if (!t.enabled) {
    miss_keys->assign(keys, keys + n);
    for (size_t i = 0; i < n; ++i) miss_positions->push_back(static_cast<uint32_t>(i));
    return 0;
  }
  const uint32_t dim = t.options.dim;
  size_t hits = 0;
  for (size_t i = 0; i < n; ++i) {
    auto it = t.rows.find(keys[i]);
    if (it != t.rows.end() && Fresh(t, it->second, clock)) {
      std::memcpy(out + i * size_t{dim}, it->second.values.data(), dim * sizeof(float));
      uint64_t& rv = t.read_version[ShardForKey(keys[i], num_shards_)];
      rv = std::min(rv, it->second.version);
      ++hits;
    } else {
      miss_keys->push_back(keys[i]);
      miss_positions->push_back(static_cast<uint32_t>(i));
    }
  }
  return hits;
}

bool ParamCache::ReadDense(uint32_t table, int shard, int64_t clock, float* out) {
  Table& t = tables_[table];
  const CachedRow& slice = t.dense[shard];
  if (!t.enabled || !Fresh(t, slice, clock)) return false;
  std::memcpy(out, slice.values.data(), slice.values.size() * sizeof(float));
  t.read_version[shard] = slice.version;
  return true;
}

void ParamCache::NoteReadVersion(uint32_t table, int shard, uint64_t version) {
  uint64_t& rv = tables_[table].read_version[shard];
  rv = std::min(rv, version);
}

void ParamCache::InsertRows(uint32_t table, const uint64_t* keys, size_t n, const float* values, int64_t row_clock,
                            uint64_t version) {
  Table& t = tables_[table];
  if (!t.enabled) return;
  const uint32_t dim = t.options.dim;
  for (size_t i = 0; i < n; ++i) {
    CachedRow& row = t.rows[keys[i]];
    row.values.assign(values + i * dim, values + (i + 1) * dim);
    row.row_clock = row_clock;
    row.version = version;
  }
}

bool ParamCache::InsertDense(uint32_t table, int shard, const float* values, uint64_t n, int64_t row_clock,
                             uint64_t version) {
  Table& t = tables_[table];
  if (!t.enabled) return false;
  const auto [b, e] = DenseRange(t.options.size, shard, num_shards_);
  if (n != e - b) return false;
  CachedRow& slice = t.dense[shard];
  slice.values.assign(values, values + n);
  slice.row_clock = row_clock;
  slice.version = version;
  return true;
}

uint64_t ParamCache::PushVersion(uint32_t table, int shard) const {
  const uint64_t v = tables_[table].read_version[shard];
  return v == UINT64_MAX ? 0 : v;
}

bool ParamCache::StartPushRows(uint32_t table, const uint64_t* keys, size_t n) {
  Table& t = tables_[table];
  if (!t.enabled) return false;
  if (t.options.refresh_on_push) {
    ++t.pushes_in_flight;
    for (size_t i = 0; i < n; ++i) ++t.rows[keys[i]].pending_pushes;
    return true;
  }
  // Own write not in memory: the next read must come from the server.
  for (size_t i = 0; i < n; ++i) t.rows.erase(keys[i]);
  return false;
}

bool ParamCache::StartPushDense(uint32_t table, int shard) {
  Table& t = tables_[table];
  if (!t.enabled) return false;
  if (t.options.refresh_on_push) {
    ++t.pushes_in_flight;
    ++t.dense[shard].pending_pushes;
    return true;
  }
  t.dense[shard].values.clear();
  return false;
}

void ParamCache::FinishPushRows(uint32_t table, const uint64_t* keys, size_t n) {
  Table& t = tables_[table];
  --t.pushes_in_flight;
  for (size_t i = 0; i < n; ++i) --t.rows[keys[i]].pending_pushes;
}

void ParamCache::FinishPushDense(uint32_t table, int shard) {
  Table& t = tables_[table];
  --t.pushes_in_flight;
  --t.dense[shard].pending_pushes;
}

}  // namespace tether
