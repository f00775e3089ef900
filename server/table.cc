#include "server/table.h"

#include <cstring>

#include "core/partition.h"

namespace tether {

float InitialWeight(uint64_t seed, uint32_t table_id, uint64_t key, uint32_t j, float bound) {
  uint64_t h = MixKey(MixKey(seed ^ (static_cast<uint64_t>(table_id) << 56)) ^ key);
  h = MixKey(h + j);
  // Top 24 bits → uniform in [0, 1).
  float u = static_cast<float>(h >> 40) * (1.0f / 16777216.0f);
  return (2.0f * u - 1.0f) * bound;
}

ServerTable::ServerTable(const TableSpec& spec, uint64_t seed, uint64_t begin, uint64_t end)
    : spec_(spec), optimizer_(spec.optimizer), seed_(seed), begin_(begin), end_(end) {
  stride_ = static_cast<uint32_t>(spec.dim + optimizer_.StateFloats(spec.dim));
  if (spec.kind == TableKind::kDense) {
    const uint64_t n = end - begin;
    data_.resize(n + optimizer_.StateFloats(n));
    for (uint64_t i = 0; i < n; ++i)
      data_[i] = spec.init == InitKind::kZeros ? 0.0f
                                               : InitialWeight(seed, spec.id, 0, static_cast<uint32_t>(begin + i), spec.init_bound);
    optimizer_.InitState(data_.data() + n, n);
  }
}

float* ServerTable::Row(uint64_t key) {
  auto [it, inserted] = index_.try_emplace(key, data_.size());
  if (inserted) {
    const uint32_t dim = spec_.dim;
    data_.resize(data_.size() + stride_);
    float* row = data_.data() + it->second;
    for (uint32_t j = 0; j < dim; ++j)
      row[j] = spec_.init == InitKind::kZeros ? 0.0f : InitialWeight(seed_, spec_.id, key, j, spec_.init_bound);
    optimizer_.InitState(row + dim, dim);
    return row;
  }
  return data_.data() + it->second;
}

void ServerTable::PullRows(const uint64_t* keys, uint64_t n, float* out) {
  const uint32_t dim = spec_.dim;
  for (uint64_t i = 0; i < n; ++i) std::memcpy(out + i * dim, Row(keys[i]), dim * sizeof(float));
}

void ServerTable::PushRows(const uint64_t* keys, uint64_t n, const float* g, float lr_scale) {
  ++version_;
  const uint32_t dim = spec_.dim;
  for (uint64_t i = 0; i < n; ++i) {
    float* row = Row(keys[i]);
    optimizer_.Apply(row, row + dim, g + i * dim, dim, lr_scale);
  }
}

void ServerTable::PullDense(float* out) const {
  std::memcpy(out, data_.data(), (end_ - begin_) * sizeof(float));
}

void ServerTable::PushDense(const float* g, float lr_scale) {
  ++version_;
  const uint64_t n = end_ - begin_;
  optimizer_.Apply(data_.data(), data_.data() + n, g, n, lr_scale);
}

}  // namespace tether
