// Tables for the kept-model tests (server/kept_model_test.cc,
// server/kept_model_checkpoint_test.cc): a row table "w" of dim kKeptDim
// and this shard's slice [2, 8) of an 8-float dense table "b", both
// initialized uniformly in ±0.5 (seed 7) and stepped by `optimizer` at
// learning rate 0.1, with the steps and reads the tests make on them.
//
// Errors are test failures where they happen. Thread-safety: none (a
// test's own thread).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "server/kept_model.h"
#include "server/table.h"

namespace tether::testing {

inline constexpr uint32_t kKeptDim = 3;

inline TableSpec KeptSpec(uint32_t id, TableSpec::Kind kind, OptimizerType optimizer) {
  TableSpec spec;
  spec.set_id(id);
  spec.set_name(kind == TableSpec::ROW ? "w" : "b");
  spec.set_kind(kind);
  if (kind == TableSpec::ROW) spec.set_dim(kKeptDim);
  if (kind == TableSpec::DENSE) spec.set_size(8);
  spec.mutable_init()->set_kind(TableInitializer::UNIFORM);
  spec.mutable_init()->set_bound(0.5f);
  spec.mutable_init()->set_seed(7);
  spec.mutable_optimizer()->set_type(optimizer);
  spec.mutable_optimizer()->set_learning_rate(0.1f);
  return spec;
}

/// Table 0 the row table, table 1 the dense slice [2, 8).
inline KeptModel::Tables MakeKeptTables(OptimizerType optimizer) {
  KeptModel::Tables t;
  t.push_back(std::make_unique<ServerTable>(KeptSpec(0, TableSpec::ROW, optimizer), 0, 0));
  t.push_back(std::make_unique<ServerTable>(KeptSpec(1, TableSpec::DENSE, optimizer), 2, 8));
  return t;
}

/// One step: gradient `g` on rows `keys` of table 0, −g on table 1's slice.
inline void StepKept(KeptModel::Tables& t, const std::vector<uint64_t>& keys, float g) {
  std::vector<float> rows(keys.size() * kKeptDim, g);
  ASSERT_TRUE(t[0]->PushRows(keys.data(), keys.size(), rows.data()).ok());
  std::vector<float> dense(6, -g);
  ASSERT_TRUE(t[1]->PushDense(dense.data()).ok());
}

/// Rows `keys` of table 0, kKeptDim floats each.
inline std::vector<float> KeptRows(KeptModel::Tables& t, const std::vector<uint64_t>& keys) {
  std::vector<float> out(keys.size() * kKeptDim);
  EXPECT_TRUE(t[0]->PullRows(keys.data(), keys.size(), out.data()).ok());
  return out;
}

/// Table 1's 6 floats.
inline std::vector<float> KeptDense(const KeptModel::Tables& t) {
  std::vector<float> out(6);
  t[1]->PullDense(out.data());
  return out;
}

}  // namespace tether::testing
