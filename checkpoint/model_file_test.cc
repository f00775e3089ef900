// Model files: a safetensors round trip is bit for bit; the file follows the
// published layout (parsed here by hand, not by the reader); malformed files
// are refused naming the file and the tensor; an npz is a zip of NPY files.
#include "checkpoint/model_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <utility>

#include <nlohmann/json.hpp>

#include "checkpoint/model_tensors.h"
#include "tests/testing/file_bytes.h"

namespace tether {
namespace {

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/model_file_test_" + std::to_string(getpid()) + "_" + name;
}

std::string ReadAll(const std::string& path) { return testing::ReadFileBytes(path); }
void WriteAll(const std::string& path, const std::string& bytes) { testing::WriteFileBytes(path, bytes); }

// An XMC-shaped model: w1 (row, dim 3, keys 2, 5, 9), b1 (dense, 3), w2
// (row, dim 4, keys 0, 1); values include the largest float, -0 and a
// denormal so "bit for bit" means it (a NaN is refused: see
// NonFiniteWeightsAreRefused).
TrainedModel SmallModel() {
  TrainedModel m;
  m.config.set_name("small");
  m.config.mutable_data()->set_index_base(1);
  m.config.mutable_data()->set_num_features(10);
  m.config.mutable_data()->set_num_labels(2);
  m.config.mutable_data()->set_feature_scale(0.1f);
  m.config.mutable_model()->set_hidden(3);
  m.job_id = "small-job";
  m.generation = 2;
  m.clock = 17;
  auto table = [](uint32_t id, const std::string& name, bool row, uint32_t width) {
    TrainedTable t;
    t.spec.set_id(id);
    t.spec.set_name(name);
    t.spec.set_kind(row ? TableSpec::ROW : TableSpec::DENSE);
    if (row) {
      t.spec.set_dim(width);
    } else {
      t.spec.set_size(width);
    }
    t.spec.mutable_init()->set_kind(row ? TableInitializer::UNIFORM : TableInitializer::ZEROS);
    t.spec.mutable_init()->set_bound(row ? 0.25f : 0.0f);
    t.spec.mutable_init()->set_seed(7);
    return t;
  };
  TrainedTable w1 = table(0, "w1", true, 3);
  w1.keys = {2, 5, 9};
  w1.values = {1.5f, -0.0f, std::numeric_limits<float>::denorm_min(), 3, 4, 5, 6, 7, 8};
  uint32_t max_bits = 0x7f7fffff;
  std::memcpy(&w1.values[4], &max_bits, 4);
  TrainedTable b1 = table(1, "b1", false, 3);
  b1.values = {0.5f, -0.5f, 1e-30f};
  TrainedTable w2 = table(2, "w2", true, 4);
  w2.keys = {0, 1};
  w2.values = {1, 2, 3, 4, 5, 6, 7, 8};
  m.tables = {w1, b1, w2};
  return m;
}

LabelCounts SmallCounts() {
  LabelCounts c;
  c.counts = {3, 11};
  c.num_rows = 12;
  return c;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(ModelFileTest, SafetensorsRoundTripIsBitForBit) {
  const TrainedModel m = SmallModel();
  const std::string path = TempPath("rt.safetensors");
  ASSERT_TRUE(WriteModelFile(m, SmallCounts(), path, ModelFileFormat::kSafetensors).ok());
  StatusOr<ModelFileContents> r = ReadSafetensorsModel(path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const TrainedModel& got = r->model;
  EXPECT_EQ(got.config.SerializeAsString(), m.config.SerializeAsString());
  EXPECT_EQ(got.job_id, "small-job");
  EXPECT_EQ(got.generation, 2u);
  EXPECT_EQ(got.clock, 17);
  ASSERT_EQ(got.tables.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(got.tables[i].spec.SerializeAsString(), m.tables[i].spec.SerializeAsString()) << i;
    EXPECT_EQ(got.tables[i].keys, m.tables[i].keys) << i;
    EXPECT_TRUE(SameBits(got.tables[i].values, m.tables[i].values)) << i;
  }
  EXPECT_EQ(r->label_counts.counts, SmallCounts().counts);
  EXPECT_EQ(r->label_counts.num_rows, 12);
  // Without counts there is no label_counts tensor, and the reader says so.
  ASSERT_TRUE(WriteModelFile(m, LabelCounts{}, path, ModelFileFormat::kSafetensors).ok());
  r = ReadSafetensorsModel(path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->label_counts.empty());
  std::remove(path.c_str());
}

// The published layout, read here without the library's reader: 8-byte LE
// header length, a JSON header, then little-endian data at data_offsets.
TEST(ModelFileTest, SafetensorsFollowsThePublishedLayout) {
  const TrainedModel m = SmallModel();
  const std::string path = TempPath("layout.safetensors");
  ASSERT_TRUE(WriteModelFile(m, SmallCounts(), path, ModelFileFormat::kSafetensors).ok());
  const std::string f = ReadAll(path);
  ASSERT_GE(f.size(), 8u);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(f[i]);  // little-endian by hand
  ASSERT_LE(n, f.size() - 8);
  EXPECT_EQ(n % 8, 0u) << "header padded to 8 bytes";
  const nlohmann::json h = nlohmann::json::parse(f.substr(8, n));
  const std::string data = f.substr(8 + n);
  auto expect_tensor = [&](const std::string& name, const std::string& dtype, std::vector<uint64_t> shape,
                           const void* bytes, size_t size) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(h.contains(name));
    EXPECT_EQ(h[name]["dtype"], dtype);
    EXPECT_EQ(h[name]["shape"].get<std::vector<uint64_t>>(), shape);
    const uint64_t b = h[name]["data_offsets"][0], e = h[name]["data_offsets"][1];
    ASSERT_EQ(e - b, size);
    ASSERT_LE(e, data.size());
    EXPECT_EQ(std::memcmp(data.data() + b, bytes, size), 0);
  };
  expect_tensor("w1.keys", "U64", {3}, m.tables[0].keys.data(), 24);
  expect_tensor("w1", "F32", {3, 3}, m.tables[0].values.data(), 36);
  expect_tensor("b1", "F32", {3}, m.tables[1].values.data(), 12);
  expect_tensor("w2.keys", "U64", {2}, m.tables[2].keys.data(), 16);
  expect_tensor("w2", "F32", {2, 4}, m.tables[2].values.data(), 32);
  const std::vector<uint64_t> counts = SmallCounts().counts;
  expect_tensor("label_counts", "U64", {2}, counts.data(), 16);
  // Every data byte belongs to exactly one tensor.
  uint64_t total = 0;
  for (auto it = h.begin(); it != h.end(); ++it)
    if (it.key() != "__metadata__")
      total += it.value()["data_offsets"][1].get<uint64_t>() - it.value()["data_offsets"][0].get<uint64_t>();
  EXPECT_EQ(total, data.size());
  const nlohmann::json& meta = h["__metadata__"];
  EXPECT_EQ(meta["format"], "tether-model");
  EXPECT_EQ(meta["model_type"], "XMC_MLP");
  EXPECT_EQ(meta["index_base"], "1");
  EXPECT_EQ(meta["num_labels"], "2");
  EXPECT_EQ(meta["feature_scale"], "0.100000001");
  EXPECT_EQ(meta["normalize_rows"], "false");
  EXPECT_EQ(meta["clock"], "17");
  EXPECT_EQ(meta["label_counts_rows"], "12");
  const nlohmann::json tables = nlohmann::json::parse(meta["tables"].get<std::string>());
  ASSERT_EQ(tables.size(), 3u);
  EXPECT_EQ(tables[0]["name"], "w1");
  EXPECT_EQ(tables[0]["init"]["kind"], "UNIFORM");
  EXPECT_EQ(tables[0]["init"]["seed"], 7);
  EXPECT_DOUBLE_EQ(tables[0]["init"]["bound"].get<double>(), 0.25);
  EXPECT_NE(meta["job_config"].get<std::string>().find("index_base: 1"), std::string::npos);
  std::remove(path.c_str());
}

// Rewrites the file with header JSON `h` and data `data`.
std::string WithHeader(const nlohmann::json& h, const std::string& data) {
  const std::string s = h.dump();
  std::string out(8, '\0');
  uint64_t n = s.size();
  std::memcpy(&out[0], &n, 8);
  return out + s + data;
}

TEST(ModelFileTest, MalformedFilesAreRefusedNamingFileAndTensor) {
  const std::string path = TempPath("bad.safetensors");
  ASSERT_TRUE(WriteModelFile(SmallModel(), SmallCounts(), path, ModelFileFormat::kSafetensors).ok());
  const std::string good = ReadAll(path);
  uint64_t n = 0;
  std::memcpy(&n, good.data(), 8);
  const nlohmann::json h = nlohmann::json::parse(good.substr(8, n));
  const std::string data = good.substr(8 + n);
  auto refused = [&](const std::string& bytes, const std::string& needle) {
    WriteAll(path, bytes);
    const StatusOr<ModelFileContents> r = ReadSafetensorsModel(path);
    EXPECT_FALSE(r.ok()) << needle;
    if (r.ok()) return;
    EXPECT_NE(r.status().message().find(path), std::string::npos) << r.status().ToString();
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().ToString();
  };
  refused(good.substr(0, 5), "shorter than the 8-byte header length");
  {
    std::string b = good;
    const uint64_t huge = good.size();
    std::memcpy(&b[0], &huge, 8);
    refused(b, "runs past the end of the file");
  }
  refused(good.substr(0, 8) + std::string(n, '{') + data, "not valid JSON");
  refused(good.substr(0, good.size() - 4), "data_offsets");  // truncated data
  {
    nlohmann::json x = h;
    x["w1"]["data_offsets"][1] = x["w1"]["data_offsets"][1].get<uint64_t>() + 4;
    refused(WithHeader(x, data), "tensor 'w1'");
  }
  {
    nlohmann::json x = h;
    x["b1"]["dtype"] = "F16";
    refused(WithHeader(x, data), "tensor 'b1': dtype F16");
  }
  {
    nlohmann::json x = h;
    x["w2"]["shape"] = {4, 2};  // same bytes, wrong shape for dim 4
    refused(WithHeader(x, data), "tensor 'w2': shape [4, 2]");
  }
  {
    nlohmann::json x = h;  // renamed: the layout holds, the model lacks its table
    x["b1_renamed"] = x["b1"];
    x.erase("b1");
    refused(WithHeader(x, data), "tensor 'b1' is missing");
  }
  {
    nlohmann::json x = h;  // a gap: b1 dropped from the header, its bytes left
    x.erase("b1");
    refused(WithHeader(x, data), "must be contiguous");
  }
  std::remove(path.c_str());
}

// Every size in a model file is checked before anything is allocated, and
// a weight that is not finite is refused, naming the tensor and the place.
TEST(ModelFileTest, NonFiniteWeightsAndOversizedHeadersAreRefused) {
  const std::string path = TempPath("nonfinite.safetensors");
  TrainedModel m = SmallModel();
  m.tables[0].values[4] = std::numeric_limits<float>::quiet_NaN();  // key 5, column 1
  m.tables[1].values[2] = std::numeric_limits<float>::infinity();
  ASSERT_TRUE(WriteModelFile(m, SmallCounts(), path, ModelFileFormat::kSafetensors).ok());
  StatusOr<ModelFileContents> r = ReadSafetensorsModel(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kDataLoss);
  EXPECT_EQ(r.status().message(),
            path + ": tensor 'w1' holds NaN in the row of key 5, column 1: a model's weights must be finite");
  m.tables[0].values[4] = 1.0f;
  ASSERT_TRUE(WriteModelFile(m, SmallCounts(), path, ModelFileFormat::kSafetensors).ok());
  r = ReadSafetensorsModel(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), path + ": tensor 'b1' holds +inf at index 2: a model's weights must be finite");
  // A header length past safetensors' 100 MiB bound is refused as such, even
  // in a file that is long enough (sparse: nothing is written in between).
  std::string bytes(8, '\0');
  const uint64_t n = (100ull << 20) + 1;
  std::memcpy(&bytes[0], &n, 8);
  WriteAll(path, bytes);
  ASSERT_EQ(truncate(path.c_str(), static_cast<off_t>(n + 64)), 0);
  r = ReadSafetensorsModel(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            path + ": header: header length 104857601 is above the 104857600-byte limit of safetensors headers");
  std::remove(path.c_str());
}

// A row table's keys lie in [0, num_keys): a key outside (the last one
// edited in place, as a hand-made file would have it) is refused naming the
// file, the tensor, the key and the range (the check is the one both
// containers' readers share: ModelOfTensors); so is
// 2^64 - 1 in a table of hashed ids read under index base 1 (an id i is key
// i - 1), while under base 0 every uint64 is a key. The writer refuses such
// keys too.
TEST(ModelFileTest, KeysOutsideTheTableAreRefused) {
  TrainedModel m = SmallModel();
  m.tables[0].spec.set_num_keys(10);  // w1: keys 2, 5, 9
  m.tables[0].spec.set_key_base(1);
  m.tables[2].spec.set_num_keys(2);   // w2: keys 0, 1
  m.tables[2].spec.set_key_base(1);
  const std::string path = TempPath("keys.safetensors");
  ASSERT_TRUE(WriteModelFile(m, SmallCounts(), path, ModelFileFormat::kSafetensors).ok());
  ASSERT_TRUE(ReadModelFile(path).ok());
  const std::string good = ReadAll(path);
  // The file with the last key of `tensor` set to `key`.
  auto with_last_key = [&](const std::string& bytes, const std::string& tensor, uint64_t key) {
    uint64_t len = 0;
    std::memcpy(&len, bytes.data(), 8);
    const nlohmann::json hh = nlohmann::json::parse(bytes.substr(8, len));
    std::string b = bytes;
    std::memcpy(&b[8 + len + hh[tensor]["data_offsets"][1].get<uint64_t>() - 8], &key, 8);
    return b;
  };
  Status st = ParseModelFile(path, with_last_key(good, "w2.keys", 2)).status();
  EXPECT_EQ(st.code(), Status::Code::kDataLoss);
  EXPECT_EQ(st.message(), path + ": tensor 'w2.keys': key 2 at position 1 is outside the table's keys [0, 2) "
                                 "(its spec's num_keys)");
  st = ParseModelFile(path, with_last_key(good, "w1.keys", 1000000000000ull)).status();
  EXPECT_EQ(st.message(), path + ": tensor 'w1.keys': key 1000000000000 at position 2 is outside the table's "
                                 "keys [0, 10) (its spec's num_keys)");
  EXPECT_TRUE(ParseModelFile(path, with_last_key(good, "w1.keys", 9)).ok());  // the largest key is in
  // Hashed ids (num_keys 0).
  m.tables[0].spec.set_num_keys(0);
  ASSERT_TRUE(WriteModelFile(m, SmallCounts(), path, ModelFileFormat::kSafetensors).ok());
  const std::string hashed = ReadAll(path);
  const uint64_t top = std::numeric_limits<uint64_t>::max();
  EXPECT_TRUE(ParseModelFile(path, with_last_key(hashed, "w1.keys", top - 1)).ok());
  st = ParseModelFile(path, with_last_key(hashed, "w1.keys", top)).status();
  EXPECT_EQ(st.message(), path + ": tensor 'w1.keys': key 18446744073709551615 at position 2 is outside the "
                                 "table's keys [0, 18446744073709551614] (hashed ids under index base 1: an id i "
                                 "is key i - 1)");
  m.tables[0].spec.set_key_base(0);
  ASSERT_TRUE(WriteModelFile(m, SmallCounts(), path, ModelFileFormat::kSafetensors).ok());
  EXPECT_TRUE(ParseModelFile(path, with_last_key(ReadAll(path), "w1.keys", top)).ok());
  // The writer: never written.
  m.tables[2].keys = {0, 2};
  EXPECT_EQ(WriteModelFile(m, SmallCounts(), path, ModelFileFormat::kSafetensors).message(),
            "table 'w2': key 2 at position 1 is outside the table's keys [0, 2) (its spec's num_keys)");
  std::remove(path.c_str());
}

TEST(ModelFileTest, InconsistentModelIsRefusedBeforeWriting) {
  TrainedModel m = SmallModel();
  m.tables[0].values.pop_back();
  const std::string path = TempPath("never.safetensors");
  const Status st = WriteModelFile(m, SmallCounts(), path, ModelFileFormat::kSafetensors);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("table 'w1'"), std::string::npos) << st.ToString();
  EXPECT_NE(access(path.c_str(), F_OK), 0) << "nothing written";
  m = SmallModel();
  LabelCounts c = SmallCounts();
  c.counts.push_back(1);
  EXPECT_FALSE(WriteModelFile(m, c, path, ModelFileFormat::kSafetensors).ok());
}

// data.tf_idf: the input's weights travel in both formats bit for bit; a
// file claiming tf_idf without well-formed weights is refused naming the
// file and the tensor; a writer is refused weights that do not fit.
TEST(ModelFileTest, TfIdfWeightsTravelAndAreRequired) {
  TrainedModel m = SmallModel();
  m.config.mutable_data()->set_tf_idf(true);
  const std::vector<float> idf = {1.0f, 1.6931472f, 2.3862944f, 1, 1, 1, 1, 1, 1, 3.5f};
  for (const ModelFileFormat format : {ModelFileFormat::kSafetensors, ModelFileFormat::kNpz}) {
    const std::string path = TempPath(format == ModelFileFormat::kNpz ? "idf.npz" : "idf.safetensors");
    ASSERT_TRUE(WriteModelFile(m, SmallCounts(), idf, path, format).ok());
    StatusOr<ModelFileContents> r = ReadModelFile(path);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_TRUE(SameBits(r->feature_idf, idf));
    EXPECT_EQ(r->metadata.at("tf_idf"), "true");
    std::remove(path.c_str());
  }
  const std::string path = TempPath("idf.safetensors");
  // Weights of another width, or for a model without tf_idf: never written.
  EXPECT_EQ(WriteModelFile(m, SmallCounts(), {1, 2}, path, ModelFileFormat::kSafetensors).message(),
            "feature_idf has 2 entries but the model (data.tf_idf true) has data.num_features 10");
  EXPECT_FALSE(WriteModelFile(m, SmallCounts(), path, ModelFileFormat::kSafetensors).ok());
  TrainedModel plain = SmallModel();
  plain.config.mutable_data()->set_tf_idf(false);
  EXPECT_FALSE(WriteModelFile(plain, SmallCounts(), idf, path, ModelFileFormat::kSafetensors).ok());
  EXPECT_NE(access(path.c_str(), F_OK), 0) << "nothing written";
  // A file whose config says tf_idf but holds no weights (same-length edits
  // of a model written without them).
  ASSERT_TRUE(WriteModelFile(plain, SmallCounts(), path, ModelFileFormat::kSafetensors).ok());
  std::string f = ReadAll(path);
  for (const auto& [from, to] : {std::pair<std::string, std::string>{"tf_idf: false", "tf_idf: true "},
                                 {"\"tf_idf\":\"false\"", "\"tf_idf\":\"true\" "}}) {
    const size_t at = f.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    f.replace(at, from.size(), to);
  }
  EXPECT_EQ(ParseModelFile(path, f).status().message(),
            path + ": data.tf_idf is true but tensor 'feature_idf' (the input's feature weights) is missing");
  // A weight that is NaN: the last tensor's last float.
  ASSERT_TRUE(WriteModelFile(m, SmallCounts(), idf, path, ModelFileFormat::kSafetensors).ok());
  f = ReadAll(path);
  const uint32_t nan_bits = 0x7fc00000;
  std::memcpy(&f[f.size() - 4], &nan_bits, 4);
  const Status st = ParseModelFile(path, f).status();
  EXPECT_EQ(st.code(), Status::Code::kDataLoss);
  EXPECT_EQ(st.message(), path + ": tensor 'feature_idf': feature 9's weight is nan: every weight must be finite and > 0");
  std::remove(path.c_str());
}

// The npz is a zip of NPY 1.0 files, stored (numpy.load's own test is
// tests/integration, which runs numpy itself).
TEST(ModelFileTest, NpzIsAZipOfNpyFiles) {
  const std::string path = TempPath("m.npz");
  ASSERT_TRUE(WriteModelFile(SmallModel(), SmallCounts(), path, ModelFileFormat::kNpz).ok());
  const std::string f = ReadAll(path);
  ASSERT_GE(f.size(), 4u);
  EXPECT_EQ(f.substr(0, 4), std::string("PK\x03\x04", 4));
  // Stored entries: each NPY header appears verbatim in the archive.
  EXPECT_NE(f.find("w1.keys.npy"), std::string::npos);
  EXPECT_NE(f.find("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 3), }"), std::string::npos);
  EXPECT_NE(f.find("{'descr': '<u8', 'fortran_order': False, 'shape': (3,), }"), std::string::npos);
  EXPECT_NE(f.find(std::string("\x93NUMPY\x01\x00", 8)), std::string::npos);
  EXPECT_NE(f.find("__metadata__.npy"), std::string::npos);
  std::remove(path.c_str());
}

// A FIFO that no process writes (a blocking open() would never return) or
// a character device (never ends) given as a model file: tether-predict's
// and tether-export's checks and reads refuse it at once, naming it and what
// it is, before a byte is read.
TEST(ModelFileTest, AFifoOrADeviceAsTheModelFileIsRefusedAtOnce) {
  const std::string fifo = TempPath("fifo.safetensors");
  std::remove(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string link = TempPath("zero.safetensors");
  std::remove(link.c_str());
  ASSERT_EQ(::symlink("/dev/zero", link.c_str()), 0);
  for (const std::string& path : {fifo, link, std::string("/dev/zero")}) {
    const std::string want =
        path + (path == fifo ? ": is a FIFO (named pipe)" : ": is a character device") + ", not a regular file";
    const auto start = std::chrono::steady_clock::now();
    const Status checked = CheckModelFilePath(path);
    EXPECT_EQ(checked.code(), Status::Code::kInvalidArgument);
    EXPECT_EQ(checked.message(), want);
    EXPECT_EQ(ReadModelFile(path).status().message(), want);
    EXPECT_EQ(ReadSafetensorsModel(path).status().message(), want);
    // The read on its own checks the descriptor it reads, not the name again.
    const StatusOr<std::string> whole = model_file_internal::ReadWholeFile(path);
    EXPECT_EQ(whole.status().code(), Status::Code::kInvalidArgument);
    EXPECT_EQ(whole.status().message(), want);
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5)) << path;
  }
  std::remove(fifo.c_str());
  std::remove(link.c_str());
  EXPECT_EQ(model_file_internal::ReadWholeFile(fifo).status().message(), fifo + ": no such file");
}

}  // namespace
}  // namespace tether
