#include "server/kept_model.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "core/table_spec.h"

namespace tether {

bool KeptModel::Keep(int epoch, const Tables& tables) {
  if (epoch <= epoch_) return false;
  copies_.assign(tables.size(), TableCopy());
  for (size_t i = 0; i < tables.size(); ++i) {
    const ServerTable& t = *tables[i];
    TableCopy& c = copies_[i];
    if (IsDenseTable(t.spec())) {
      const uint64_t n = t.dense_end() - t.dense_begin();
      c.weights.assign(t.raw_data(), t.raw_data() + n);
      continue;
    }
    // Weights only: the first dim floats of each row's stride.
    const uint32_t dim = t.spec().dim(), stride = t.stride();
    c.rows = t.num_rows();
    c.weights.resize(c.rows * dim);
    const float* src = t.raw_data();
    for (uint64_t r = 0; r < c.rows; ++r)
      std::copy(src + r * stride, src + r * stride + dim, c.weights.data() + r * dim);
  }
  epoch_ = epoch;
  restored_ = false;
  return true;
}

StatusOr<bool> KeptModel::Restore(int epoch, Tables* tables) {
  if (epoch_ == 0)
    return Status::FailedPrecondition("no copy of the model was kept, but the workers ask for epoch " +
                                      std::to_string(epoch) + "'s");
  if (epoch != epoch_)
    return Status::FailedPrecondition("the copy of the model kept here is epoch " + std::to_string(epoch_) +
                                      "'s, but the workers ask for epoch " + std::to_string(epoch) +
                                      "'s (the workers disagree on the best epoch)");
  if (restored_) return false;
  if (tables->size() != copies_.size())
    return Status::InvalidArgument("the copy of epoch " + std::to_string(epoch_) + " holds " +
                                   std::to_string(copies_.size()) + " tables, this shard " +
                                   std::to_string(tables->size()));
  for (size_t i = 0; i < copies_.size(); ++i)
    if (IsRowTable((*tables)[i]->spec()) && (*tables)[i]->num_rows() < copies_[i].rows)
      return Status::InvalidArgument("table " + (*tables)[i]->spec().name() + " holds fewer rows (" +
                                     std::to_string((*tables)[i]->num_rows()) + ") than its copy of epoch " +
                                     std::to_string(epoch_) + " (" + std::to_string(copies_[i].rows) + ")");
  for (size_t i = 0; i < copies_.size(); ++i) {
    Put(copies_[i], (*tables)[i].get());
    (*tables)[i]->ResetDelayBackups();  // delay compensation: read nothing of the kept model yet
  }
  restored_ = true;
  return true;
}

void KeptModel::Put(const TableCopy& copy, ServerTable* t) {
  float* dst = t->mutable_raw_data();
  if (IsDenseTable(t->spec())) {
    std::copy(copy.weights.begin(), copy.weights.end(), dst);
    return;
  }
  const uint32_t dim = t->spec().dim(), stride = t->stride();
  for (uint64_t r = 0; r < copy.rows; ++r)
    std::copy(copy.weights.data() + r * dim, copy.weights.data() + (r + 1) * dim, dst + r * stride);
  if (t->num_rows() == copy.rows) return;
  // Rows first touched after the cut (rare: every epoch trains the same
  // rows): back to the weights they had before they existed.
  const std::vector<uint64_t> keys = t->KeysByRow();
  for (uint64_t r = copy.rows; r < keys.size(); ++r) t->InitRowWeights(r, keys[r]);
}

void KeptModel::Save(const Tables& tables, KeptModelState* out) const {
  out->set_epoch(epoch_);
  for (size_t i = 0; i < copies_.size() && i < tables.size(); ++i) {
    const ServerTable& t = *tables[i];
    const TableCopy& c = copies_[i];
    KeptModelState::Table* e = out->add_tables();
    e->set_id(static_cast<uint32_t>(i));
    e->set_name(t.spec().name());
    if (IsDenseTable(t.spec())) {
      e->set_dense_begin(t.dense_begin());
      e->set_dense_end(t.dense_end());
    } else {
      // Rows are only appended: the copy's rows are the first c.rows now.
      const std::vector<uint64_t> keys = t.KeysByRow();
      e->set_rows(c.rows);
      e->mutable_keys()->Reserve(static_cast<int>(c.rows));
      for (uint64_t r = 0; r < c.rows && r < keys.size(); ++r) e->add_keys(keys[r]);
    }
    e->set_weights(reinterpret_cast<const char*>(c.weights.data()), c.weights.size() * sizeof(float));
  }
}

Status KeptModel::Load(const KeptModelState& state, const Tables& tables) {
  if (state.epoch() <= 0) return Status::InvalidArgument("kept epoch " + std::to_string(state.epoch()));
  if (static_cast<size_t>(state.tables_size()) != tables.size())
    return Status::InvalidArgument("holds " + std::to_string(state.tables_size()) + " tables, the job " +
                                   std::to_string(tables.size()));
  std::vector<TableCopy> copies(tables.size());
  for (size_t i = 0; i < tables.size(); ++i) {
    const KeptModelState::Table& e = state.tables(static_cast<int>(i));
    const ServerTable& t = *tables[i];
    const std::string what = "table '" + e.name() + "'";
    if (e.id() != i || e.name() != t.spec().name())
      return Status::InvalidArgument(what + " (id " + std::to_string(e.id()) + ") is not the job's table " +
                                     std::to_string(i) + " '" + t.spec().name() + "'");
    uint64_t floats = 0;
    if (IsDenseTable(t.spec())) {
      if (e.dense_begin() != t.dense_begin() || e.dense_end() != t.dense_end())
        return Status::InvalidArgument(what + ": slice [" + std::to_string(e.dense_begin()) + ", " +
                                       std::to_string(e.dense_end()) + "), this shard holds [" +
                                       std::to_string(t.dense_begin()) + ", " + std::to_string(t.dense_end()) + ")");
      floats = t.dense_end() - t.dense_begin();
    } else {
      const std::vector<uint64_t> keys = t.KeysByRow();
      if (e.rows() > keys.size() || static_cast<uint64_t>(e.keys_size()) != e.rows() ||
          !std::equal(e.keys().begin(), e.keys().end(), keys.begin()))
        return Status::InvalidArgument(what + ": its " + std::to_string(e.rows()) +
                                       " rows are not the first rows the shard restored (" +
                                       std::to_string(keys.size()) + " rows)");
      copies[i].rows = e.rows();
      floats = e.rows() * t.spec().dim();
    }
    if (e.weights().size() != floats * sizeof(float))
      return Status::InvalidArgument(what + ": " + std::to_string(e.weights().size()) + " bytes of weights, " +
                                     std::to_string(floats * sizeof(float)) + " expected");
    copies[i].weights.resize(floats);
    std::memcpy(copies[i].weights.data(), e.weights().data(), e.weights().size());
  }
  copies_ = std::move(copies);
  epoch_ = state.epoch();
  restored_ = false;
  return Status::OK();
}

void KeptModel::SaveState(KeptModelState* state, const Tables& tables) const {
  state->Clear();
  state->set_epoch(epoch_);
  if (epoch_ == 0) return;
  Save(tables, state);
  state->set_restored(restored_);
}

Status KeptModel::RestoreState(const KeptModelState& state, const Tables& tables) {
  if (state.epoch() < 0)
    return Status::DataLoss("shard state: kept.epoch " + std::to_string(state.epoch()) + " is negative");
  if (state.epoch() == 0) {
    if (state.tables_size() > 0 || state.restored())
      return Status::DataLoss("shard state: kept holds tables or a restore without a copy (epoch 0)");
    epoch_ = 0;
    restored_ = false;
    copies_.clear();
    return Status::OK();
  }
  if (Status st = Load(state, tables); !st.ok()) return Status::DataLoss("shard state: kept: " + st.message());
  restored_ = state.restored();
  return Status::OK();
}

uint64_t KeptModel::bytes() const {
  uint64_t n = 0;
  for (const TableCopy& c : copies_) n += c.weights.size() * sizeof(float);
  return n;
}

}  // namespace tether
