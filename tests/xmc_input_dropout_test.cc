// Input dropout of the XMC model (model.input_dropout) through the Model
// interface, against a real ServerShard on 127.0.0.1 (a thread of the
// test), on the CPU backend, with F = 12 features, H = 4 hidden units,
// L = 9 labels and a minibatch of 3 rows (8 stored entries). It shows:
//  - a training minibatch's loss and gradients are, bit for bit, those of
//    the model without input dropout on the rows InputDropout masks with
//    the seed of (train.seed, rank, minibatch count), and a feature dropped
//    from every row that holds it gets a zero gradient;
//  - evaluation reads the rows as they are: the scores equal the model's
//    without input dropout;
//  - SaveState holds the minibatch count: a model restored from it draws
//    the mask the uninterrupted one draws next.
// Weights are set exactly by pushing them onto zero tables under SUM, and a
// minibatch's gradients are read exactly from a second, fresh shard the
// model pushes into (0 + g = g).
//
// This test lives in tests/, not next to the model: it needs a ServerShard,
// which the worker's own tests may not use (LAYERS).
#include <gtest/gtest.h>

#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "compute/cpu_backend.h"
#include "worker/client/client.h"
#include "worker/models/input_dropout.h"
#include "worker/models/model.h"
#include "worker/models/model_registry.h"
#include "tests/testing/cluster.h"

namespace tether {
namespace {

constexpr int64_t kF = 12, kH = 4, kL = 9, kRow = kH + 1;  // a w2 row: [weights(H), bias]
constexpr uint64_t kSeed = 7;                              // train.seed
constexpr float kRate = 0.5f;

// XMC_MLP, full softmax, with input dropout `rate`; every table starts at
// zeros and takes pushes as they are (SUM); no cache, pulls never wait.
JobConfig Job(float rate) {
  JobConfig c = testing::SgdJob(/*servers=*/1, /*workers=*/1, kF, kL, kH, /*learning_rate=*/1.0f,
                                /*timeout_ms=*/30000);
  c.mutable_model()->set_type(XMC_MLP);
  c.mutable_model()->set_loss(SOFTMAX);
  c.mutable_model()->set_input_dropout(rate);
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

struct Weights {
  std::vector<float> w1, b1, w2;  // F × H, H, L rows of [weights(H), bias]
};

// Fixed weights in [-1.1, 1.1], b1 > 0 so every hidden unit passes a
// gradient whatever the input.
Weights FixedWeights() {
  const auto v = [](int64_t i) { return static_cast<float>((i * 37 + 11) % 23 - 11) / 10.0f; };
  Weights w;
  for (int64_t i = 0; i < kF * kH; ++i) w.w1.push_back(v(i));
  for (int64_t i = 0; i < kH; ++i) w.b1.push_back(0.5f + static_cast<float>(i) / 10.0f);
  for (int64_t i = 0; i < kL * kRow; ++i) w.w2.push_back(v(2000 + i));
  return w;
}

std::vector<uint64_t> Iota(int64_t n) {
  std::vector<uint64_t> k(static_cast<size_t>(n));
  std::iota(k.begin(), k.end(), 0);
  return k;
}

// One shard and worker 0's client (declared second: closed first).
struct Shard {
  explicit Shard(const JobConfig& c) : cluster(c), client(cluster.Connect(0)), tables(TablesForJob(c)) {}
  uint32_t Id(const char* name) const {
    for (const TableSpec& t : tables)
      if (t.name() == name) return t.id();
    ADD_FAILURE() << "no table " << name;
    return 0;
  }
  Status Load(const Weights& w) {
    client->PushRows(Id("w1"), Iota(kF), w.w1.data());
    client->PushDense(Id("b1"), w.b1.data());
    client->PushRows(Id("w2"), Iota(kL), w.w2.data());
    return client->WaitAll();
  }
  // What the tables hold; a row never pushed reads as zeros (as -1 before).
  Weights Read() {
    Weights w{std::vector<float>(kF * kH, -1), std::vector<float>(kH, -1), std::vector<float>(kL * kRow, -1)};
    EXPECT_TRUE(client->PullRowsIfPresent(Id("w1"), Iota(kF), w.w1.data()).Wait().ok());
    EXPECT_TRUE(client->PullDense(Id("b1"), w.b1.data()).Wait().ok());
    EXPECT_TRUE(client->PullRowsIfPresent(Id("w2"), Iota(kL), w.w2.data()).Wait().ok());
    return w;
  }
  testing::InProcessCluster cluster;
  std::unique_ptr<WorkerClient> client;
  std::vector<TableSpec> tables;
};

CsrMatrix MakeCsr(int64_t cols, const std::vector<std::vector<std::pair<uint32_t, float>>>& rows) {
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

// Four rows; the minibatch is rows [1, 4): 8 entries over features
// {0, 1, 3, 7, 10, 11}.
struct Data {
  CsrMatrix x = MakeCsr(kF, {{{2, 1.0f}},
                             {{0, 1.0f}, {3, -0.5f}, {7, 2.0f}},
                             {{1, 0.7f}, {7, 1.3f}, {10, -1.1f}},
                             {{3, 0.4f}, {11, 0.9f}}});
  CsrMatrix y = MakeCsr(kL, {{{8, 1.0f}}, {{1, 1.0f}}, {{4, 1.0f}, {7, 1.0f}}, {{7, 1.0f}}});
  Minibatch batch{&x, &y, 1, 4};
};

std::unique_ptr<Model> Xmc(float rate, const std::vector<TableSpec>& tables, Backend* backend) {
  StatusOr<std::unique_ptr<Model>> m = CreateModel(Job(rate), tables, backend);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? std::move(m).value() : nullptr;
}

struct Step {
  float loss = 0;
  Weights grads;  // what the fresh shard holds: the gradients
};

// One training minibatch: pulls from `weights`, pushes into a fresh shard.
Step TrainOne(Model* model, const Minibatch& mb, Shard* weights) {
  Step s;
  Shard sink(Job(0));
  const Status pulled = model->Pull(mb, weights->client.get());
  EXPECT_TRUE(pulled.ok()) << pulled.ToString();
  StatusOr<float> loss = model->ComputeGradients(mb);
  EXPECT_TRUE(loss.ok()) << loss.status().ToString();
  if (!pulled.ok() || !loss.ok()) return s;
  s.loss = *loss;
  model->Push(sink.client.get());
  EXPECT_TRUE(sink.client->WaitAll().ok());
  s.grads = sink.Read();
  return s;
}

// The seed of worker 0's minibatch `count` (model.cc's DropoutSeeds, as
// proto/config.proto documents it), then InputDropout's own stream.
uint64_t InputSeed(uint64_t count) {
  return InputDropout::SeedFor(DropoutHash(DropoutHash(kSeed, /*rank=*/0), count));
}

TEST(XmcInputDropoutTest, TrainsOnTheMaskedRowsAndDropsTheirGradients) {
  Shard weights(Job(0));
  ASSERT_TRUE(weights.Load(FixedWeights()).ok());
  const Data d;
  // The batch's rows as the mask leaves them, the other rows as they are.
  InputDropout mask(kRate);
  const CsrView masked = mask.Apply(RowSliceOf(d.x, 1, 4), InputSeed(0));
  ASSERT_EQ(mask.dropped(), 1);  // of 8 entries
  Data dropped;
  for (int64_t p = d.x.row_ptr[1]; p < d.x.row_ptr[4]; ++p) dropped.x.values[p] = masked.values[p];

  CpuBackend backend(1);
  const std::unique_ptr<Model> model = Xmc(kRate, weights.tables, &backend), plain = Xmc(0, weights.tables, &backend);
  ASSERT_TRUE(model && plain);
  const Step got = TrainOne(model.get(), d.batch, &weights);
  const Step want = TrainOne(plain.get(), dropped.batch, &weights);
  const Step unmasked = TrainOne(plain.get(), d.batch, &weights);
  EXPECT_EQ(got.loss, want.loss);
  EXPECT_EQ(got.grads.w1, want.grads.w1);
  EXPECT_EQ(got.grads.b1, want.grads.b1);
  EXPECT_EQ(got.grads.w2, want.grads.w2);
  EXPECT_NE(got.loss, unmasked.loss);
  // Every feature of the batch is pulled and pushed; those whose entries
  // were all dropped push zeros, the others not.
  int zero_rows = 0;
  for (uint32_t f : {0u, 1u, 3u, 7u, 10u, 11u}) {
    bool kept = false;
    for (int64_t p = d.x.row_ptr[1]; p < d.x.row_ptr[4]; ++p) kept |= d.x.col_idx[p] == f && masked.values[p] != 0;
    const std::vector<float> row(&got.grads.w1[f * kH], &got.grads.w1[(f + 1) * kH]);
    if (!kept) ++zero_rows;
    EXPECT_EQ(row == std::vector<float>(kH, 0.0f), !kept) << "feature " << f;
  }
  EXPECT_EQ(zero_rows, 1);  // the one dropped entry was its feature's only one
}

TEST(XmcInputDropoutTest, EvaluationReadsTheRowsAsTheyAre) {
  Shard weights(Job(0));
  ASSERT_TRUE(weights.Load(FixedWeights()).ok());
  const Data d;
  CpuBackend backend(1);
  const std::unique_ptr<Model> model = Xmc(kRate, weights.tables, &backend), plain = Xmc(0, weights.tables, &backend);
  ASSERT_TRUE(model && plain);
  TrainOne(model.get(), d.batch, &weights);  // a training minibatch first
  std::vector<float> got, want;
  ASSERT_TRUE(plain->BeginEvaluation(weights.client.get()).ok());
  ASSERT_TRUE(plain->Pull(d.batch, weights.client.get()).ok());
  ASSERT_TRUE(plain->Predict(d.batch, &want).ok());
  ASSERT_TRUE(model->BeginEvaluation(weights.client.get()).ok());
  ASSERT_TRUE(model->Pull(d.batch, weights.client.get()).ok());
  ASSERT_TRUE(model->Predict(d.batch, &got).ok());
  ASSERT_EQ(got.size(), static_cast<size_t>(3 * kL));
  EXPECT_EQ(got, want);
}

TEST(XmcInputDropoutTest, RestoredStateDrawsTheSameNextMask) {
  Shard weights(Job(0));
  ASSERT_TRUE(weights.Load(FixedWeights()).ok());
  const Data d;
  CpuBackend backend(1);
  const std::unique_ptr<Model> run = Xmc(kRate, weights.tables, &backend),
                               resumed = Xmc(kRate, weights.tables, &backend),
                               fresh = Xmc(kRate, weights.tables, &backend);
  ASSERT_TRUE(run && resumed && fresh);
  TrainOne(run.get(), d.batch, &weights);
  const std::string state = run->SaveState();
  EXPECT_EQ(state, "1");  // one training minibatch
  ASSERT_TRUE(resumed->RestoreState(state).ok());
  const Step want = TrainOne(run.get(), d.batch, &weights);
  const Step got = TrainOne(resumed.get(), d.batch, &weights);
  const Step first = TrainOne(fresh.get(), d.batch, &weights);  // minibatch 0's mask again
  EXPECT_EQ(got.loss, want.loss);
  EXPECT_EQ(got.grads.w1, want.grads.w1);
  EXPECT_NE(first.grads.w1, want.grads.w1);
  // Without either dropout the model keeps no state, as before.
  EXPECT_EQ(Xmc(0, weights.tables, &backend)->SaveState(), "");
}

}  // namespace
}  // namespace tether
