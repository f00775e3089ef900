#include "server/kept_model_checkpoint.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <memory>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "tests/testing/temp_dir.h"

#include "server/testing/kept_model_tables.h"

namespace tether {
namespace {

// A row table and this shard's slice [2, 8) of a dense table, stepped by
// SGD (server/testing/kept_model_tables.h).
KeptModel::Tables MakeTables() { return testing::MakeKeptTables(SGD); }

// A manifest of one shard at `clock` listing `files`.
CheckpointManifest Manifest(int64_t clock, int num_servers, const std::vector<CheckpointFile>& files) {
  CheckpointManifest m;
  m.set_clock(clock);
  m.set_num_servers(num_servers);
  for (const CheckpointFile& f : files) *m.add_files() = f;
  return m;
}

// The copy written at a checkpoint after the keep and restored into a new
// shard (whose tables hold the same rows, as RestoreShardTables leaves them)
// puts back the kept weights bit for bit, not those at the checkpoint.
TEST(KeptModelCheckpointTest, WrittenCopyRestoresTheKeptWeights) {
  testing::ScopedTempDir tmp;
  const std::vector<uint64_t> keys = {11, 5, 40};
  KeptModel::Tables a = MakeTables();
  testing::StepKept(a, keys, 1.0f);
  KeptModel kept;
  ASSERT_TRUE(kept.Keep(2, a));
  const std::vector<float> kept_rows = testing::KeptRows(a, keys);
  const std::vector<float> kept_dense = testing::KeptDense(a);
  testing::StepKept(a, {11, 5, 40, 77}, 0.5f);  // a row created after the keep
  CheckpointFile file;
  ASSERT_TRUE(WriteKeptModelFile(FileSystem::Default(), tmp.path(), 0, 1, 90, kept, a, &file).ok());
  EXPECT_EQ(file.name(), "shard-0.kept");
  EXPECT_GT(file.bytes(), 12 * sizeof(float));

  // The resumed shard: the same rows in the same order, at the checkpoint's weights.
  KeptModel::Tables b = MakeTables();
  testing::StepKept(b, keys, 1.0f);
  testing::StepKept(b, {11, 5, 40, 77}, 0.5f);
  const std::vector<float> at_checkpoint = testing::KeptRows(b, keys);
  ASSERT_NE(at_checkpoint, kept_rows);
  KeptModel back;
  const Status st = RestoreKeptModel(tmp.path(), Manifest(90, 1, {file}), 0, 1, b, &back);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(back.epoch(), 2);
  EXPECT_EQ(back.bytes(), kept.bytes());
  EXPECT_FALSE(back.Keep(2, b)) << "the restored epoch is not kept again over the copy";
  ASSERT_TRUE(back.Restore(2, &b).ok());
  EXPECT_EQ(testing::KeptRows(b, keys), kept_rows);
  EXPECT_EQ(testing::KeptDense(b), kept_dense);
}

TEST(KeptModelCheckpointTest, NoCopyWritesNoFileAndRestoresNothing) {
  testing::ScopedTempDir tmp;
  KeptModel::Tables a = MakeTables();
  KeptModel kept;
  CheckpointFile file;
  ASSERT_TRUE(WriteKeptModelFile(FileSystem::Default(), tmp.path(), 0, 1, 10, kept, a, &file).ok());
  EXPECT_FALSE(file.has_name());
  KeptModel back;
  ASSERT_TRUE(RestoreKeptModel(tmp.path(), Manifest(10, 1, {}), 0, 1, a, &back).ok());
  EXPECT_EQ(back.epoch(), 0);
}

// A corrupt file, another clock, other rows and another number of servers
// are refused, naming the file; nothing is restored.
TEST(KeptModelCheckpointTest, RefusesWhatDisagrees) {
  testing::ScopedTempDir tmp;
  KeptModel::Tables a = MakeTables();
  testing::StepKept(a, {3, 4}, 1.0f);
  KeptModel kept;
  ASSERT_TRUE(kept.Keep(1, a));
  CheckpointFile file;
  ASSERT_TRUE(WriteKeptModelFile(FileSystem::Default(), tmp.path(), 0, 1, 30, kept, a, &file).ok());
  KeptModel back;

  Status st = RestoreKeptModel(tmp.path(), Manifest(30, 1, {file}), 0, 2, a, &back);
  EXPECT_EQ(st.code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(st.message().find("shard-0.kept"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("--num_servers) 1"), std::string::npos) << st.message();

  // A final checkpoint's tables hold the kept weights already: any number of servers.
  CheckpointManifest final_manifest = Manifest(30, 1, {file});
  final_manifest.set_final(true);
  EXPECT_TRUE(RestoreKeptModel(tmp.path(), final_manifest, 0, 2, a, &back).ok());
  EXPECT_EQ(back.epoch(), 0);

  st = RestoreKeptModel(tmp.path(), Manifest(31, 1, {file}), 0, 1, a, &back);
  EXPECT_EQ(st.code(), Status::Code::kDataLoss) << st.message();
  EXPECT_NE(st.message().find("at clock 30"), std::string::npos) << st.message();

  KeptModel::Tables other = MakeTables();
  testing::StepKept(other, {4, 3}, 1.0f);  // the same keys in another row order
  st = RestoreKeptModel(tmp.path(), Manifest(30, 1, {file}), 0, 1, other, &back);
  EXPECT_EQ(st.code(), Status::Code::kDataLoss) << st.message();
  EXPECT_NE(st.message().find("table 'w'"), std::string::npos) << st.message();

  {
    std::fstream f(tmp.File("shard-0.kept"), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(20);
    f.put('\x7f');
  }
  st = RestoreKeptModel(tmp.path(), Manifest(30, 1, {file}), 0, 1, a, &back);
  EXPECT_EQ(st.code(), Status::Code::kDataLoss) << st.message();
  EXPECT_NE(st.message().find("shard-0.kept"), std::string::npos) << st.message();
  EXPECT_EQ(back.epoch(), 0);
}

}  // namespace
}  // namespace tether
