// The small XMC job the model tests drive through the Model interface
// (tests/sampled_xmc_model_test.cc, tests/xmc_input_dropout_test.cc): F = 12
// features, H = 4 hidden units, L = 9 labels, tables that start at zeros and
// take pushes as they are (SUM), one in-process shard, fixed weights and a
// minibatch of 3 rows. Weights are set exactly by pushing them onto the zero
// tables, and a minibatch's gradients read exactly from a second, fresh
// shard the model pushes into (0 + g = g).
//
// Header-only; thread-compatible (one test thread per Shard).
#pragma once

#include <cstdint>
#include <memory>
#include <numeric>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "core/status.h"
#include "input/csr.h"
#include "tests/testing/cluster.h"
#include "worker/client/client.h"
#include "worker/models/model.h"

namespace tether::testing::xmc {

inline constexpr int64_t kF = 12, kH = 4, kL = 9, kRow = kH + 1;  // a w2 row: [weights(H), bias]
inline constexpr uint64_t kSeed = 7;                              // train.seed

/// XMC_MLP, softmax loss, train.seed kSeed; every table starts at zeros and
/// takes pushes as they are (SUM); no cache, pulls never wait (ASP).
inline JobConfig BaseJob() {
  JobConfig c = SgdJob(/*servers=*/1, /*workers=*/1, kF, kL, kH, /*learning_rate=*/1.0f, /*timeout_ms=*/30000);
  c.mutable_model()->set_type(XMC_MLP);
  c.mutable_model()->set_loss(SOFTMAX);
  c.mutable_train()->set_seed(kSeed);
  c.mutable_optimizer()->set_type(SUM);
  c.mutable_consistency()->set_model(ASP);
  c.mutable_consistency()->set_staleness(-1);
  c.mutable_consistency()->set_cache(false);
  for (const char* name : {"w1", "w2"}) {
    TableConfig* t = c.add_table();
    t->set_name(name);
    t->set_init(INIT_ZEROS);
  }
  return c;
}

/// The three tables, whole: w1 F × H, b1 H, w2 L rows of [weights(H), bias].
struct Weights {
  std::vector<float> w1, b1, w2;
};

/// A fixed value in [-1.1, 1.1] for index i (weights that are neither
/// symmetric nor sparse).
inline float FixedValue(int64_t i) { return static_cast<float>((i * 37 + 11) % 23 - 11) / 10.0f; }

/// Fixed w1 and w2 (FixedValue), b1 from `b1(i)`.
template <typename B1>
Weights FixedWeights(B1&& b1) {
  Weights w;
  for (int64_t i = 0; i < kF * kH; ++i) w.w1.push_back(FixedValue(i));
  for (int64_t i = 0; i < kH; ++i) w.b1.push_back(b1(i));
  for (int64_t i = 0; i < kL * kRow; ++i) w.w2.push_back(FixedValue(2000 + i));
  return w;
}

inline std::vector<uint64_t> Iota(int64_t n) {
  std::vector<uint64_t> k(static_cast<size_t>(n));
  std::iota(k.begin(), k.end(), 0);
  return k;
}

/// One shard of job `c` and worker 0's client (declared second: closed first).
struct Shard {
  explicit Shard(const JobConfig& c) : cluster(c), client(cluster.Connect(0)), tables(TablesForJob(c)) {}
  uint32_t Id(const char* name) const {
    for (const TableSpec& t : tables)
      if (t.name() == name) return t.id();
    ADD_FAILURE() << "no table " << name;
    return 0;
  }
  /// Sets every table to `w` (SUM onto zeros).
  Status Load(const Weights& w) {
    client->PushRows(Id("w1"), Iota(kF), w.w1.data());
    client->PushDense(Id("b1"), w.b1.data());
    client->PushRows(Id("w2"), Iota(kL), w.w2.data());
    return client->WaitAll();
  }
  /// What the tables hold; a row never pushed reads as zeros and stays absent.
  Weights Read() {
    Weights w{std::vector<float>(kF * kH, -1), std::vector<float>(kH, -1), std::vector<float>(kL * kRow, -1)};
    EXPECT_TRUE(client->PullRowsIfPresent(Id("w1"), Iota(kF), w.w1.data()).Wait().ok());
    EXPECT_TRUE(client->PullDense(Id("b1"), w.b1.data()).Wait().ok());
    EXPECT_TRUE(client->PullRowsIfPresent(Id("w2"), Iota(kL), w.w2.data()).Wait().ok());
    return w;
  }
  InProcessCluster cluster;
  std::unique_ptr<WorkerClient> client;
  std::vector<TableSpec> tables;
};

inline CsrMatrix MakeCsr(int64_t cols, const std::vector<std::vector<std::pair<uint32_t, float>>>& rows) {
  CsrMatrix m;
  m.cols = cols;
  for (const auto& r : rows) {
    std::vector<uint32_t> idx;
    std::vector<float> val;
    for (const auto& [c, v] : r) idx.push_back(c), val.push_back(v);
    m.AppendRow(idx.data(), val.data(), idx.size());
  }
  return m;
}

/// Four rows; the minibatch is rows [1, 4): 8 stored entries over features
/// {0, 1, 3, 7, 10, 11}, positives {1, 4, 7}.
struct Data {
  CsrMatrix x = MakeCsr(kF, {{{2, 1.0f}},
                             {{0, 1.0f}, {3, -0.5f}, {7, 2.0f}},
                             {{1, 0.7f}, {7, 1.3f}, {10, -1.1f}},
                             {{3, 0.4f}, {11, 0.9f}}});
  CsrMatrix y = MakeCsr(kL, {{{8, 1.0f}}, {{1, 1.0f}}, {{4, 1.0f}, {7, 1.0f}}, {{7, 1.0f}}});
  Minibatch batch{&x, &y, 1, 4};
};

}  // namespace tether::testing::xmc
