#include "server/model_average.h"

#include <algorithm>
#include <string>

namespace tether {

Status ModelAverager::CheckRound(int rank, int64_t round) const {
  const std::string who = "worker " + std::to_string(rank);
  if (round < merged_before_)
    return Status::FailedPrecondition(who + " sent a model delta for round " + std::to_string(round) +
                                      ", which this shard already merged (rounds < " +
                                      std::to_string(merged_before_) + " are merged)");
  auto it = pending_.find(rank);
  if (it != pending_.end() && it->second.round >= 0 && it->second.round != round)
    return Status::FailedPrecondition(who + " sent a model delta for round " + std::to_string(round) +
                                      " but has not ended round " + std::to_string(it->second.round));
  return Status::OK();
}

Status ModelAverager::AddRows(int rank, int64_t round, uint32_t table, const uint64_t* keys, uint64_t n,
                              uint32_t dim, const float* delta) {
  TETHER_RETURN_IF_ERROR(CheckRound(rank, round));
  Pending& p = pending_[rank];
  TableSums& t = p.tables[table];
  if (t.dim != 0 && t.dim != dim)
    return Status::FailedPrecondition("worker " + std::to_string(rank) + " sent a model delta of table " +
                                      std::to_string(table) + " with rows of " + std::to_string(dim) +
                                      " floats, earlier " + std::to_string(t.dim));
  p.round = round;
  t.dim = dim;
  for (uint64_t i = 0; i < n; ++i) {
    std::vector<float>& row = t.rows[keys[i]];
    if (row.empty()) row.assign(dim, 0.0f);
    const float* d = delta + i * dim;
    for (uint32_t j = 0; j < dim; ++j) row[j] += d[j];
  }
  return Status::OK();
}

Status ModelAverager::AddDense(int rank, int64_t round, uint32_t table, const float* delta, uint64_t n) {
  TETHER_RETURN_IF_ERROR(CheckRound(rank, round));
  Pending& p = pending_[rank];
  TableSums& t = p.tables[table];
  if (t.is_dense && t.dense.size() != n)
    return Status::FailedPrecondition("worker " + std::to_string(rank) + " sent a dense model delta of table " +
                                      std::to_string(table) + " of " + std::to_string(n) + " floats, earlier " +
                                      std::to_string(t.dense.size()));
  p.round = round;
  if (!t.is_dense) t.dense.assign(n, 0.0f);
  t.is_dense = true;
  for (uint64_t j = 0; j < n; ++j) t.dense[j] += delta[j];
  return Status::OK();
}

Status ModelAverager::Complete(int rank, int64_t round, uint64_t updates) {
  TETHER_RETURN_IF_ERROR(CheckRound(rank, round));
  Round& r = rounds_[round];
  r.weight += static_cast<double>(updates);
  if (updates > 0) ++r.deltas;
  auto it = pending_.find(rank);
  if (it == pending_.end()) return Status::OK();
  const float w = static_cast<float>(updates);
  for (auto& [id, mine] : it->second.tables) {
    TableSums& sum = r.tables[id];
    if (mine.is_dense) {
      if (!sum.is_dense) sum.dense.assign(mine.dense.size(), 0.0f);
      sum.is_dense = true;
      for (size_t j = 0; j < mine.dense.size() && j < sum.dense.size(); ++j) sum.dense[j] += w * mine.dense[j];
      continue;
    }
    sum.dim = mine.dim;
    for (auto& [key, d] : mine.rows) {
      std::vector<float>& row = sum.rows[key];
      if (row.empty()) row.assign(mine.dim, 0.0f);
      for (uint32_t j = 0; j < mine.dim; ++j) row[j] += w * d[j];
    }
  }
  pending_.erase(it);
  return Status::OK();
}

uint64_t ModelAverager::Drop(int rank) {
  auto it = pending_.find(rank);
  if (it == pending_.end()) return 0;
  uint64_t dropped = 0;
  for (const auto& [id, t] : it->second.tables) dropped += t.is_dense ? 1 : t.rows.size();
  pending_.erase(it);
  deltas_dropped_ += dropped;
  ++deltas_discarded_;
  return dropped;
}

StatusOr<int64_t> ModelAverager::MergeThrough(int64_t through, const RowsFn& apply_rows, const DenseFn& apply_dense) {
  int64_t merged = 0;
  const float m = static_cast<float>(momentum_);
  std::vector<uint64_t> keys;
  std::vector<float> step;
  while (!rounds_.empty() && rounds_.begin()->first < through) {
    Round r = std::move(rounds_.begin()->second);
    const int64_t round = rounds_.begin()->first;
    rounds_.erase(rounds_.begin());
    merged_before_ = std::max(merged_before_, round + 1);
    if (!(r.weight > 0)) continue;
    const float inv = static_cast<float>(1.0 / r.weight);
    ++merged;
    ++rounds_merged_;
    deltas_merged_ += r.deltas;
    if (momentum_ == 0) {
      for (auto& [id, t] : r.tables) {
        if (t.is_dense) {
          for (float& x : t.dense) x *= inv;
          TETHER_RETURN_IF_ERROR(apply_dense(id, t.dense.data(), t.dense.size()));
          continue;
        }
        keys.clear();
        for (const auto& kv : t.rows) keys.push_back(kv.first);
        std::sort(keys.begin(), keys.end());
        step.resize(keys.size() * t.dim);
        for (size_t i = 0; i < keys.size(); ++i) {
          const std::vector<float>& s = t.rows[keys[i]];
          for (uint32_t j = 0; j < t.dim; ++j) step[i * t.dim + j] = s[j] * inv;
        }
        TETHER_RETURN_IF_ERROR(apply_rows(id, keys.data(), keys.size(), t.dim, step.data()));
      }
      continue;
    }
    // Momentum: v ← m·v + mean for every row with a v or a delta; θ ← θ + v.
    for (auto& [id, t] : r.tables) {
      TableSums& v = velocity_[id];
      if (t.is_dense) {
        if (!v.is_dense) v.dense.assign(t.dense.size(), 0.0f);
        v.is_dense = true;
        continue;
      }
      v.dim = t.dim;
      for (const auto& kv : t.rows)
        if (v.rows.find(kv.first) == v.rows.end()) v.rows[kv.first].assign(t.dim, 0.0f);
    }
    for (auto& [id, v] : velocity_) {
      auto it = r.tables.find(id);
      const TableSums* sum = it == r.tables.end() ? nullptr : &it->second;
      if (v.is_dense) {
        for (size_t j = 0; j < v.dense.size(); ++j)
          v.dense[j] = m * v.dense[j] + (sum != nullptr && j < sum->dense.size() ? sum->dense[j] * inv : 0.0f);
        TETHER_RETURN_IF_ERROR(apply_dense(id, v.dense.data(), v.dense.size()));
        continue;
      }
      keys.clear();
      for (const auto& kv : v.rows) keys.push_back(kv.first);
      std::sort(keys.begin(), keys.end());
      step.resize(keys.size() * v.dim);
      for (size_t i = 0; i < keys.size(); ++i) {
        std::vector<float>& vr = v.rows[keys[i]];
        const std::vector<float>* s = nullptr;
        if (sum != nullptr) {
          auto f = sum->rows.find(keys[i]);
          if (f != sum->rows.end()) s = &f->second;
        }
        for (uint32_t j = 0; j < v.dim; ++j) {
          vr[j] = m * vr[j] + (s != nullptr ? (*s)[j] * inv : 0.0f);
          step[i * v.dim + j] = vr[j];
        }
      }
      TETHER_RETURN_IF_ERROR(apply_rows(id, keys.data(), keys.size(), v.dim, step.data()));
    }
  }
  return merged;
}

}  // namespace tether
