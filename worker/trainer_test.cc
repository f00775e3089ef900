// The trainer's data path and outputs: LoadSplit's label conversion per
// model type (binary, multiclass, IDX), its errors, TF-IDF weighting
// (FinishFeatures) and its config checks, CreateModel's table checks, and
// the metrics JSON keys.
#include "worker/trainer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/config.h"
#include "compute/cpu_backend.h"
#include "tests/testing/temp_dir.h"
#include "worker/models/model.h"
#include "worker/models/model_registry.h"

namespace tether {
namespace {

// One directory for this test program's files, removed at exit.
const testing::ScopedTempDir& TestDir() {
  static const testing::ScopedTempDir dir;
  return dir;
}

std::string WriteFile(const std::string& name, const std::string& text) {
  const std::string path = TestDir().File("trainer_" + name);
  std::ofstream(path) << text;
  return path;
}

// The whole job's checks: the config's own, then the model's (registry).
Status ValidateAll(const JobConfig& c) {
  const Status st = ValidateJobConfig(c);
  return st.ok() ? ValidateModelConfig(c) : st;
}

JobConfig Config(const std::string& text) {
  StatusOr<JobConfig> c = ParseJobConfig(text, "test.pbtxt");
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? *c : JobConfig();
}

TEST(LoadSplitTest, BinaryLabelsBecomeOneColumn) {
  const std::string f = WriteFile("bin.txt", "+1 1:1 3:0.5\n-1 2:1\n1 4:2\n0 1:1\n");
  JobConfig c = Config("model { type: SPARSE_LR } data { format: LIBSVM index_base: 1 num_features: 4 "
                       "train_file: \"" + f + "\" feature_scale: 2 }");
  ASSERT_TRUE(ValidateAll(c).ok()) << ValidateAll(c).ToString();
  StatusOr<Dataset> d = LoadSplit(c, f, "", "", 0, 1);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->labels.rows, 4);
  EXPECT_EQ(d->labels.cols, 1);
  EXPECT_EQ(d->labels.row_ptr, (std::vector<int64_t>{0, 1, 1, 2, 2}));  // rows 0 and 2 positive
  EXPECT_EQ(d->features.values[1], 1.0f);  // 0.5 scaled by feature_scale 2

  const std::string bad = WriteFile("bin_bad.txt", "+1 1:1\n2 2:1\n");
  d = LoadSplit(c, bad, "", "", 0, 1);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find(bad + ":2: label 2 is not binary"), std::string::npos) << d.status().message();
}

TEST(LoadSplitTest, MulticlassLabelsBecomeOneHotWithLabelBase) {
  const std::string f = WriteFile("mc.txt", "3 1:10\n1 2:20\n2 1:5 2:5\n");
  JobConfig c = Config("model { type: DENSE_MLP hidden_layers: 4 } data { format: LIBSVM index_base: 1 "
                       "num_features: 2 num_labels: 3 label_base: 1 train_file: \"" + f + "\" }");
  ASSERT_TRUE(ValidateAll(c).ok()) << ValidateAll(c).ToString();
  StatusOr<Dataset> d = LoadSplit(c, f, "", "", 0, 1);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->labels.cols, 3);
  EXPECT_EQ(d->labels.row_ptr, (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(d->labels.col_idx, (std::vector<uint32_t>{2, 0, 1}));

  const std::string bad = WriteFile("mc_bad.txt", "3 1:10\n4 2:20\n");
  d = LoadSplit(c, bad, "", "", 0, 1);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find(bad + ":2: label 4 is not a class in [1, 4)"), std::string::npos)
      << d.status().message();
  const std::string frac = WriteFile("mc_frac.txt", "1.5 1:1\n");
  EXPECT_FALSE(LoadSplit(c, frac, "", "", 0, 1).ok());
}

TEST(LoadSplitTest, MnistSplitFromTheBundledIdxFiles) {
  JobConfig c;
  ASSERT_TRUE(LoadJobConfig("examples/mnist.pbtxt").ok());
  c = *LoadJobConfig("examples/mnist.pbtxt");
  ASSERT_TRUE(ValidateAll(c).ok()) << ValidateAll(c).ToString();
  StatusOr<Dataset> test = LoadSplit(c, c.data().train_file(), c.data().train_label_file(), c.data().test_split(), 0, 1);
  ASSERT_TRUE(test.ok()) << test.status().ToString();
  EXPECT_EQ(test->features.rows, 2000);
  EXPECT_EQ(test->labels.cols, 10);
  EXPECT_EQ(test->labels.nnz(), 2000);  // one class per row
  for (float v : test->features.values) ASSERT_TRUE(v > 0.0f && v <= 1.0f);  // pixels / 255
  StatusOr<Dataset> half = LoadSplit(c, c.data().train_file(), c.data().train_label_file(), c.data().train_split(), 1, 2);
  ASSERT_TRUE(half.ok());
  EXPECT_EQ(half->features.rows, 4000);
}

// data.tf_idf: LoadSplit leaves the rows unweighted and unnormalised;
// FinishFeatures weighs them, then normalises. Rows {0:1, 1:2}, {0:1},
// {2:3}: df = 2, 1, 1 over N = 3.
TEST(LoadSplitTest, TfIdfWeighsThenNormalises) {
  const std::string f = WriteFile("tfidf.txt", "3 3 2\n0 0:1 1:2\n1 0:1\n0,1 2:3\n");
  JobConfig c = Config("data { format: XMC index_base: 0 num_features: 3 num_labels: 2 train_file: \"" + f +
                       "\" tf_idf: true normalize_rows: true }");
  ASSERT_TRUE(ValidateAll(c).ok()) << ValidateAll(c).ToString();
  StatusOr<Dataset> d = LoadSplit(c, f, "", "", 0, 1);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->features.values, (std::vector<float>{1, 2, 1, 3}));  // as read
  const float idf0 = static_cast<float>(std::log(4.0 / 3.0) + 1.0), idf1 = static_cast<float>(std::log(2.0) + 1.0);
  const std::vector<float> idf = {idf0, idf1, idf1};
  ASSERT_TRUE(FinishFeatures(c, idf, &d->features).ok());
  const double norm0 = std::sqrt(double{idf0} * idf0 + 4.0 * idf1 * idf1);
  EXPECT_NEAR(d->features.values[0], idf0 / norm0, 1e-7);  // 0.3836
  EXPECT_NEAR(d->features.values[1], 2 * idf1 / norm0, 1e-7);  // 0.9235
  EXPECT_NEAR(d->features.values[2], 1.0, 1e-7);
  EXPECT_NEAR(d->features.values[3], 1.0, 1e-7);
  // Without normalisation the weighted values stay; weights of another width are refused.
  c.mutable_data()->set_normalize_rows(false);
  d = LoadSplit(c, f, "", "", 0, 1);
  ASSERT_TRUE(FinishFeatures(c, idf, &d->features).ok());
  EXPECT_EQ(d->features.values, (std::vector<float>{idf0, 2 * idf1, idf0, 3 * idf1}));
  EXPECT_EQ(FinishFeatures(c, {1, 1}, &d->features).message(),
            "data.tf_idf: 2 feature weights for data.num_features 3");
  // Without data.tf_idf: nothing to do (LoadSplit normalised).
  c.mutable_data()->set_tf_idf(false);
  EXPECT_TRUE(FinishFeatures(c, {}, &d->features).ok());
  EXPECT_EQ(d->features.values, (std::vector<float>{idf0, 2 * idf1, idf0, 3 * idf1}));
}

TEST(ConfigForModelsTest, TfIdfNeedsAFixedWidthHeldInMemory) {
  const std::string data = "data { format: XMC index_base: 0 num_features: 3 num_labels: 2 train_file: \"x\" tf_idf: true ";
  EXPECT_EQ(ValidateJobConfig(Config(data + "streaming: true }")).message(),
            "config field data.tf_idf: counts and weighs rows held in memory: not with data.streaming");
  JobConfig wide = Config(data + "}");
  wide.mutable_data()->set_num_features((int64_t{1} << 22) + 1);
  EXPECT_EQ(ValidateJobConfig(wide).message(),
            "config field data.tf_idf: needs data.num_features <= 4194304 (every worker sends one dense document "
            "count per feature), got 4194305");
  JobConfig hashed = Config(data + "}");
  hashed.mutable_data()->set_num_features(0);
  hashed.mutable_data()->set_hashed_features(true);
  EXPECT_NE(ValidateJobConfig(hashed).message().find("config field data.tf_idf: needs a fixed input width"),
            std::string::npos) << ValidateJobConfig(hashed).message();
}

TEST(ConfigForModelsTest, ValidationPerModelType) {
  JobConfig c = Config("model { type: SPARSE_LR } data { format: XMC index_base: 0 num_features: 3 train_file: \"x\" }");
  EXPECT_NE(ValidateAll(c).message().find("data.format"), std::string::npos);
  c = Config("model { type: DENSE_MLP } data { format: LIBSVM index_base: 1 num_features: 3 num_labels: 1 "
             "train_file: \"x\" }");
  EXPECT_NE(ValidateAll(c).message().find("data.num_labels"), std::string::npos);
  c = Config("model { type: DENSE_MLP } data { format: IDX index_base: 0 num_features: 3 num_labels: 10 "
             "train_file: \"x\" }");
  EXPECT_NE(ValidateAll(c).message().find("data.train_label_file"), std::string::npos);
  c = Config("model { type: DENSE_MLP hidden_layers: 0 } data { format: LIBSVM index_base: 1 num_features: 3 "
             "num_labels: 3 train_file: \"x\" }");
  EXPECT_NE(ValidateAll(c).message().find("model.hidden_layers"), std::string::npos);
  c = Config("model { type: SPARSE_LR } data { format: LIBSVM index_base: 1 num_features: 3 train_file: \"x\" } "
             "table { name: \"w1\" }");
  EXPECT_NE(ValidateAll(c).message().find("unknown table 'w1' (model sparse_lr has w, b)"), std::string::npos)
      << ValidateAll(c).message();
}

TEST(ConfigForModelsTest, TablesPerModelType) {
  JobConfig c = Config("model { type: DENSE_MLP hidden_layers: 8 hidden_layers: 4 } data { format: LIBSVM "
                       "index_base: 1 num_features: 16 num_labels: 10 train_file: \"x\" }");
  std::vector<TableSpec> t = TablesForJob(c);
  ASSERT_EQ(t.size(), 6u);
  const char* names[] = {"w1", "b1", "w2", "b2", "w3", "b3"};
  const uint64_t sizes[] = {16 * 8, 8, 8 * 4, 4, 4 * 10, 10};
  for (size_t i = 0; i < t.size(); ++i) {
    EXPECT_EQ(t[i].id(), i);
    EXPECT_EQ(t[i].name(), names[i]);
    EXPECT_EQ(t[i].kind(), TableSpec::DENSE);
    EXPECT_EQ(t[i].size(), sizes[i]);
    EXPECT_EQ(t[i].init().kind(), i % 2 == 0 ? TableInitializer::UNIFORM : TableInitializer::ZEROS);
  }
  EXPECT_NEAR(t[2].init().bound(), std::sqrt(6.0 / 12.0), 1e-6);  // Glorot for 8 → 4
  EXPECT_EQ(DenseMlpLayerWidths(c), (std::vector<int64_t>{16, 8, 4, 10}));

  c = Config("model { type: SPARSE_LR } data { format: LIBSVM index_base: 1 num_features: 123 train_file: \"x\" }");
  t = TablesForJob(c);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].name(), "w");
  EXPECT_EQ(t[0].kind(), TableSpec::ROW);
  EXPECT_EQ(t[0].dim(), 1u);
  EXPECT_EQ(t[1].name(), "b");
  EXPECT_EQ(t[1].kind(), TableSpec::DENSE);
  EXPECT_EQ(t[1].size(), 1u);
}

TEST(CreateModelTest, ChecksTheTablesItIsGiven) {
  JobConfig c = Config("model { type: DENSE_MLP hidden: 5 } data { format: LIBSVM index_base: 1 num_features: 3 "
                       "num_labels: 2 train_file: \"x\" }");
  CpuBackend backend(1);
  std::vector<TableSpec> tables = TablesForJob(c);
  StatusOr<std::unique_ptr<Model>> m = CreateModel(c, tables, &backend);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ((*m)->name(), "dense_mlp");
  EXPECT_EQ((*m)->label_kind(), LabelKind::kMultiClass);
  EXPECT_EQ((*m)->num_outputs(), 2);
  tables[2].set_size(11);  // w2 should be 5 × 2
  m = CreateModel(c, tables, &backend);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("table w2"), std::string::npos) << m.status().message();
  tables.pop_back();
  EXPECT_FALSE(CreateModel(c, tables, &backend).ok());
}

// The worker's start-up line names why minibatches are not pipelined
// (Model::PipelineOffReason): each check CreateXmcMlpModel makes.
TEST(CreateModelTest, SaysWhyItDoesNotPipeline) {
  const std::string xmc = "model { type: XMC_MLP hidden: 4 } data { format: LIBSVM index_base: 1 num_features: 3 "
                          "num_labels: 2 train_file: \"x\" } ";
  CpuBackend backend(1);
  auto reason = [&](const std::string& text, bool scaled_w1) {
    const JobConfig c = Config(text);
    std::vector<TableSpec> tables = TablesForJob(c);
    if (scaled_w1) tables[0].mutable_consistency()->set_staleness_policy(INVERSE);
    StatusOr<std::unique_ptr<Model>> m = CreateModel(c, tables, &backend);
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    if (!m.ok()) return std::string("?");
    EXPECT_EQ((*m)->Pipelines(), (*m)->PipelineOffReason().empty());
    return (*m)->PipelineOffReason();
  };
  EXPECT_EQ(reason(xmc, false), "");
  EXPECT_EQ(reason(xmc + "train { pipeline: false }", false), "train.pipeline false");
  EXPECT_EQ(reason(xmc + "consistency { model: AVERAGE }", false), "consistency AVERAGE keeps a local replica");
  EXPECT_EQ(reason(xmc + "train { adaptive_batch { enabled: true } }", false),
            "train.adaptive_batch is on: the next minibatch's size is known only at its clock");
  EXPECT_EQ(reason(xmc, true), "table w1's staleness_policy is INVERSE: a row read ahead has an older version");
  EXPECT_EQ(reason("model { type: DENSE_MLP hidden: 5 } data { format: LIBSVM index_base: 1 num_features: 3 "
                   "num_labels: 2 train_file: \"x\" }",
                   false),
            "model dense_mlp has no pipelined path (only xmc_mlp without sampled labels has)");
}

nlohmann::json ReadJson(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return nlohmann::json::parse(ss.str());
}

TEST(MetricsJsonTest, KeysFollowTheModelsMetrics) {
  JobConfig c = Config("name: \"j\"");
  TrainReport r;
  r.test_metrics = {{"accuracy", 0.85}, {"auc", std::nan("")}, {"log_loss", 0.33}};
  r.train_seconds = 2.5;
  const std::string path = TestDir().File("trainer_metrics.json");
  ASSERT_TRUE(WriteMetricsJson(r, c, path).ok());
  nlohmann::json j = ReadJson(path);
  EXPECT_EQ(j["accuracy"].get<double>(), 0.85);
  EXPECT_TRUE(j["auc"].is_null());  // JSON has no NaN
  EXPECT_EQ(j["log_loss"].get<double>(), 0.33);
  EXPECT_EQ(j["train_seconds"].get<double>(), 2.5);
  for (const char* k : {"samples_per_second", "total_samples", "test_rows", "final_loss", "final_loss_from",
                        "pull_wait_fraction_rank0", "num_workers", "num_servers", "staleness", "epochs", "seed"})
    EXPECT_TRUE(j.contains(k)) << k;
  EXPECT_FALSE(j.contains("precision_at_1"));
  EXPECT_EQ(r.Metric("log_loss"), 0.33);
  EXPECT_TRUE(std::isnan(r.Metric("precision_at_1")));
}

}  // namespace
}  // namespace tether
