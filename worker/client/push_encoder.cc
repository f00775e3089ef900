#include "worker/client/push_encoder.h"

#include <algorithm>

#include "core/wire_codec.h"
#include "worker/client/push_writer.h"

namespace tether {
namespace {

// A residual row's bookkeeping beside its floats (index entries, key, stamp, recency log).
constexpr uint64_t kResidualRowOverheadBytes = 60;  // residual_store.h's estimate

}  // namespace

PushEncoder::PushEncoder(std::vector<Table> tables, uint64_t residual_bytes) : tables_(std::move(tables)) {
  rows_.resize(tables_.size());
  dense_.resize(tables_.size());
  for (size_t t = 0; t < tables_.size(); ++t) {
    const Table& spec = tables_[t];
    if (!IsHalfWire(spec.wire) || !spec.error_feedback) continue;
    if (spec.dense) {
      dense_[t].assign(spec.size, 0.0f);
      continue;
    }
    uint64_t capacity = std::max<uint64_t>(1, residual_bytes / (uint64_t{spec.dim} * sizeof(float) +
                                                                kResidualRowOverheadBytes));
    if (spec.num_keys > 0) capacity = std::min(capacity, spec.num_keys);
    capacity = std::min(capacity, ResidualStore::kMaxCapacityRows);
    rows_[t] = std::make_unique<ResidualStore>(spec.dim, capacity, spec.num_keys);
  }
}

WireEncoding PushEncoder::wire(uint32_t table) const { return table < tables_.size() ? tables_[table].wire : FP32; }

bool PushEncoder::IsHalf(uint32_t table) const { return IsHalfWire(wire(table)); }

uint64_t PushEncoder::EncodeInRuns(WireEncoding wire, uint32_t dim, const float* grads, const uint32_t* rows,
                                   size_t begin, size_t end, float scale, float* residuals, unsigned char* out) {
  const size_t row_bytes = size_t{dim} * WireBytesPerValue(wire);
  uint64_t saturated = 0;
  for (size_t i = begin; i < end;) {
    size_t run_end = end;
    if (rows != nullptr)
      for (run_end = i + 1; run_end < end && rows[run_end] == rows[i] + (run_end - i);) ++run_end;
    const float* g = grads + (rows != nullptr ? size_t{rows[i]} : i) * dim;
    float* r = residuals != nullptr ? residuals + i * dim : nullptr;
    saturated += EncodeValues(g, (run_end - i) * dim, scale, wire, r, out + i * row_bytes);
    i = run_end;
  }
  return saturated;
}

zmq::message_t PushEncoder::EncodeRows(uint32_t table, const uint64_t* keys, size_t n, const float* grads,
                                       const uint32_t* rows, float scale, FramePool* pool,
                                       const ResidualStore::KeyList& list) {
  PushRowWriter writer(this, table, keys, n, grads, rows, scale, pool, list);
  return writer.TakeFrame();
}

zmq::message_t PushEncoder::EncodeDense(uint32_t table, uint64_t begin, uint64_t end, const float* grad, float scale,
                                        FramePool* pool) {
  PushDenseWriter writer(this, table, begin, end, grad, scale, pool);
  return writer.TakeFrame();
}

std::vector<ResidualTable> PushEncoder::SaveResiduals() const {
  std::vector<ResidualTable> out;
  for (size_t t = 0; t < tables_.size(); ++t) {
    ResidualTable r;
    r.table = tables_[t].name;
    if (!dense_[t].empty()) {
      r.dense = true;
      r.values = dense_[t];
    } else if (const ResidualStore* store = rows_[t].get(); store != nullptr) {
      r.dim = store->dim();
      r.keys.reserve(store->rows());
      r.values.reserve(store->rows() * store->dim());
      store->ForEachRow([&r, dim = store->dim()](uint64_t key, const float* v) {
        r.keys.push_back(key);
        r.values.insert(r.values.end(), v, v + dim);
      });
      r.evicted = store->evicted();
      r.evicted_l1 = store->evicted_l1();
    } else {
      continue;
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<std::string> PushEncoder::RestoreResiduals(const std::vector<ResidualTable>& tables) {
  std::vector<std::string> skipped;
  for (const ResidualTable& r : tables) {
    size_t t = 0;
    while (t < tables_.size() && tables_[t].name != r.table) ++t;
    ResidualStore* store = t < tables_.size() ? rows_[t].get() : nullptr;
    if (t < tables_.size() && r.dense && dense_[t].size() == r.values.size()) {
      dense_[t] = r.values;
    } else if (store != nullptr && !r.dense && r.dim == store->dim()) {
      for (size_t i = 0; i < r.keys.size(); ++i)
        std::copy_n(r.values.data() + i * r.dim, r.dim, store->Row(r.keys[i]));
      // Rows dropped while loading (a smaller store than the checkpoint's)
      // count with the checkpoint's own.
      store->SetEvicted(r.evicted + store->evicted(), r.evicted_l1 + store->evicted_l1());
    } else {
      skipped.push_back(r.table);
    }
  }
  return skipped;
}

PushEncoder::Stats PushEncoder::stats() const {
  Stats s;
  s.saturated = saturated_;
  for (const auto& store : rows_) {
    if (!store) continue;
    s.residual_rows += store->rows();
    s.residual_evicted += store->evicted();
    s.residual_evicted_l1 += store->evicted_l1();
  }
  return s;
}

const ResidualStore* PushEncoder::residuals(uint32_t table) const {
  return table < rows_.size() ? rows_[table].get() : nullptr;
}

const float* PushEncoder::dense_residuals(uint32_t table) const {
  return table < dense_.size() && !dense_[table].empty() ? dense_[table].data() : nullptr;
}

}  // namespace tether
