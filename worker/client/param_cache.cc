#include "worker/client/param_cache.h"

#include <algorithm>
#include <cstring>

#include "core/partition.h"

namespace tether {

ParamCache::ParamCache(std::vector<TableOptions> tables, int num_shards, uint64_t capacity_bytes)
    : num_shards_(num_shards), capacity_bytes_(capacity_bytes) {
  tables_.resize(tables.size());
  for (size_t i = 0; i < tables.size(); ++i) {
    Table& t = tables_[i];
    t.options = tables[i];
    t.enabled = t.options.cache && t.options.staleness >= 0;
    t.dense.resize(num_shards);
    t.read_version.assign(num_shards, UINT64_MAX);
    t.ahead_version.assign(num_shards, UINT64_MAX);
  }
}

void ParamCache::Clear() {
  for (Table& t : tables_) {
    t.rows.clear();
    for (CachedRow& d : t.dense) d = CachedRow();
    t.read_version.assign(num_shards_, UINT64_MAX);
    t.ahead_version.assign(num_shards_, UINT64_MAX);
  }
  lru_.clear();
  bytes_ = 0;
}

bool ParamCache::MakeRoom(uint64_t bytes) {
  if (capacity_bytes_ == 0) return true;
  if (bytes > capacity_bytes_) return false;
  while (bytes_ + bytes > capacity_bytes_) {
    // Kept entries are all in the list, and their bytes are bytes_: with
    // bytes_ > 0 the list is not empty.
    const LruEntry victim = lru_.back();
    Table& t = tables_[victim.table];
    ++stats_.evictions;
    if (victim.shard >= 0) {
      stats_.evicted_bytes += EntryBytes(t.dense[victim.shard].values.size());
      Drop(&t.dense[victim.shard]);
      continue;
    }
    auto it = t.rows.find(victim.key);
    stats_.evicted_bytes += EntryBytes(it->second.values.size());
    Drop(&it->second);
    // A row with a push in flight keeps its pending count (FinishPushRows
    // removes it once the last push is answered).
    if (it->second.pending_pushes == 0) t.rows.erase(it);
  }
  return true;
}

bool ParamCache::Keep(CachedRow* entry, const float* values, uint64_t n, const LruEntry& where) {
  if (n == 0) return false;  // nothing to serve (a shard without a slice)
  const uint64_t bytes = EntryBytes(n);
  if (!MakeRoom(bytes)) {
    ++stats_.not_kept;
    return false;
  }
  entry->values.assign(values, values + n);
  bytes_ += bytes;
  stats_.peak_bytes = std::max(stats_.peak_bytes, bytes_);
  if (capacity_bytes_ > 0) {
    lru_.push_front(where);
    entry->lru = lru_.begin();
  }
  return true;
}

void ParamCache::Drop(CachedRow* entry) {
  if (entry->values.empty()) return;
  bytes_ -= EntryBytes(entry->values.size());
  if (capacity_bytes_ > 0) lru_.erase(entry->lru);
  std::vector<float>().swap(entry->values);  // clear() would keep the memory
}

void ParamCache::StartRead(uint32_t table) {
  std::vector<uint64_t>& rv = tables_[table].read_version;
  std::fill(rv.begin(), rv.end(), UINT64_MAX);
}

void ParamCache::StartReadAhead(uint32_t table) {
  std::vector<uint64_t>& av = tables_[table].ahead_version;
  std::fill(av.begin(), av.end(), UINT64_MAX);
}

void ParamCache::UseReadAhead(uint32_t table) {
  Table& t = tables_[table];
  t.read_version = t.ahead_version;
  std::fill(t.ahead_version.begin(), t.ahead_version.end(), UINT64_MAX);
}

size_t ParamCache::ReadRows(uint32_t table, const uint64_t* keys, size_t n, int64_t clock, float* out,
                            std::vector<uint64_t>* miss_keys, std::vector<uint32_t>* miss_positions, bool ahead) {
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
      Touch(&it->second);
      uint64_t& rv = (ahead ? t.ahead_version : t.read_version)[ShardForKey(keys[i], num_shards_)];
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
  Touch(&t.dense[shard]);
  return true;
}

void ParamCache::NoteReadVersion(uint32_t table, int shard, uint64_t version, bool ahead) {
  uint64_t& rv = (ahead ? tables_[table].ahead_version : tables_[table].read_version)[shard];
  rv = std::min(rv, version);
}

void ParamCache::InsertRows(uint32_t table, const uint64_t* keys, size_t n, const float* values, int64_t row_clock,
                            uint64_t version) {
  Table& t = tables_[table];
  if (!t.enabled) return;
  const uint32_t dim = t.options.dim;
  for (size_t i = 0; i < n; ++i) {
    auto it = t.rows.try_emplace(keys[i]).first;
    CachedRow& row = it->second;
    if (!row.values.empty()) {
      // Same size: overwritten in place, charged as before.
      std::memcpy(row.values.data(), values + i * size_t{dim}, dim * sizeof(float));
      Touch(&row);
    } else if (!Keep(&row, values + i * size_t{dim}, dim, {table, -1, keys[i]})) {
      if (row.pending_pushes == 0) t.rows.erase(it);
      continue;
    }
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
  if (!slice.values.empty()) {
    std::memcpy(slice.values.data(), values, n * sizeof(float));
    Touch(&slice);
  } else if (!Keep(&slice, values, n, {table, shard, 0})) {
    return true;
  }
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
  for (size_t i = 0; i < n; ++i) {
    auto it = t.rows.find(keys[i]);
    if (it == t.rows.end()) continue;
    Drop(&it->second);
    t.rows.erase(it);
  }
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
  Drop(&t.dense[shard]);
  return false;
}

void ParamCache::FinishPushRows(uint32_t table, const uint64_t* keys, size_t n) {
  Table& t = tables_[table];
  --t.pushes_in_flight;
  for (size_t i = 0; i < n; ++i) {
    auto it = t.rows.find(keys[i]);
    if (it == t.rows.end()) continue;  // not reachable: eviction keeps a pending row's entry
    // Values evicted while the push was in flight: nothing left to keep
    // (the reply's values, if any, are kept again by InsertRows).
    if (--it->second.pending_pushes == 0 && it->second.values.empty()) t.rows.erase(it);
  }
}

void ParamCache::FinishPushDense(uint32_t table, int shard) {
  Table& t = tables_[table];
  --t.pushes_in_flight;
  --t.dense[shard].pending_pushes;
}

}  // namespace tether
