// ModelFileFormatFor: a model file's format follows its name unless asked
// for, and a format that contradicts the name is refused. Every model type
// (its tables as TablesForJob declares them) reads back bit for bit from
// either format, and the two files read back the same. TF-IDF weights
// counted for an export equal those a job's workers find together.
#include "serving/model_export.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "core/table_spec.h"
#include "tests/testing/temp_dir.h"
#include "worker/eval/partitioned_eval.h"
#include "worker/models/model_registry.h"
#include "worker/train/training_data.h"
#include "worker/train/validation_rows.h"

namespace tether {
namespace {

TEST(ModelFileFormatFor, FollowsTheNameWhenNotAsked) {
  EXPECT_EQ(*ModelFileFormatFor("m.npz", ""), ModelFileFormat::kNpz);
  EXPECT_EQ(*ModelFileFormatFor("m.safetensors", ""), ModelFileFormat::kSafetensors);
  EXPECT_EQ(*ModelFileFormatFor("model", ""), ModelFileFormat::kSafetensors);
}

TEST(ModelFileFormatFor, TakesTheFormatAskedForInAnyCase) {
  EXPECT_EQ(*ModelFileFormatFor("m.npz", "NPZ"), ModelFileFormat::kNpz);
  EXPECT_EQ(*ModelFileFormatFor("model.bin", "npz"), ModelFileFormat::kNpz);
  EXPECT_EQ(*ModelFileFormatFor("model.bin", "safetensors"), ModelFileFormat::kSafetensors);
}

TEST(ModelFileFormatFor, RefusesAFormatThatContradictsTheName) {
  EXPECT_EQ(ModelFileFormatFor("x.npz", "safetensors").status().message(),
            "--format=safetensors contradicts the file name 'x.npz': name the file after its format (.npz for "
            "npz, .safetensors for safetensors), or leave --format out to take it from the name");
  EXPECT_FALSE(ModelFileFormatFor("x.safetensors", "npz").ok());
  EXPECT_EQ(ModelFileFormatFor("x.bin", "onnx").status().message(),
            "model file format must be safetensors or npz, got 'onnx'");
}

// A model of `config`'s type: every table TablesForJob declares, row
// tables with a few keys; values of every sign and magnitude.
TrainedModel ModelOf(const JobConfig& config) {
  TrainedModel m;
  m.config = config;
  m.job_id = "job-" + ModelType_Name(config.model().type());
  m.generation = 3;
  m.clock = 41;
  for (const TableSpec& s : TablesForJob(config)) {
    TrainedTable t;
    t.spec = s;
    if (IsRowTable(s)) t.keys = {0, 2, 3};
    const size_t n = IsRowTable(s) ? t.keys.size() * s.dim() : s.size();
    for (size_t i = 0; i < n; ++i)
      t.values.push_back(std::ldexp(std::sin(1.3f * static_cast<float>(i) + static_cast<float>(s.id())),
                                    static_cast<int>(i % 40) - 20));
    m.tables.push_back(std::move(t));
  }
  return m;
}

std::vector<JobConfig> EveryModelType() {
  JobConfig xmc;
  xmc.set_name("xmc");
  xmc.mutable_data()->set_num_features(6);
  xmc.mutable_data()->set_num_labels(4);
  xmc.mutable_model()->set_type(XMC_MLP);
  xmc.mutable_model()->set_hidden(3);
  JobConfig lr;
  lr.set_name("lr");
  lr.mutable_data()->set_format(LIBSVM);
  lr.mutable_data()->set_num_features(5);
  lr.mutable_model()->set_type(SPARSE_LR);
  JobConfig mlp;
  mlp.set_name("mlp");
  mlp.mutable_data()->set_format(LIBSVM);
  mlp.mutable_data()->set_num_features(4);
  mlp.mutable_data()->set_num_labels(3);
  mlp.mutable_data()->set_label_base(1);
  mlp.mutable_model()->set_type(DENSE_MLP);
  mlp.mutable_model()->add_hidden_layers(5);
  mlp.mutable_model()->add_hidden_layers(2);
  return {xmc, lr, mlp};
}

TEST(ModelFileRoundTrip, EveryModelTypeReadsBackBitForBitFromSafetensorsAndNpz) {
  for (const JobConfig& config : EveryModelType()) {
    SCOPED_TRACE(ModelType_Name(config.model().type()));
    const TrainedModel m = ModelOf(config);
    ASSERT_GE(m.tables.size(), 2u);
    LabelCounts counts;
    if (config.model().type() == XMC_MLP) counts = {{5, 0, 7, 1}, 9};
    const std::string stem = ::testing::TempDir() + "/model_export_test_" + std::to_string(getpid());
    for (const ModelFileFormat format : {ModelFileFormat::kSafetensors, ModelFileFormat::kNpz}) {
      const std::string path = stem + (format == ModelFileFormat::kNpz ? ".npz" : ".safetensors");
      ASSERT_TRUE(WriteModelFile(m, counts, path, format).ok());
      const StatusOr<ModelFileContents> r = ReadModelFile(path);
      std::remove(path.c_str());
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      EXPECT_EQ(r->model.config.SerializeAsString(), m.config.SerializeAsString());
      EXPECT_EQ(r->model.job_id, m.job_id);
      EXPECT_EQ(r->model.generation, 3u);
      EXPECT_EQ(r->model.clock, 41);
      ASSERT_EQ(r->model.tables.size(), m.tables.size());
      for (size_t i = 0; i < m.tables.size(); ++i) {
        const TrainedTable &got = r->model.tables[i], &want = m.tables[i];
        EXPECT_EQ(got.spec.SerializeAsString(), want.spec.SerializeAsString()) << want.spec.name();
        EXPECT_EQ(got.keys, want.keys) << want.spec.name();
        ASSERT_EQ(got.values.size(), want.values.size()) << want.spec.name();
        EXPECT_EQ(std::memcmp(got.values.data(), want.values.data(), want.values.size() * sizeof(float)), 0)
            << want.spec.name();
      }
      EXPECT_EQ(r->label_counts.counts, counts.counts);
      EXPECT_EQ(r->label_counts.num_rows, counts.num_rows);
      EXPECT_EQ(r->metadata, ModelFileMetadata(m, counts));
    }
  }
}

// data.tf_idf: the weights an export counts from the whole training split
// are the floats round 0 of the job finds from its workers' counts, for any
// number of workers, with data on demand too, validation rows left out (as
// TrainingRun leaves each worker's out); so are the label counts.
void ExpectExportCountsRoundZero(JobConfig c) {
  StatusOr<std::vector<float>> want = TrainingFeatureIdf(c);
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  ASSERT_EQ(want->size(), 6u);
  StatusOr<LabelCounts> labels = TrainingLabelCounts(c);
  ASSERT_TRUE(labels.ok()) << labels.status().ToString();
  for (const bool on_demand : {false, true}) {
    for (const int workers : {1, 2, 3}) {
      c.mutable_cluster()->set_num_workers(workers);
      c.mutable_train()->set_data_on_demand(on_demand);
      std::vector<EvalPartial> all;
      std::vector<uint64_t> label_sum(2, 0);
      for (int rank = 0; rank < workers; ++rank) {
        StatusOr<TrainingData> data = LoadTrainingData(c, rank, false);
        ASSERT_TRUE(data.ok()) << data.status().ToString();
        ASSERT_TRUE(TakeValidationShare(c, rank, workers, &data->rows).ok());
        TrainingCounts counts;
        ASSERT_TRUE(CountTrainingRows(c, rank, *data, [] { return Status::OK(); }, &counts).ok());
        for (size_t l = 0; l < counts.label_counts.size(); ++l) label_sum[l] += counts.label_counts[l];
        all.push_back(SetupPartial(rank, LabelKindOf(c), counts, 0));
      }
      StatusOr<EvalSetup> s = EvalSetupFrom(all, 0, workers, LabelKindOf(c), 0.55, 1.5);
      ASSERT_TRUE(s.ok()) << s.status().ToString();
      EXPECT_GT(s->train_rows, 0);
      EXPECT_LT(s->train_rows, 24) << "the validation rows are not counted";
      EXPECT_EQ(s->feature_idf, *want) << workers << " worker(s), on demand " << on_demand;
      EXPECT_EQ(labels->num_rows, s->train_rows) << workers << " worker(s), on demand " << on_demand;
      EXPECT_EQ(labels->counts, label_sum) << workers << " worker(s), on demand " << on_demand;
    }
  }
  c.mutable_data()->set_tf_idf(false);
  EXPECT_TRUE(TrainingFeatureIdf(c)->empty());
}

TEST(TrainingFeatureIdf, EqualsRoundZeroOfAnyNumberOfWorkers) {
  const testing::ScopedTempDir dir;
  std::string text = "24 6 2\n";
  for (int r = 0; r < 24; ++r) {
    text += std::to_string(r % 2);
    for (int f = 0; f < 6; ++f)
      if (f == r % 6 || (r * 7 + f * 3) % 5 < 2) text += " " + std::to_string(f) + ":1";
    text += "\n";
  }
  const std::string file = dir.File("tfidf.txt");
  std::ofstream(file) << text;
  JobConfig c;
  c.mutable_data()->set_format(XMC);
  c.mutable_data()->set_index_base(0);
  c.mutable_data()->set_num_features(6);
  c.mutable_data()->set_num_labels(2);
  c.mutable_data()->set_train_file(file);
  c.mutable_data()->set_tf_idf(true);
  c.mutable_train()->set_validation_fraction(0.25);
  ExpectExportCountsRoundZero(c);
  // The rows a split file names, one of them outside train_split.
  c.mutable_train()->set_validation_fraction(0);
  const std::string split = dir.File("train.split"), val = dir.File("val.split");
  std::ofstream(split) << "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n13\n14\n15\n16\n17\n18\n19\n20\n";
  std::ofstream(val) << "4\n9\n13\n17\n23\n";
  c.mutable_data()->set_train_split(split);
  c.mutable_data()->set_validation_split(val);
  ExpectExportCountsRoundZero(c);
  EXPECT_EQ(TrainingLabelCounts(c)->num_rows, 16);
}

}  // namespace
}  // namespace tether
