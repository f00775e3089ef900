#include "worker/client/local_replica.h"

#include <algorithm>
#include <cstring>

#include <glog/logging.h>

#include "worker/client/client.h"

namespace tether {

LocalReplica::LocalReplica(const std::vector<TableSpec>& tables, WorkerClient* client) : client_(client) {
  tables_.resize(tables.size());
  for (size_t i = 0; i < tables.size(); ++i) {
    Table& t = tables_[i];
    t.spec = tables[i];
    t.optimizer = std::make_unique<Optimizer>(t.spec.optimizer());
    t.width = IsDenseTable(t.spec) ? t.spec.size() : t.spec.dim();
    t.state_floats = t.optimizer->StateFloats(t.width);
  }
}

RequestHandle LocalReplica::Fetch(Table& t, uint32_t table, const std::vector<uint64_t>& keys) {
  missing_.clear();
  for (uint64_t k : keys)
    if (t.slot.find(k) == t.slot.end()) missing_.push_back(k);
  if (missing_.empty()) return client_->servers().Done();
  const uint64_t dim = t.width;
  fetched_.resize(missing_.size() * dim);
  RequestHandle h = client_->servers().PullRows(table, missing_, fetched_.data());
  if (!h.Wait().ok()) return h;
  for (size_t i = 0; i < missing_.size(); ++i) {
    const uint32_t s = static_cast<uint32_t>(t.keys.size());
    t.slot.emplace(missing_[i], s);
    t.keys.push_back(missing_[i]);
    t.theta.insert(t.theta.end(), fetched_.begin() + i * dim, fetched_.begin() + (i + 1) * dim);
    t.base.insert(t.base.end(), fetched_.begin() + i * dim, fetched_.begin() + (i + 1) * dim);
  }
  stats_.rows_fetched += missing_.size();
  return h;
}

RequestHandle LocalReplica::FetchDense(Table& t, uint32_t table) {
  if (t.dense_held) return client_->servers().Done();
  t.theta.resize(t.width);
  RequestHandle h = client_->servers().PullDense(table, t.theta.data());
  if (!h.Wait().ok()) return h;
  t.base = t.theta;
  t.dense_held = true;
  ++stats_.rows_fetched;
  return h;
}

RequestHandle LocalReplica::PullRows(uint32_t table, const std::vector<uint64_t>& keys, float* out) {
  Table& t = tables_[table];
  RequestHandle h = Fetch(t, table, keys);
  if (!h.status().ok()) return h;
  const uint64_t dim = t.width;
  for (size_t i = 0; i < keys.size(); ++i)
    std::memcpy(out + i * dim, t.theta.data() + size_t{t.slot[keys[i]]} * dim, dim * sizeof(float));
  return h;
}

RequestHandle LocalReplica::PullDense(uint32_t table, float* out) {
  Table& t = tables_[table];
  RequestHandle h = FetchDense(t, table);
  if (!h.status().ok()) return h;
  std::memcpy(out, t.theta.data(), t.width * sizeof(float));
  return h;
}

RequestHandle LocalReplica::PushRows(uint32_t table, const std::vector<uint64_t>& keys, const float* grads) {
  Table& t = tables_[table];
  RequestHandle h = Fetch(t, table, keys);
  if (!h.status().ok()) return h;
  const uint64_t dim = t.width;
  float none = 0;
  for (size_t i = 0; i < keys.size(); ++i) {
    float* state = &none;
    if (t.state_floats > 0) {
      std::vector<float>& st = t.row_state[keys[i]];
      if (st.empty()) {
        st.resize(t.state_floats);
        t.optimizer->InitState(st.data(), dim);
      }
      state = st.data();
    }
    // A non-finite step stays local (the server refuses the delta that
    // would carry it, failing the run: C08).
    (void)t.optimizer->Apply(t.theta.data() + size_t{t.slot[keys[i]]} * dim, state, grads + i * dim, dim);
  }
  ++t.pushes;
  return h;
}

RequestHandle LocalReplica::PushDense(uint32_t table, const float* grad) {
  Table& t = tables_[table];
  RequestHandle h = FetchDense(t, table);
  if (!h.status().ok()) return h;
  float none = 0;
  if (t.state_floats > 0 && t.dense_state.empty()) {
    t.dense_state.resize(t.state_floats);
    t.optimizer->InitState(t.dense_state.data(), t.width);
  }
  (void)t.optimizer->Apply(t.theta.data(), t.state_floats > 0 ? t.dense_state.data() : &none, grad, t.width);
  ++t.pushes;
  return h;
}

uint64_t LocalReplica::EndPeriod() {
  uint64_t updates = 0;
  std::vector<uint32_t> order;
  std::vector<uint64_t> keys;
  std::vector<float> delta;
  for (uint32_t id = 0; id < tables_.size(); ++id) {
    Table& t = tables_[id];
    updates = std::max(updates, t.pushes);
    const uint64_t dim = t.width;
    if (IsDenseTable(t.spec)) {
      if (t.dense_held && t.pushes > 0) {
        delta.resize(dim);
        for (uint64_t j = 0; j < dim; ++j) delta[j] = t.theta[j] - t.base[j];
        (void)client_->servers().PushDenseDelta(id, delta.data());  // errors are sticky
        ++stats_.delta_rows;
      }
    } else if (t.pushes > 0) {
      // Keys sorted (the wire's order), rows whose delta is all zero left
      // out (their Δ is 0 anyway).
      order.resize(t.keys.size());
      for (uint32_t s = 0; s < order.size(); ++s) order[s] = s;
      std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return t.keys[a] < t.keys[b]; });
      keys.clear();
      delta.clear();
      for (uint32_t s : order) {
        const float* th = t.theta.data() + size_t{s} * dim;
        const float* b0 = t.base.data() + size_t{s} * dim;
        bool moved = false;
        for (uint64_t j = 0; j < dim && !moved; ++j) moved = th[j] != b0[j];
        if (!moved) continue;
        keys.push_back(t.keys[s]);
        for (uint64_t j = 0; j < dim; ++j) delta.push_back(th[j] - b0[j]);
      }
      if (!keys.empty()) (void)client_->servers().PushRowDeltas(id, keys, delta.data());
      stats_.delta_rows += keys.size();
    }
    t.slot.clear();
    t.keys.clear();
    t.theta.clear();
    t.base.clear();
    t.dense_held = false;
    t.pushes = 0;
  }
  ++stats_.periods;
  stats_.local_updates += updates;
  if (updates > 0) ++stats_.deltas_pushed;
  return updates;
}

}  // namespace tether
