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
#include "tests/xmc_model_fixture.h"

namespace tether {
namespace {

namespace xmc = testing::xmc;
using xmc::Data;
using xmc::kH;
using xmc::kL;
using xmc::kSeed;
using xmc::Shard;
using xmc::Weights;
constexpr float kRate = 0.5f;

// XMC_MLP, full softmax, with input dropout `rate`; every table starts at
// zeros and takes pushes as they are (SUM); no cache, pulls never wait.
JobConfig Job(float rate) {
  JobConfig c = xmc::BaseJob();
  c.mutable_model()->set_input_dropout(rate);
  return c;
}

// Fixed weights in [-1.1, 1.1], b1 > 0 so every hidden unit passes a
// gradient whatever the input.
Weights FixedWeights() {
  return xmc::FixedWeights([](int64_t i) { return 0.5f + static_cast<float>(i) / 10.0f; });
}

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
