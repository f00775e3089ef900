// A model file's metadata must agree with its job_config, its tables and
// itself: each field edited in a file the writer made is refused naming the
// file, the field and both values; counts that cannot be are refused; an
// older file without some fields still reads.
#include "checkpoint/model_metadata.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <limits>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/testing/file_bytes.h"

namespace tether {
namespace {

// An XMC-shaped model of 4 features, 3 labels, 2 hidden units.
TrainedModel TinyModel() {
  TrainedModel m;
  m.config.mutable_data()->set_index_base(0);
  m.config.mutable_data()->set_num_features(4);
  m.config.mutable_data()->set_num_labels(3);
  m.config.mutable_data()->set_feature_scale(0.5f);
  m.config.mutable_model()->set_hidden(2);
  m.job_id = "tiny";
  auto row = [](uint32_t id, const std::string& name, uint32_t dim, uint64_t num_keys) {
    TrainedTable t;
    t.spec.set_id(id);
    t.spec.set_name(name);
    t.spec.set_kind(TableSpec::ROW);
    t.spec.set_dim(dim);
    t.spec.set_num_keys(num_keys);
    t.spec.set_key_base(0);
    return t;
  };
  TrainedTable w1 = row(0, "w1", 2, 4);
  w1.keys = {0, 3};
  w1.values = {1, 2, 3, 4};
  TrainedTable b1;
  b1.spec.set_id(1);
  b1.spec.set_name("b1");
  b1.spec.set_kind(TableSpec::DENSE);
  b1.spec.set_size(2);
  b1.values = {0.5f, -0.5f};
  TrainedTable w2 = row(2, "w2", 3, 3);
  w2.keys = {1};
  w2.values = {1, 2, 3};
  m.tables = {w1, b1, w2};
  return m;
}

LabelCounts TinyCounts() {
  LabelCounts c;
  c.counts = {5, 0, 2};
  c.num_rows = 6;
  return c;
}

class ModelMetadataTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(WriteModelFile(TinyModel(), TinyCounts(), path_, ModelFileFormat::kSafetensors).ok());
    good_ = testing::ReadFileBytes(path_);
    uint64_t n = 0;
    std::memcpy(&n, good_.data(), 8);
    header_ = nlohmann::json::parse(good_.substr(8, n));
    data_ = good_.substr(8 + n);
  }
  void TearDown() override { std::remove(path_.c_str()); }

  // The file's bytes with header `h` (the data unchanged).
  std::string WithHeader(const nlohmann::json& h) const {
    const std::string s = h.dump();
    std::string out(8, '\0');
    const uint64_t n = s.size();
    std::memcpy(&out[0], &n, 8);
    return out + s + data_;
  }
  // The file's bytes with metadata `key` set to `value` ("-": removed).
  std::string WithMeta(const std::string& key, const std::string& value) const {
    nlohmann::json h = header_;
    if (value == "-") {
      h["__metadata__"].erase(key);
    } else {
      h["__metadata__"][key] = value;
    }
    return WithHeader(h);
  }
  // Reading `bytes` is refused with the message path_ + ": " + `rest`.
  void ExpectRefused(const std::string& bytes, const std::string& rest) const {
    const StatusOr<ModelFileContents> r = ParseModelFile(path_, bytes);
    ASSERT_FALSE(r.ok()) << rest;
    EXPECT_EQ(r.status().message(), path_ + ": " + rest);
  }

  const std::string path_ =
      ::testing::TempDir() + "/model_metadata_test_" + std::to_string(getpid()) + ".safetensors";
  std::string good_, data_;
  nlohmann::json header_;
};

TEST_F(ModelMetadataTest, TheWritersOwnMetadataReads) {
  const StatusOr<ModelFileContents> r = ParseModelFile(path_, good_);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->metadata.at("num_labels"), "3");
  EXPECT_EQ(r->label_counts.counts, TinyCounts().counts);
  // A file without the fields a reader does not need (an older writer's).
  for (const char* key : {"hidden_layers", "feature_scale", "num_labels", "tables", "tf_idf"})
    EXPECT_TRUE(ParseModelFile(path_, WithMeta(key, "-")).ok()) << key;
  // A float written another way but equal as a float.
  EXPECT_TRUE(ParseModelFile(path_, WithMeta("feature_scale", "0.50")).ok());
}

TEST_F(ModelMetadataTest, FieldsThatDisagreeWithTheJobConfigAreRefused) {
  ExpectRefused(WithMeta("num_labels", "2"), "metadata 'num_labels' is '2' but the job_config's data.num_labels is 3");
  ExpectRefused(WithMeta("hidden", "128"), "metadata 'hidden' is '128' but the job_config's model.hidden is 2");
  ExpectRefused(WithMeta("normalize_rows", "true"),
                "metadata 'normalize_rows' is 'true' but the job_config's data.normalize_rows is false");
  ExpectRefused(WithMeta("num_features", "5"),
                "metadata 'num_features' is '5' but the job_config's data.num_features is 4");
  ExpectRefused(WithMeta("model_type", "SPARSE_LR"),
                "metadata 'model_type' is 'SPARSE_LR' but the job_config's model.type is XMC_MLP");
  ExpectRefused(WithMeta("index_base", "1"), "metadata 'index_base' is '1' but the job_config's data.index_base is 0");
  ExpectRefused(WithMeta("hidden_layers", "[3]"),
                "metadata 'hidden_layers' is '[3]' but the job_config's model.hidden_layers is [2]");
  ExpectRefused(WithMeta("feature_scale", "0.25"),
                "metadata 'feature_scale' is '0.25' but the job_config's data.feature_scale is 0.5");
  ExpectRefused(WithMeta("feature_scale", "nan"),
                "metadata 'feature_scale' is 'nan': not a finite number (the job_config's data.feature_scale is 0.5)");
  ExpectRefused(WithMeta("feature_offset", "inf"),
                "metadata 'feature_offset' is 'inf': not a finite number (the job_config's data.feature_offset is 0)");
  ExpectRefused(WithMeta("feature_offset", "0x"),
                "metadata 'feature_offset' is '0x': not a finite number (the job_config's data.feature_offset is 0)");
}

TEST_F(ModelMetadataTest, ANonFiniteJobConfigIsRefused) {
  TrainedModel m = TinyModel();
  m.config.mutable_data()->set_feature_scale(std::numeric_limits<float>::quiet_NaN());
  ASSERT_TRUE(WriteModelFile(m, TinyCounts(), path_, ModelFileFormat::kSafetensors).ok());
  const StatusOr<ModelFileContents> r = ReadModelFile(path_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), path_ + ": the job_config's data.feature_scale is nan: not a finite number");
}

TEST_F(ModelMetadataTest, TablesThatDisagreeWithTheTableSpecsAreRefused) {
  nlohmann::json tables = nlohmann::json::parse(header_["__metadata__"]["tables"].get<std::string>());
  nlohmann::json edited = tables;
  edited[2]["num_keys"] = 2;
  ExpectRefused(WithMeta("tables", edited.dump()),
                "metadata 'tables' entry 2 field num_keys is 2 but the file's table_spec.w2 (and its keys) say 3");
  edited = tables;
  edited[0]["rows"] = 7;
  ExpectRefused(WithMeta("tables", edited.dump()),
                "metadata 'tables' entry 0 field rows is 7 but the file's table_spec.w1 (and its keys) say 2");
  edited = tables;
  edited.erase(1);
  ExpectRefused(WithMeta("tables", edited.dump()),
                "metadata 'tables' lists 2 tables but the file's table specs are 3");
  ExpectRefused(WithMeta("tables", "{"), "metadata 'tables' is not a JSON array");
  edited = tables;
  edited[0].erase("rows");  // an older writer's entry
  EXPECT_TRUE(ParseModelFile(path_, WithMeta("tables", edited.dump())).ok());
}

TEST_F(ModelMetadataTest, LabelCountsThatCannotBeAreRefused) {
  // label 2's count (the tensor's last 8 bytes) set to 10^15, with 6 rows counted.
  std::string bytes = good_;
  const uint64_t huge = 1000000000000000ull;
  const uint64_t end = header_["label_counts"]["data_offsets"][1].get<uint64_t>();
  std::memcpy(&bytes[bytes.size() - data_.size() + end - 8], &huge, 8);
  ExpectRefused(bytes, "tensor 'label_counts': label 2's count 1000000000000000 is above metadata "
                       "'label_counts_rows' 6 (the training rows counted; a negative I64 count reads as a large one)");
  ExpectRefused(WithMeta("label_counts_rows", "4"),
                "tensor 'label_counts': label 0's count 5 is above metadata 'label_counts_rows' 4 (the training "
                "rows counted; a negative I64 count reads as a large one)");
  ExpectRefused(WithMeta("label_counts_rows", "-1"),
                "metadata 'label_counts_rows' is -1: the training rows counted cannot be negative");
  // Counts for another number of labels: the tensor's shape says 2 (its
  // first 16 bytes), the data keeps 8 bytes more, moved to a tensor no
  // table names.
  nlohmann::json h = header_;
  const uint64_t begin = h["label_counts"]["data_offsets"][0].get<uint64_t>();
  h["label_counts"]["shape"] = {2};
  h["label_counts"]["data_offsets"] = {begin, begin + 16};
  h["spare"] = {{"dtype", "U64"}, {"shape", {1}}, {"data_offsets", {begin + 16, begin + 24}}};
  ExpectRefused(WithHeader(h), "tensor 'label_counts' has 2 counts but the job_config's data.num_labels is 3");
}

}  // namespace
}  // namespace tether
