#include "server/kept_model_checkpoint.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <memory>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "tests/testing/temp_dir.h"

namespace tether {
namespace {

constexpr uint32_t kDim = 3;

TableSpec Spec(uint32_t id, TableSpec::Kind kind) {
  TableSpec spec;
  spec.set_id(id);
  spec.set_name(kind == TableSpec::ROW ? "w" : "b");
  spec.set_kind(kind);
  if (kind == TableSpec::ROW) spec.set_dim(kDim);
  if (kind == TableSpec::DENSE) spec.set_size(8);
  spec.mutable_init()->set_kind(TableInitializer::UNIFORM);
  spec.mutable_init()->set_bound(0.5f);
  spec.mutable_init()->set_seed(7);
  spec.mutable_optimizer()->set_type(SGD);
  spec.mutable_optimizer()->set_learning_rate(0.1f);
  return spec;
}

// A row table and this shard's slice [2, 8) of a dense table.
KeptModel::Tables MakeTables() {
  KeptModel::Tables t;
  t.push_back(std::make_unique<ServerTable>(Spec(0, TableSpec::ROW), 0, 0));
  t.push_back(std::make_unique<ServerTable>(Spec(1, TableSpec::DENSE), 2, 8));
  return t;
}

void Step(KeptModel::Tables& t, const std::vector<uint64_t>& keys, float g) {
  std::vector<float> rows(keys.size() * kDim, g);
  ASSERT_TRUE(t[0]->PushRows(keys.data(), keys.size(), rows.data()).ok());
  std::vector<float> dense(6, -g);
  ASSERT_TRUE(t[1]->PushDense(dense.data()).ok());
}

std::vector<float> Rows(KeptModel::Tables& t, const std::vector<uint64_t>& keys) {
  std::vector<float> out(keys.size() * kDim);
  EXPECT_TRUE(t[0]->PullRows(keys.data(), keys.size(), out.data()).ok());
  return out;
}

std::vector<float> Dense(const KeptModel::Tables& t) {
  std::vector<float> out(6);
  t[1]->PullDense(out.data());
  return out;
}

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
  Step(a, keys, 1.0f);
  KeptModel kept;
  ASSERT_TRUE(kept.Keep(2, a));
  const std::vector<float> kept_rows = Rows(a, keys);
  const std::vector<float> kept_dense = Dense(a);
  Step(a, {11, 5, 40, 77}, 0.5f);  // a row created after the keep
  CheckpointFile file;
  ASSERT_TRUE(WriteKeptModelFile(FileSystem::Default(), tmp.path(), 0, 1, 90, kept, a, &file).ok());
  EXPECT_EQ(file.name(), "shard-0.kept");
  EXPECT_GT(file.bytes(), 12 * sizeof(float));

  // The resumed shard: the same rows in the same order, at the checkpoint's weights.
  KeptModel::Tables b = MakeTables();
  Step(b, keys, 1.0f);
  Step(b, {11, 5, 40, 77}, 0.5f);
  const std::vector<float> at_checkpoint = Rows(b, keys);
  ASSERT_NE(at_checkpoint, kept_rows);
  KeptModel back;
  const Status st = RestoreKeptModel(tmp.path(), Manifest(90, 1, {file}), 0, 1, b, &back);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(back.epoch(), 2);
  EXPECT_EQ(back.bytes(), kept.bytes());
  EXPECT_FALSE(back.Keep(2, b)) << "the restored epoch is not kept again over the copy";
  ASSERT_TRUE(back.Restore(2, &b).ok());
  EXPECT_EQ(Rows(b, keys), kept_rows);
  EXPECT_EQ(Dense(b), kept_dense);
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
  Step(a, {3, 4}, 1.0f);
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
  Step(other, {4, 3}, 1.0f);  // the same keys in another row order
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
