// PredictRows: the XMC forward pass from a TrainedModel equals the same
// pass written out by hand (rows absent from the model take their
// initializer's value), any number of threads gives the same output and the
// same metrics bit for bit, and the binary and multiclass models score too.
#include "serving/predictor.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/table_spec.h"
#include "serving/scorer.h"
#include "worker/models/model_registry.h"

namespace tether {
namespace {

JobConfig XmcConfig() {
  JobConfig c;
  c.mutable_data()->set_index_base(1);
  c.mutable_data()->set_num_features(4);
  c.mutable_data()->set_num_labels(3);
  c.mutable_model()->set_type(XMC_MLP);
  c.mutable_model()->set_hidden(2);
  c.mutable_train()->set_seed(5);
  return c;
}

// The model's tables as TablesForJob declares them; row tables hold only
// the keys given (the rest must come from the initializer).
TrainedModel ModelWithRows(const JobConfig& c, const std::map<std::string, std::vector<uint64_t>>& keys) {
  TrainedModel m;
  m.config = c;
  for (const TableSpec& s : TablesForJob(c)) {
    TrainedTable t;
    t.spec = s;
    if (IsRowTable(s)) {
      t.keys = keys.at(s.name());
      for (size_t i = 0; i < t.keys.size() * s.dim(); ++i)
        t.values.push_back(std::sin(0.7f * static_cast<float>(i) + static_cast<float>(s.id())));
    } else {
      for (uint64_t i = 0; i < s.size(); ++i) t.values.push_back(0.05f * static_cast<float>(i) - 0.02f);
    }
    m.tables.push_back(std::move(t));
  }
  return m;
}

float Weight(const TrainedTable& t, uint64_t key, uint32_t j) {
  const auto it = std::find(t.keys.begin(), t.keys.end(), key);
  if (it != t.keys.end()) return t.values[(it - t.keys.begin()) * t.spec.dim() + j];
  if (t.spec.init().kind() == TableInitializer::ZEROS) return 0.0f;
  return InitialWeight(t.spec.init().seed(), t.spec.id(), key, j, t.spec.init().bound());
}

Dataset Rows() {
  Dataset d;
  d.features.cols = 4;
  d.labels.cols = 3;
  const std::vector<std::vector<std::pair<uint32_t, float>>> x = {
      {{0, 1.0f}, {3, 0.5f}}, {{1, 2.0f}}, {{2, -1.0f}, {3, 1.5f}}, {}};
  const std::vector<std::vector<uint32_t>> y = {{2}, {0, 1}, {1}, {}};
  for (size_t r = 0; r < x.size(); ++r) {
    std::vector<uint32_t> idx;
    std::vector<float> val;
    for (auto [i, v] : x[r]) idx.push_back(i), val.push_back(v);
    d.features.AppendRow(idx.data(), val.data(), idx.size());
    const std::vector<float> ones(y[r].size(), 1.0f);
    d.labels.AppendRow(y[r].data(), ones.data(), y[r].size());  // AppendRow counts the rows
  }
  return d;
}

TEST(PredictorTest, XmcForwardPassEqualsTheHandWrittenOneWithInitialRowsForAbsentKeys) {
  const JobConfig c = XmcConfig();
  // w1 lacks features 1 and 3, w2 lacks label 2: they take InitialWeight.
  const TrainedModel m = ModelWithRows(c, {{"w1", {0, 2}}, {"w2", {0, 1}}});
  const Dataset d = Rows();
  PredictOptions o;
  o.top_k = 3;
  StatusOr<Predictions> p = PredictRows(m, LabelCounts{}, d, o);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_EQ(p->rows, 4);
  ASSERT_EQ(p->k, 3);
  const TrainedTable &w1 = m.tables[0], &b1 = m.tables[1], &w2 = m.tables[2];
  ASSERT_EQ(w1.spec.name(), "w1");
  ASSERT_EQ(w2.spec.name(), "w2");
  for (int64_t r = 0; r < 4; ++r) {
    float a[2];
    for (uint32_t j = 0; j < 2; ++j) {
      float z = b1.values[j];
      for (int64_t q = d.features.row_ptr[r]; q < d.features.row_ptr[r + 1]; ++q)
        z += d.features.values[q] * Weight(w1, d.features.col_idx[q], j);
      a[j] = std::max(z, 0.0f);
    }
    std::vector<float> s(3);
    for (uint32_t l = 0; l < 3; ++l) s[l] = a[0] * Weight(w2, l, 0) + a[1] * Weight(w2, l, 1) + Weight(w2, l, 2);
    for (int j = 0; j < 3; ++j) {
      const uint32_t l = p->labels[r * 3 + j];
      EXPECT_NEAR(p->scores[r * 3 + j], s[l], 1e-5) << "row " << r << " position " << j;
      if (j > 0) {
        EXPECT_GE(p->scores[r * 3 + j - 1], p->scores[r * 3 + j]);
      }
    }
  }
  EXPECT_EQ(OutputLabelId(c, 0), 1);  // index_base 1
  ASSERT_FALSE(p->metrics.empty());
  EXPECT_EQ(p->metrics[0].first, "precision_at_1");
}

// A model's sizes come from its config: a config that claims more than its
// tables hold (2,000,000,000 labels over a w2 of 3), or that the tables
// agree with but no process could hold, is refused before anything is
// allocated, naming what disagrees or what is needed.
TEST(PredictorTest, AModelWhoseConfigClaimsMoreThanItsTablesIsRefused) {
  const JobConfig c = XmcConfig();
  TrainedModel m = ModelWithRows(c, {{"w1", {0, 2}}, {"w2", {0, 1}}});
  m.config.mutable_data()->set_num_labels(2000000000);
  PredictOptions o;
  StatusOr<Predictions> p = PredictRows(m, LabelCounts{}, Rows(), o);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(p.status().message(),
            "the model's config and its tables disagree: table 'w2', field num_keys: the file's tables has 3, its "
            "job_config has 2000000000");
  // Tables that agree with the claim: the output layer alone would need
  // 2e9 × 1026 floats (8 TB), which no process here may hold.
  JobConfig huge = XmcConfig();
  huge.mutable_data()->set_num_labels(2000000000);
  huge.mutable_model()->set_hidden(1024);
  m = ModelWithRows(huge, {{"w1", {}}, {"w2", {}}});
  p = PredictRows(m, LabelCounts{}, Rows(), o);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), Status::Code::kResourceExhausted);
  EXPECT_EQ(p.status().message().rfind("scoring needs the output layer of 2000000000 labels × 1025 weights, 7.5 TiB "
                                       "(8208000000000 bytes), more than the ", 0), 0u)
      << p.status().message();
}

TEST(PredictorTest, ThreadsAndBlocksChangeNothing) {
  const JobConfig c = XmcConfig();
  const TrainedModel m = ModelWithRows(c, {{"w1", {0, 1, 2}}, {"w2", {0, 1, 2}}});
  const Dataset d = Rows();
  LabelCounts counts;
  counts.counts = {3, 1, 2};
  counts.num_rows = 5;
  PredictOptions one;
  StatusOr<Predictions> a = PredictRows(m, counts, d, one);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  PredictOptions many;
  many.threads = 3;
  many.block_rows = 1;
  StatusOr<Predictions> b = PredictRows(m, counts, d, many);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(a->labels, b->labels);
  ASSERT_EQ(a->scores.size(), b->scores.size());
  EXPECT_EQ(std::memcmp(a->scores.data(), b->scores.data(), a->scores.size() * 4), 0);
  ASSERT_EQ(a->metrics.size(), 12u);  // P, nDCG, PSP, PSnDCG at 1, 3, 5
  for (size_t i = 0; i < a->metrics.size(); ++i) {
    EXPECT_EQ(a->metrics[i].first, b->metrics[i].first);
    EXPECT_EQ(a->metrics[i].second, b->metrics[i].second) << a->metrics[i].first;
  }
  EXPECT_EQ(a->metrics[6].first, "psp_at_1");
}

TEST(PredictorTest, BinaryAndMulticlassModelsScore) {
  JobConfig lr;
  lr.mutable_data()->set_index_base(1);
  lr.mutable_data()->set_num_features(4);
  lr.mutable_model()->set_type(SPARSE_LR);
  TrainedModel m = ModelWithRows(lr, {{"w", {0, 1, 2, 3}}});
  Dataset d = Rows();
  d.labels = CsrMatrix();
  d.labels.cols = 1;
  const uint32_t pos = 0;
  const float one = 1.0f;
  for (int r = 0; r < 4; ++r) d.labels.AppendRow(&pos, &one, r % 2);
  StatusOr<Predictions> p = PredictRows(m, LabelCounts{}, d, PredictOptions{});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->k, 1);
  const float b = m.tables[1].values[0];
  EXPECT_NEAR(p->scores[1], 2.0f * m.tables[0].values[1] + b, 1e-6);  // row 1: x1 = 2
  ASSERT_EQ(p->metrics.size(), 3u);
  EXPECT_EQ(p->metrics[0].first, "accuracy");

  JobConfig mlp;
  mlp.mutable_data()->set_num_features(4);
  mlp.mutable_data()->set_num_labels(3);
  mlp.mutable_data()->set_label_base(1);
  mlp.mutable_model()->set_type(DENSE_MLP);
  mlp.mutable_model()->set_hidden(5);
  m = ModelWithRows(mlp, {});
  p = PredictRows(m, LabelCounts{}, Rows(), PredictOptions{});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->k, 3);
  EXPECT_EQ(OutputLabelId(mlp, 2), 3);  // label_base 1

  JobConfig other = XmcConfig();
  other.mutable_model()->set_name("my_model");
  EXPECT_FALSE(PredictRows(ModelWithRows(XmcConfig(), {{"w1", {}}, {"w2", {}}}), LabelCounts{}, Rows(),
                           [] { PredictOptions o; o.top_k = 0; return o; }())
                   .ok());
  TrainedModel named = ModelWithRows(XmcConfig(), {{"w1", {}}, {"w2", {}}});
  named.config = other;
  const StatusOr<Predictions> refused = PredictRows(named, LabelCounts{}, Rows(), PredictOptions{});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("my_model"), std::string::npos);
}

// Per-row scores of a model, straight from its scorer.
std::vector<float> Logits(const TrainedModel& m, const Dataset& d) {
  StatusOr<ScorerSet> set = MakeScorerSet(m);
  EXPECT_TRUE(set.ok()) << set.status().ToString();
  StatusOr<std::unique_ptr<Backend>> b = CreateBackend("cpu", 1);
  EXPECT_TRUE(b.ok());
  std::vector<float> s;
  EXPECT_TRUE(set->make(std::move(b).value())->Score(d.features, 0, d.features.rows, &s).ok());
  return s;
}

// An ensemble of two XMC models (different weights, as different seeds
// give): each row's scores are log of the mean softmax probabilities.
TEST(PredictorTest, EnsembleAveragesSoftmaxProbabilities) {
  const JobConfig c = XmcConfig();
  const TrainedModel a = ModelWithRows(c, {{"w1", {0, 1, 2, 3}}, {"w2", {0, 1, 2}}});
  TrainedModel b = a;
  for (TrainedTable& t : b.tables)
    for (float& v : t.values) v = -0.5f * v + 0.1f;
  const Dataset d = Rows();
  const std::vector<float> sa = Logits(a, d), sb = Logits(b, d);
  ASSERT_EQ(sa.size(), 12u);
  StatusOr<ScorerSet> set = MakeEnsembleScorerSet({&a, &b}, "cpu");
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  StatusOr<std::unique_ptr<Backend>> be = CreateBackend("cpu", 1);
  ASSERT_TRUE(be.ok());
  std::vector<float> se;
  ASSERT_TRUE(set->make(std::move(be).value())->Score(d.features, 0, 4, &se).ok());
  for (int r = 0; r < 4; ++r) {
    double za = 0, zb = 0;
    for (int j = 0; j < 3; ++j) za += std::exp(sa[r * 3 + j]), zb += std::exp(sb[r * 3 + j]);
    for (int j = 0; j < 3; ++j) {
      const double want = std::log((std::exp(sa[r * 3 + j]) / za + std::exp(sb[r * 3 + j]) / zb) / 2);
      EXPECT_NEAR(se[r * 3 + j], want, 1e-6) << r << "," << j;
    }
  }
  // Through PredictEnsemble: the same top-k, and metrics beside each model's.
  PredictOptions o;
  o.top_k = 3;
  StatusOr<Predictions> p = PredictEnsemble({&a, &b}, LabelCounts{}, d, o);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  for (int r = 0; r < 4; ++r)
    EXPECT_NEAR(p->scores[r * 3], std::max({se[r * 3], se[r * 3 + 1], se[r * 3 + 2]}), 1e-7);
  EXPECT_EQ(p->metrics[0].first, "precision_at_1");
  // One model alone: its log-softmax, the same ranking as its logits.
  StatusOr<Predictions> alone = PredictEnsemble({&a}, LabelCounts{}, d, o);
  StatusOr<Predictions> single = PredictRows(a, LabelCounts{}, d, o);
  ASSERT_TRUE(alone.ok() && single.ok());
  EXPECT_EQ(alone->labels, single->labels);
}

// Binary models: the logit of the mean sigmoid probability.
TEST(PredictorTest, EnsembleOfBinaryModelsAveragesProbabilities) {
  JobConfig lr;
  lr.mutable_data()->set_index_base(1);
  lr.mutable_data()->set_num_features(4);
  lr.mutable_model()->set_type(SPARSE_LR);
  const TrainedModel a = ModelWithRows(lr, {{"w", {0, 1, 2, 3}}});
  TrainedModel b = a;
  for (float& v : b.tables[0].values) v *= 3.0f;
  const Dataset d = Rows();
  const std::vector<float> sa = Logits(a, d), sb = Logits(b, d);
  StatusOr<ScorerSet> set = MakeEnsembleScorerSet({&a, &b}, "cpu");
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  StatusOr<std::unique_ptr<Backend>> be = CreateBackend("cpu", 1);
  ASSERT_TRUE(be.ok());
  std::vector<float> se;
  ASSERT_TRUE(set->make(std::move(be).value())->Score(d.features, 0, 4, &se).ok());
  for (int r = 0; r < 4; ++r) {
    const double p = (1 / (1 + std::exp(-sa[r])) + 1 / (1 + std::exp(-sb[r]))) / 2;
    EXPECT_NEAR(se[r], std::log(p / (1 - p)), 1e-5) << r;
  }
}

TEST(PredictorTest, EnsembleRefusesModelsThatScoreDifferently) {
  const JobConfig c = XmcConfig();
  const TrainedModel a = ModelWithRows(c, {{"w1", {}}, {"w2", {}}});
  JobConfig wider = c;
  wider.mutable_data()->set_num_labels(4);
  TrainedModel b = ModelWithRows(wider, {{"w1", {}}, {"w2", {}}});
  const StatusOr<ScorerSet> s = MakeEnsembleScorerSet({&a, &b}, "cpu");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(),
            "model 2 of the ensemble differs from model 1 in data.num_labels: 3 vs 4: an ensemble averages models "
            "that score the same outputs from the same input");
  JobConfig tfidf = c;
  tfidf.mutable_data()->set_tf_idf(true);
  EXPECT_EQ(EnsembleMismatch(c, tfidf), "data.tf_idf: false vs true");
  EXPECT_EQ(EnsembleMismatch(c, c), "");
}

}  // namespace
}  // namespace tether
