// The sampled-softmax XMC model (worker/models/sampled_xmc_model.h) through
// the Model interface, against a real ServerShard on 127.0.0.1 (a thread of
// the test), on the CPU backend, with F = 12 features, H = 4 hidden units,
// L = 9 labels and minibatches of 3 rows. It shows:
//  - a training minibatch pushes exactly K distinct output rows in [0, L),
//    every positive label among them, the negatives those of
//    SampleOutputLabels seeded by NegativeSamplingSeed(train.seed, rank):
//    the same for the same rank, others for another rank; K >= L: all L;
//  - K >= L: loss and every pushed gradient equal the full XMC model's,
//    bit for bit;
//  - K < L: loss and gradients equal a double-precision softmax over the K
//    sampled labels only, and no other row of w2 is pushed;
//  - evaluation scores every label as the full model does, pulls w2 once
//    (BeginEvaluation), and EndEvaluation ends it: Predict is refused after
//    it and the next evaluation pulls the output layer again;
//  - a model restored from SaveState draws the keys the uninterrupted one
//    draws next;
//  - a BCE loss and a missing or misshapen table are InvalidArgument naming
//    them.
// Weights are set exactly by pushing them onto zero tables under SUM, and a
// minibatch's gradients are read exactly from a second, fresh shard the
// model pushes into (0 + g = g).
//
// This test lives in tests/, not next to the model: it needs a ServerShard,
// which the worker's own tests may not use (LAYERS).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "compute/cpu_backend.h"
#include "worker/client/client.h"
#include "worker/models/model.h"
#include "worker/models/model_registry.h"
#include "worker/models/sampled_xmc_model.h"
#include "worker/sampling.h"
#include "tests/testing/cluster.h"
#include "tests/xmc_model_fixture.h"

namespace tether {
namespace {

namespace xmc = testing::xmc;
using xmc::Data;
using xmc::Iota;
using xmc::kF;
using xmc::kH;
using xmc::kL;
using xmc::kRow;
using xmc::kSeed;
using xmc::Shard;
using xmc::Weights;
constexpr int64_t kK = 5;  // sampled labels

// XMC_MLP with the softmax sampled over k labels (0: the full model); every
// table starts at zeros and takes pushes as they are (SUM); no cache, pulls
// never wait (ASP).
JobConfig Job(int64_t k) {
  JobConfig c = xmc::BaseJob();
  c.mutable_model()->set_sampled_labels(k);
  return c;
}

// Fixed weights in [-1.1, 1.1], a mix of active and inactive hidden units.
Weights FixedWeights() {
  return xmc::FixedWeights([](int64_t i) { return xmc::FixedValue(1000 + i) / 4; });
}

std::unique_ptr<Model> Sampled(int64_t k, const std::vector<TableSpec>& tables, Backend* backend, int rank = 0) {
  StatusOr<std::unique_ptr<Model>> m = CreateSampledXmcMlpModel(Job(k), tables, backend, rank);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? std::move(m).value() : nullptr;
}

// One training minibatch: pulls from `weights`, pushes into a fresh shard.
struct Step {
  float loss = 0;
  Weights grads;                // what the fresh shard holds: the gradients
  std::set<uint64_t> w2_rows;   // rows of w2 with a non-zero gradient
  uint64_t updates_sent = 0;    // rows pushed, b1 counting 1
};

Step TrainOne(Model* model, const Minibatch& mb, Shard* weights) {
  Step s;
  Shard sink(Job(kK));
  const Status pulled = model->Pull(mb, weights->client.get());
  EXPECT_TRUE(pulled.ok()) << pulled.ToString();
  StatusOr<float> loss = model->ComputeGradients(mb);
  EXPECT_TRUE(loss.ok()) << loss.status().ToString();
  if (!pulled.ok() || !loss.ok()) return s;
  s.loss = *loss;
  model->Push(sink.client.get());
  EXPECT_TRUE(sink.client->WaitAll().ok());
  s.updates_sent = sink.client->stats().updates_sent;
  s.grads = sink.Read();
  for (int64_t l = 0; l < kL; ++l)
    if (std::any_of(&s.grads.w2[l * kRow], &s.grads.w2[(l + 1) * kRow], [](float v) { return v != 0; }))
      s.w2_rows.insert(static_cast<uint64_t>(l));
  return s;
}

// The negatives SampleOutputLabels draws for `rank`'s first minibatch.
std::set<uint64_t> ExpectedKeys(const Data& d, int64_t k, int rank) {
  std::mt19937_64 rng(NegativeSamplingSeed(kSeed, rank));
  std::vector<uint64_t> keys;
  CsrMatrix y_local;
  EXPECT_TRUE(SampleOutputLabels(SliceRows(d.y, 1, 4), kL, k, &rng, &keys, &y_local).ok());
  return {keys.begin(), keys.end()};
}

TEST(SampledXmcMlpModelTest, OutputKeysAreKDistinctLabelsWithEveryPositive) {
  Shard weights(Job(kK));
  ASSERT_TRUE(weights.Load(FixedWeights()).ok());
  const Data d;
  CpuBackend backend(1);
  const std::unique_ptr<Model> a = Sampled(kK, weights.tables, &backend), b = Sampled(kK, weights.tables, &backend),
                               other = Sampled(kK, weights.tables, &backend, /*rank=*/1);
  ASSERT_TRUE(a && b && other);
  EXPECT_EQ(a->name(), "sampled_xmc_mlp");
  const Step sa = TrainOne(a.get(), d.batch, &weights);
  ASSERT_EQ(sa.w2_rows.size(), static_cast<size_t>(kK));
  EXPECT_LT(*sa.w2_rows.rbegin(), static_cast<uint64_t>(kL));
  for (uint64_t positive : {1, 4, 7}) EXPECT_EQ(sa.w2_rows.count(positive), 1u) << "label " << positive;
  // Pushed: the batch's 6 w1 rows (features 0, 1, 3, 7, 10, 11), b1 and K
  // w2 rows, so the K non-zero rows are all the rows pushed.
  EXPECT_EQ(sa.updates_sent, 6u + 1u + static_cast<uint64_t>(kK));
  EXPECT_EQ(sa.w2_rows, ExpectedKeys(d, kK, 0));

  // The same rank and minibatch: the same keys (and gradients); rank 1: its
  // own negatives, with the same positives.
  const Step sb = TrainOne(b.get(), d.batch, &weights);
  EXPECT_EQ(sb.w2_rows, sa.w2_rows);
  EXPECT_EQ(sb.grads.w2, sa.grads.w2);
  const Step so = TrainOne(other.get(), d.batch, &weights);
  EXPECT_EQ(so.w2_rows, ExpectedKeys(d, kK, 1));
  EXPECT_NE(so.w2_rows, sa.w2_rows);
  for (uint64_t positive : {1, 4, 7}) EXPECT_EQ(so.w2_rows.count(positive), 1u) << "label " << positive;

  // K >= L: every label is a key.
  for (int64_t k : {kL, kL + 3}) {
    const std::unique_ptr<Model> all = Sampled(k, weights.tables, &backend);
    ASSERT_TRUE(all);
    EXPECT_EQ(TrainOne(all.get(), d.batch, &weights).w2_rows.size(), static_cast<size_t>(kL)) << "K " << k;
  }
}

// K >= L: the sampled model runs XmcMlp on all L rows in label order, the
// very operands the full model has, so the results are the same floats
// (compared with ==, which also takes -0 for +0: the shard stores 0 + g).
TEST(SampledXmcMlpModelTest, WithKAtLeastLEqualsTheFullModelBitForBit) {
  Shard weights(Job(kK));
  ASSERT_TRUE(weights.Load(FixedWeights()).ok());
  const Data d;
  CpuBackend backend(1);
  StatusOr<std::unique_ptr<Model>> full = CreateModel(Job(0), weights.tables, &backend);
  ASSERT_TRUE(full.ok()) << full.status().ToString();
  ASSERT_EQ((*full)->name(), "xmc_mlp");
  const Step want = TrainOne(full->get(), d.batch, &weights);
  EXPECT_GT(want.loss, 0.5f);
  for (int64_t k : {kL, kL + 3}) {
    SCOPED_TRACE("K " + std::to_string(k));
    const std::unique_ptr<Model> sampled = Sampled(k, weights.tables, &backend);
    ASSERT_TRUE(sampled);
    const Step got = TrainOne(sampled.get(), d.batch, &weights);
    EXPECT_EQ(got.loss, want.loss);
    EXPECT_EQ(got.grads.w1, want.grads.w1);
    EXPECT_EQ(got.grads.b1, want.grads.b1);
    EXPECT_EQ(got.grads.w2, want.grads.w2);
  }
}

// The loss and gradients (w1 F × H, b1 H, w2 L rows [weights, bias]; zero
// outside the sample) of a softmax over `sample` only, in double, straight
// from the definitions: rows without labels give 0 but count in B.
struct Reference {
  double loss = 0;
  std::vector<double> w1 = std::vector<double>(kF * kH), b1 = std::vector<double>(kH),
                      w2 = std::vector<double>(kL * kRow);
};

Reference SampledSoftmax(const Weights& w, const Data& d, const std::set<uint64_t>& sample) {
  Reference g;
  const std::vector<uint64_t> s(sample.begin(), sample.end());
  const int64_t rows = d.batch.rows();
  for (int64_t r = d.batch.begin; r < d.batch.end; ++r) {
    std::vector<double> a1(w.b1.begin(), w.b1.end());
    for (int64_t q = d.x.row_ptr[r]; q < d.x.row_ptr[r + 1]; ++q)
      for (int64_t h = 0; h < kH; ++h) a1[h] += double{d.x.values[q]} * w.w1[d.x.col_idx[q] * kH + h];
    for (double& v : a1) v = std::max(v, 0.0);
    const int64_t positives = d.y.row_ptr[r + 1] - d.y.row_ptr[r];
    if (positives == 0) continue;
    std::vector<double> score(s.size()), t(s.size(), 0.0);
    for (size_t j = 0; j < s.size(); ++j) {
      score[j] = w.w2[s[j] * kRow + kH];
      for (int64_t h = 0; h < kH; ++h) score[j] += a1[h] * w.w2[s[j] * kRow + h];
      for (int64_t q = d.y.row_ptr[r]; q < d.y.row_ptr[r + 1]; ++q)
        if (d.y.col_idx[q] == s[j]) t[j] = 1.0 / static_cast<double>(positives);
    }
    const double max = *std::max_element(score.begin(), score.end());
    double z = 0;
    for (double v : score) z += std::exp(v - max);
    std::vector<double> da1(kH, 0.0);
    for (size_t j = 0; j < s.size(); ++j) {
      g.loss -= t[j] * (score[j] - max - std::log(z)) / static_cast<double>(rows);
      const double ds = (std::exp(score[j] - max) / z - t[j]) / static_cast<double>(rows);
      for (int64_t h = 0; h < kH; ++h) {
        g.w2[s[j] * kRow + h] += ds * a1[h];
        da1[h] += ds * w.w2[s[j] * kRow + h];
      }
      g.w2[s[j] * kRow + kH] += ds;
    }
    for (int64_t h = 0; h < kH; ++h) {
      if (a1[h] <= 0) continue;
      g.b1[h] += da1[h];
      for (int64_t q = d.x.row_ptr[r]; q < d.x.row_ptr[r + 1]; ++q)
        g.w1[d.x.col_idx[q] * kH + h] += d.x.values[q] * da1[h];
    }
  }
  return g;
}

// The model computes in float over sums of at most H + K = 9 terms; the
// reference in double: they agree to a few float roundings, 1e-6 absolute
// plus 1e-5 relative (as xmc_mlp_test's finite differences).
void ExpectNear(const std::vector<float>& got, const std::vector<double>& want, const char* name) {
  ASSERT_EQ(got.size(), want.size()) << name;
  double largest = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], 1e-6 + 1e-5 * std::fabs(want[i])) << name << "[" << i << "]";
    largest = std::max(largest, std::fabs(want[i]));
  }
  EXPECT_GT(largest, 1e-2) << name << ": gradients well above the tolerance";
}

TEST(SampledXmcMlpModelTest, WithKBelowLIsTheSoftmaxOverTheSampledLabels) {
  Shard weights(Job(kK));
  const Weights w = FixedWeights();
  ASSERT_TRUE(weights.Load(w).ok());
  const Data d;
  CpuBackend backend(1);
  const std::unique_ptr<Model> model = Sampled(kK, weights.tables, &backend);
  ASSERT_TRUE(model);
  const Step got = TrainOne(model.get(), d.batch, &weights);
  ASSERT_EQ(got.w2_rows.size(), static_cast<size_t>(kK));
  const Reference want = SampledSoftmax(w, d, got.w2_rows);
  EXPECT_NEAR(got.loss, want.loss, 1e-6 * std::max(1.0, want.loss));
  // Not the full softmax's loss: the sample leaves 4 labels out of Z.
  const std::vector<uint64_t> labels = Iota(kL);
  EXPECT_GT(SampledSoftmax(w, d, {labels.begin(), labels.end()}).loss - got.loss, 1e-3);
  ExpectNear(got.grads.w1, want.w1, "w1");
  ExpectNear(got.grads.b1, want.b1, "b1");
  // Every w2 row but the K sampled is exactly 0 in the reference, so this
  // also says no other row was pushed.
  ExpectNear(got.grads.w2, want.w2, "w2");
}

TEST(SampledXmcMlpModelTest, EvaluationScoresEveryLabelAsTheFullModel) {
  Shard weights(Job(kK));
  ASSERT_TRUE(weights.Load(FixedWeights()).ok());
  const Data d;
  CpuBackend backend(1);
  StatusOr<std::unique_ptr<Model>> full = CreateModel(Job(0), weights.tables, &backend);
  ASSERT_TRUE(full.ok()) << full.status().ToString();
  std::vector<float> want, got;
  ASSERT_TRUE((*full)->Pull(d.batch, weights.client.get()).ok());
  ASSERT_TRUE((*full)->Predict(d.batch, &want).ok());
  ASSERT_EQ(want.size(), static_cast<size_t>(3 * kL));

  const std::unique_ptr<Model> model = Sampled(kK, weights.tables, &backend);
  ASSERT_TRUE(model);
  EXPECT_EQ(model->num_outputs(), kL);
  const auto rows_pulled = [&] { return weights.client->stats().rows_pulled; };
  TrainOne(model.get(), d.batch, &weights);  // a training minibatch first
  EXPECT_EQ(model->Predict(d.batch, &got).code(), Status::Code::kFailedPrecondition);
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE("evaluation " + std::to_string(round));
    uint64_t rows = rows_pulled();
    ASSERT_TRUE(model->BeginEvaluation(weights.client.get()).ok());
    EXPECT_EQ(rows_pulled() - rows, static_cast<uint64_t>(kL));  // all of w2, once
    rows = rows_pulled();
    ASSERT_TRUE(model->Pull(d.batch, weights.client.get()).ok());
    EXPECT_EQ(rows_pulled() - rows, 6u);  // the batch's w1 rows only
    EXPECT_EQ(model->ComputeGradients(d.batch).status().code(), Status::Code::kFailedPrecondition);
    ASSERT_TRUE(model->Predict(d.batch, &got).ok());
    EXPECT_EQ(got, want);
    model->EndEvaluation();
    EXPECT_EQ(model->Predict(d.batch, &got).code(), Status::Code::kFailedPrecondition);
  }
  // Training goes on after an evaluation: w1 rows and K rows of w2.
  const uint64_t rows = rows_pulled();
  const Step again = TrainOne(model.get(), d.batch, &weights);
  EXPECT_EQ(rows_pulled() - rows, 6u + static_cast<uint64_t>(kK));
  EXPECT_EQ(again.w2_rows.size(), static_cast<size_t>(kK));
}

// SaveState holds the negatives' generator: a model restored from it draws
// the keys the uninterrupted one draws next.
TEST(SampledXmcMlpModelTest, RestoredStateDrawsTheSameNextKeys) {
  Shard weights(Job(kK));
  ASSERT_TRUE(weights.Load(FixedWeights()).ok());
  const Data d;
  CpuBackend backend(1);
  const std::unique_ptr<Model> run = Sampled(kK, weights.tables, &backend),
                               resumed = Sampled(kK, weights.tables, &backend);
  ASSERT_TRUE(run && resumed);
  TrainOne(run.get(), d.batch, &weights);
  const std::string state = run->SaveState();
  ASSERT_TRUE(resumed->RestoreState(state).ok());
  const Step want = TrainOne(run.get(), d.batch, &weights), got = TrainOne(resumed.get(), d.batch, &weights);
  EXPECT_EQ(got.w2_rows.size(), static_cast<size_t>(kK));
  EXPECT_EQ(got.w2_rows, want.w2_rows);
  EXPECT_EQ(got.grads.w2, want.grads.w2);
  EXPECT_EQ(resumed->RestoreState("not a generator").code(), Status::Code::kInvalidArgument);
}

TEST(SampledXmcMlpModelTest, RejectsBceAndMissingOrMisshapenTables) {
  CpuBackend backend(1);
  const std::vector<TableSpec> tables = TablesForJob(Job(kK));
  JobConfig bce = Job(kK);
  bce.mutable_model()->set_loss(BCE);
  StatusOr<std::unique_ptr<Model>> m = CreateSampledXmcMlpModel(bce, tables, &backend);
  ASSERT_EQ(m.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(m.status().message(), "config field model.sampled_labels: a sampled softmax needs model.loss SOFTMAX");

  std::vector<TableSpec> missing;
  for (const TableSpec& t : tables)
    if (t.name() != "w2") missing.push_back(t);
  m = CreateSampledXmcMlpModel(Job(kK), missing, &backend);
  ASSERT_EQ(m.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(m.status().message(), "the model needs a table named w2 and the job has none");

  std::vector<TableSpec> narrow = tables;  // w2 without its bias column
  for (TableSpec& t : narrow)
    if (t.name() == "w2") t.set_dim(kH);
  m = CreateSampledXmcMlpModel(Job(kK), narrow, &backend);
  ASSERT_EQ(m.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(m.status().message(), "table w2 is a row table of width 4; the model needs a row table of width 5");

  std::vector<TableSpec> dense = tables;  // b1 as rows
  for (TableSpec& t : dense)
    if (t.name() == "b1") t.set_kind(TableSpec::ROW), t.set_dim(kH);
  m = CreateSampledXmcMlpModel(Job(kK), dense, &backend);
  ASSERT_EQ(m.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(m.status().message(), "table b1 is a row table of width 4; the model needs a dense table of width 4");
}

}  // namespace
}  // namespace tether
