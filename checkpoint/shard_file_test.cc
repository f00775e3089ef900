// The shard-file format without a server: tables given as plain arrays are
// written, read back row by row in the file's order, loaded as a
// TrainedModel (rows sorted by key, weights only), and refused when the file
// is cut short or is not a shard file.
#include "checkpoint/shard_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "checkpoint/trained_model.h"
#include "tests/testing/temp_dir.h"

namespace tether {
namespace {

// w: a ROW table of dim 2 under AdaGrad (each row: 2 weights, 2
// accumulators), b: a DENSE table of 5 weights under SGD (no state).
TableSpec RowSpec() {
  TableSpec s;
  s.set_id(0);
  s.set_name("w");
  s.set_kind(TableSpec::ROW);
  s.set_dim(2);
  s.mutable_optimizer()->set_type(ADAGRAD);
  return s;
}

TableSpec DenseSpec() {
  TableSpec s;
  s.set_id(1);
  s.set_name("b");
  s.set_kind(TableSpec::DENSE);
  s.set_size(5);
  s.mutable_optimizer()->set_type(SGD);
  return s;
}

struct Fixture {
  TableSpec row_spec = RowSpec();
  TableSpec dense_spec = DenseSpec();
  // Rows as they lie in memory: keys 30, 10, 20 (not sorted).
  std::vector<uint64_t> keys = {30, 10, 20};
  std::vector<float> rows = {3.0f, 3.5f, 0.3f, 0.35f,   // key 30
                             1.0f, 1.5f, 0.1f, 0.15f,   // key 10
                             2.0f, 2.5f, 0.2f, 0.25f};  // key 20
  std::vector<float> dense = {0.5f, 1.5f, 2.5f, 3.5f, 4.5f};

  std::vector<ShardFileTable> Tables() const {
    std::vector<ShardFileTable> t(2);
    t[0].spec = &row_spec;
    t[0].version = 7;
    t[0].stride = 4;
    t[0].keys = keys;
    t[0].data = rows.data();
    t[0].floats = rows.size();
    t[1].spec = &dense_spec;
    t[1].version = 3;
    t[1].stride = 1;
    t[1].dense_begin = 0;
    t[1].dense_end = 5;
    t[1].data = dense.data();
    t[1].floats = dense.size();
    return t;
  }

  // A one-shard checkpoint at clock 12 under `parent`; returns its directory.
  std::string Write(const std::string& parent) const {
    const std::string dir = parent + "/" + CheckpointDirName(12, false);
    CheckpointManifest m;
    m.set_format_version(kCheckpointFormatVersion);
    m.set_clock(12);
    m.set_num_servers(1);
    *m.add_tables() = row_spec;
    *m.add_tables() = dense_spec;
    EXPECT_TRUE(WriteShardFile(FileSystem::Default(), dir, 0, 1, 12, Tables(), m.add_files()).ok());
    EXPECT_TRUE(WriteManifest(FileSystem::Default(), dir, m).ok());
    return dir;
  }
};

TEST(ShardFileTest, TheFileIsTheHeaderThenEachTablesKeysAndFloatsAsTheyLieInMemory) {
  testing::ScopedTempDir tmp;
  Fixture fx;
  const std::string dir = fx.Write(tmp.path());
  std::ifstream in(dir + "/" + ShardFileName(0), std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(bytes.size(), 12u);
  EXPECT_EQ(bytes.substr(0, 8), "TTHRCKPT");
  const auto* u = reinterpret_cast<const unsigned char*>(bytes.data());
  const uint32_t len = u[8] | (uint32_t{u[9]} << 8) | (uint32_t{u[10]} << 16) | (uint32_t{u[11]} << 24);
  ShardCheckpointHeader h;
  ASSERT_TRUE(h.ParseFromString(bytes.substr(12, len)));
  EXPECT_EQ(h.format_version(), kCheckpointFormatVersion);
  EXPECT_EQ(h.clock(), 12);
  ASSERT_EQ(h.tables_size(), 2);
  EXPECT_EQ(h.tables(0).rows(), 3u);
  EXPECT_EQ(h.tables(0).stride(), 4u);
  EXPECT_EQ(h.tables(0).version(), 7u);
  EXPECT_EQ(h.tables(0).optimizer(), ADAGRAD);
  EXPECT_EQ(h.tables(1).dense_end(), 5u);
  EXPECT_EQ(h.tables(1).state_floats(), 0u);
  EXPECT_EQ(h.tables(1).version(), 3u);
  const size_t body = 12 + len;
  ASSERT_EQ(bytes.size(), body + 3 * 8 + 12 * 4 + 5 * 4);
  EXPECT_EQ(0, std::memcmp(bytes.data() + body, fx.keys.data(), 3 * 8));
  EXPECT_EQ(0, std::memcmp(bytes.data() + body + 24, fx.rows.data(), 12 * 4));
  EXPECT_EQ(0, std::memcmp(bytes.data() + body + 24 + 48, fx.dense.data(), 5 * 4));
}

TEST(ShardFileTest, ReadGivesEveryRowAndSliceInTheFilesOrder) {
  testing::ScopedTempDir tmp;
  Fixture fx;
  const std::string dir = fx.Write(tmp.path());
  StatusOr<CheckpointManifest> m = ReadManifest(dir);
  ASSERT_TRUE(m.ok()) << m.status().message();
  std::vector<uint64_t> keys;
  std::vector<float> rows, dense;
  const Status st = ReadShardFile(
      dir, *m, 0,
      [&](int i, const ShardCheckpointHeader::Table& t, uint64_t key, const float* v) {
        EXPECT_EQ(i, 0);
        keys.push_back(key);
        rows.insert(rows.end(), v, v + t.stride());
        return Status::OK();
      },
      [&](int i, const ShardCheckpointHeader::Table& t, const float* v) {
        EXPECT_EQ(i, 1);
        dense.assign(v, v + (t.dense_end() - t.dense_begin()) + t.state_floats());
        return Status::OK();
      });
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(keys, fx.keys);
  EXPECT_EQ(rows, fx.rows);
  EXPECT_EQ(dense, fx.dense);
  // A callback's error stops the read and comes back as it was.
  const Status stop = ReadShardFile(
      dir, *m, 0, [](int, const ShardCheckpointHeader::Table&, uint64_t, const float*) {
        return Status::InvalidArgument("stop here");
      },
      [](int, const ShardCheckpointHeader::Table&, const float*) { return Status::OK(); });
  EXPECT_EQ(stop.message(), "stop here");
}

TEST(ShardFileTest, LoadTrainedModelSortsRowsByKeyAndDropsTheOptimizerState) {
  testing::ScopedTempDir tmp;
  Fixture fx;
  fx.Write(tmp.path());
  StatusOr<TrainedModel> model = LoadTrainedModel(tmp.path());
  ASSERT_TRUE(model.ok()) << model.status().message();
  EXPECT_EQ(model->clock, 12);
  ASSERT_EQ(model->tables.size(), 2u);
  EXPECT_EQ(model->tables[0].keys, (std::vector<uint64_t>{10, 20, 30}));
  EXPECT_EQ(model->tables[0].values, (std::vector<float>{1.0f, 1.5f, 2.0f, 2.5f, 3.0f, 3.5f}));
  EXPECT_EQ(model->tables[1].values, fx.dense);
}

TEST(ShardFileTest, ACutShortOrForeignFileIsRefusedNamingIt) {
  testing::ScopedTempDir tmp;
  Fixture fx;
  const std::string dir = fx.Write(tmp.path());
  StatusOr<CheckpointManifest> m = ReadManifest(dir);
  ASSERT_TRUE(m.ok());
  const std::string file = dir + "/" + ShardFileName(0);
  auto none = [](int, const ShardCheckpointHeader::Table&, uint64_t, const float*) { return Status::OK(); };
  auto none_dense = [](int, const ShardCheckpointHeader::Table&, const float*) { return Status::OK(); };
  const uint64_t full = std::filesystem::file_size(file);
  std::filesystem::resize_file(file, full - 4);
  Status st = ReadShardFile(dir, *m, 0, none, none_dense);
  EXPECT_EQ(st.code(), Status::Code::kDataLoss);
  EXPECT_EQ(st.message(), file + ": " + std::to_string(full - 4) + " bytes on disk, but the manifest says " +
                              std::to_string(full) + " (a truncated or replaced file)");
  {
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out << std::string(full, 'x');
  }
  st = ReadShardFile(dir, *m, 0, none, none_dense);
  EXPECT_EQ(st.message(), file + ": not a Tether shard checkpoint (bad magic number)");
  EXPECT_EQ(ReadShardFile(dir, *m, 1, none, none_dense).message(), dir + "/MANIFEST: lists no " + ShardFileName(1));
}

// A FIFO that no process writes (a blocking open() would never return) or a
// link to /dev/zero (never ends) in place of a shard file: a resume or an
// export refuses it at once, naming it and what it is.
TEST(ShardFileTest, AFifoOrADeviceInPlaceOfAShardFileIsRefusedAtOnce) {
  testing::ScopedTempDir tmp;
  Fixture fx;
  const std::string dir = fx.Write(tmp.path());
  StatusOr<CheckpointManifest> m = ReadManifest(dir);
  ASSERT_TRUE(m.ok());
  const std::string file = dir + "/" + ShardFileName(0);
  auto none = [](int, const ShardCheckpointHeader::Table&, uint64_t, const float*) { return Status::OK(); };
  auto none_dense = [](int, const ShardCheckpointHeader::Table&, const float*) { return Status::OK(); };
  std::filesystem::remove(file);
  ASSERT_EQ(::mkfifo(file.c_str(), 0600), 0);
  const auto start = std::chrono::steady_clock::now();
  Status st = ReadShardFile(dir, *m, 0, none, none_dense);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(st.message(), file + ": is a FIFO (named pipe), not a regular file");
  EXPECT_EQ(LoadTrainedModel(dir).status().message(), file + ": is a FIFO (named pipe), not a regular file");
  std::filesystem::remove(file);
  ASSERT_EQ(::symlink("/dev/zero", file.c_str()), 0);
  st = ReadShardFile(dir, *m, 0, none, none_dense);
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(st.message(), file + ": is a character device, not a regular file");
}

}  // namespace
}  // namespace tether
