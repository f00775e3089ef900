#include "server/table_checkpoint.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>

#include "checkpoint/checkpoint.h"
#include "checkpoint/model_file.h"
#include "checkpoint/trained_model.h"
#include "core/partition.h"
#include "core/table_spec.h"
#include "tests/testing/temp_dir.h"

namespace tether {
namespace {

TableSpec Row(uint32_t id, const std::string& name, uint32_t dim, OptimizerType type) {
  TableSpec s;
  s.set_id(id);
  s.set_name(name);
  s.set_kind(TableSpec::ROW);
  s.set_dim(dim);
  s.mutable_init()->set_kind(TableInitializer::UNIFORM);
  s.mutable_init()->set_bound(0.5f);
  s.mutable_optimizer()->set_type(type);
  return s;
}

TableSpec Dense(uint32_t id, const std::string& name, uint64_t size, OptimizerType type) {
  TableSpec s;
  s.set_id(id);
  s.set_name(name);
  s.set_kind(TableSpec::DENSE);
  s.set_size(size);
  s.mutable_optimizer()->set_type(type);
  return s;
}

// w3: FTRL's z and n are state like AdaGrad's and Adam's, saved and
// restored (and resharded) with the row.
std::vector<TableSpec> Specs() {
  return {Row(0, "w1", 7, ADAM), Dense(1, "b1", 13, ADAM), Row(2, "w2", 3, ADAGRAD), Row(3, "w3", 5, FTRL)};
}

// One shard's tables for `specs`, trained with a fixed sequence of pushes
// (the rows of every shard see the same gradients as one big table would).
std::vector<std::unique_ptr<ServerTable>> MakeShard(const std::vector<TableSpec>& specs, int shard, int shards) {
  std::vector<std::unique_ptr<ServerTable>> t;
  for (const TableSpec& s : specs) {
    uint64_t b = 0, e = 0;
    if (IsDenseTable(s)) std::tie(b, e) = DenseRange(s.size(), shard, shards);
    t.push_back(std::make_unique<ServerTable>(s, b, e));
  }
  return t;
}

void Train(std::vector<std::unique_ptr<ServerTable>>* tables, int shard, int shards, int steps) {
  std::mt19937_64 rng(7);
  for (int step = 0; step < steps; ++step) {
    for (auto& t : *tables) {
      if (IsDenseTable(t->spec())) {
        std::vector<float> g(t->dense_end() - t->dense_begin());
        for (uint64_t i = 0; i < g.size(); ++i) g[i] = 0.01f * static_cast<float>((t->dense_begin() + i + step) % 5);
        ASSERT_TRUE(t->PushDense(g.data()).ok());
        continue;
      }
      std::vector<uint64_t> keys;
      for (int k = 0; k < 40; ++k) keys.push_back(rng() % 500);
      std::sort(keys.begin(), keys.end());
      keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
      std::vector<uint64_t> mine;
      for (uint64_t k : keys)
        if (ShardForKey(k, shards) == shard) mine.push_back(k);
      std::vector<float> g(mine.size() * t->spec().dim());
      for (size_t i = 0; i < g.size(); ++i) g[i] = 0.1f * static_cast<float>(static_cast<int>(i % 9) - 4);
      ASSERT_TRUE(t->PushRows(mine.data(), mine.size(), g.data()).ok());
    }
  }
}

// Every row (weights and state) of key k in `a`, or empty.
std::map<std::pair<int, uint64_t>, std::vector<float>> AllRows(
    const std::vector<std::vector<std::unique_ptr<ServerTable>>>& shards) {
  std::map<std::pair<int, uint64_t>, std::vector<float>> out;
  for (const auto& tables : shards) {
    for (size_t i = 0; i < tables.size(); ++i) {
      const ServerTable& t = *tables[i];
      if (IsDenseTable(t.spec())) continue;
      const std::vector<uint64_t> keys = t.KeysByRow();
      for (size_t r = 0; r < keys.size(); ++r)
        out[{static_cast<int>(i), keys[r]}] =
            std::vector<float>(t.raw_data() + r * t.stride(), t.raw_data() + (r + 1) * t.stride());
    }
  }
  return out;
}

// The weights of dense table `i` over all shards, in index order.
std::vector<float> DenseWeights(const std::vector<std::vector<std::unique_ptr<ServerTable>>>& shards, int i) {
  std::vector<float> w;
  for (const auto& tables : shards) {
    const ServerTable& t = *tables[i];
    w.insert(w.end(), t.raw_data(), t.raw_data() + (t.dense_end() - t.dense_begin()));
  }
  return w;
}

// Writes a whole checkpoint of `shards` at `clock` under parent through fs.
Status WriteAll(FileSystem* fs, const std::string& parent, int64_t clock,
                const std::vector<std::vector<std::unique_ptr<ServerTable>>>& shards) {
  const std::string dir = parent + "/" + CheckpointDirName(clock, false);
  CheckpointManifest m;
  m.set_format_version(kCheckpointFormatVersion);
  m.set_job_id("test");
  m.set_clock(clock);
  m.set_num_servers(static_cast<int>(shards.size()));
  m.set_num_workers(1);
  for (const TableSpec& s : Specs()) *m.add_tables() = s;
  for (size_t s = 0; s < shards.size(); ++s)
    TETHER_RETURN_IF_ERROR(
        WriteShardCheckpoint(fs, dir, static_cast<int>(s), static_cast<int>(shards.size()), clock, shards[s], m.add_files()));
  WorkerState w;
  w.set_rank(0);
  w.set_clock(clock);
  w.set_epoch(2);
  w.set_next_row(640);
  CheckpointWorker* entry = m.add_workers();
  entry->set_rank(0);
  TETHER_RETURN_IF_ERROR(WriteWorkerState(fs, dir, w, entry->mutable_file()));
  *m.add_files() = entry->file();
  return WriteManifest(fs, dir, m);
}

std::vector<std::vector<std::unique_ptr<ServerTable>>> TrainedShards(int shards, int steps) {
  std::vector<std::vector<std::unique_ptr<ServerTable>>> out;
  for (int s = 0; s < shards; ++s) {
    out.push_back(MakeShard(Specs(), s, shards));
    Train(&out.back(), s, shards, steps);
  }
  return out;
}

std::vector<std::vector<std::unique_ptr<ServerTable>>> Restore(const std::string& dir, int shards, Status* st) {
  std::vector<std::vector<std::unique_ptr<ServerTable>>> out;
  StatusOr<CheckpointManifest> m = ReadManifest(dir);
  if (!m.ok()) {
    *st = m.status();
    return out;
  }
  for (int s = 0; s < shards; ++s) {
    out.push_back(MakeShard(Specs(), s, shards));
    *st = RestoreShardTables(dir, *m, s, shards, &out.back());
    if (!st->ok()) return out;
  }
  return out;
}

TEST(CheckpointTest, SameShardsRestoreEveryRowStateAndVersion) {
  testing::ScopedTempDir tmp;
  const auto shards = TrainedShards(2, 30);
  ASSERT_TRUE(WriteAll(FileSystem::Default(), tmp.path(), 30, shards).ok());
  StatusOr<std::string> dir = ResolveCheckpoint(tmp.path());
  ASSERT_TRUE(dir.ok()) << dir.status().message();
  EXPECT_EQ(*dir, tmp.path() + "/" + CheckpointDirName(30, false));
  Status st;
  const auto back = Restore(*dir, 2, &st);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(AllRows(back), AllRows(shards));
  EXPECT_EQ(DenseWeights(back, 1), DenseWeights(shards, 1));
  for (int s = 0; s < 2; ++s)
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(back[s][i]->version(), shards[s][i]->version());
      if (IsDenseTable(back[s][i]->spec())) {
        EXPECT_EQ(0, std::memcmp(back[s][i]->raw_data(), shards[s][i]->raw_data(),
                                 back[s][i]->raw_floats() * sizeof(float)));
      }
    }
  // The worker's state comes back too.
  StatusOr<CheckpointManifest> m = ReadManifest(*dir);
  ASSERT_TRUE(m.ok());
  StatusOr<WorkerState> w = ReadWorkerState(*dir, *m, 0);
  ASSERT_TRUE(w.ok()) << w.status().message();
  EXPECT_EQ(w->next_row(), 640);
  EXPECT_EQ(w->epoch(), 2);
}

// Written by 2 shards, loaded by 3 (and by 1): the same model, every row
// with its optimizer state, every dense weight.
TEST(CheckpointTest, ReshardingKeepsEveryRow) {
  testing::ScopedTempDir tmp;
  const auto two = TrainedShards(2, 25);
  ASSERT_TRUE(WriteAll(FileSystem::Default(), tmp.path(), 25, two).ok());
  const std::string dir = tmp.path() + "/" + CheckpointDirName(25, false);
  for (int n : {3, 1}) {
    Status st;
    const auto back = Restore(dir, n, &st);
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_EQ(AllRows(back), AllRows(two)) << n << " shards";
    EXPECT_EQ(DenseWeights(back, 1), DenseWeights(two, 1)) << n << " shards";
    // Each row lives on the shard that owns its key now.
    for (int s = 0; s < n; ++s)
      for (uint64_t k : back[s][0]->KeysByRow()) EXPECT_EQ(ShardForKey(k, n), s);
  }
  StatusOr<TrainedModel> model = LoadTrainedModel(tmp.path());
  ASSERT_TRUE(model.ok()) << model.status().message();
  ASSERT_EQ(model->tables.size(), 4u);
  EXPECT_TRUE(std::is_sorted(model->tables[0].keys.begin(), model->tables[0].keys.end()));
  const auto rows = AllRows(two);
  size_t w1_rows = 0;
  for (const auto& [k, v] : rows) w1_rows += k.first == 0 ? 1 : 0;
  EXPECT_EQ(model->tables[0].keys.size(), w1_rows);
  EXPECT_EQ(model->tables[1].values, DenseWeights(two, 1));
  // Weights only: the first dim floats of each row.
  const uint64_t key = model->tables[2].keys[5];
  const std::vector<float>& full = rows.at({2, key});
  EXPECT_EQ(std::vector<float>(full.begin(), full.begin() + 3),
            std::vector<float>(model->tables[2].values.begin() + 15, model->tables[2].values.begin() + 18));
  // FTRL (w3): the exported weights are the w computed from z and n, not
  // the state after them.
  const uint64_t fkey = model->tables[3].keys[2];
  const std::vector<float>& frow = rows.at({3, fkey});
  ASSERT_EQ(frow.size(), 15u);  // 5 weights, 5 z, 5 n
  EXPECT_EQ(std::vector<float>(frow.begin(), frow.begin() + 5),
            std::vector<float>(model->tables[3].values.begin() + 10, model->tables[3].values.begin() + 15));
}

// A writer killed at 20 points spread over a checkpoint's bytes (inside the
// shard files, the worker state and the manifest): the latest complete
// checkpoint (the one before) always resolves and loads, and the broken
// attempt is never taken for a checkpoint.
TEST(CheckpointTest, AKillAtAnyByteLeavesTheLastCompleteCheckpoint) {
  const auto first = TrainedShards(2, 10);
  const auto second = TrainedShards(2, 20);
  // The size of a whole second checkpoint, measured by writing one.
  uint64_t total = 0;
  {
    testing::ScopedTempDir probe;
    FaultInjectingFileSystem counting(FileSystem::Default(), ~uint64_t{0});
    ASSERT_TRUE(WriteAll(&counting, probe.path(), 20, second).ok());
    total = counting.written();
  }
  ASSERT_GT(total, 1000u);
  for (int point = 0; point < 20; ++point) {
    testing::ScopedTempDir tmp;
    ASSERT_TRUE(WriteAll(FileSystem::Default(), tmp.path(), 10, first).ok());
    // Points from the first byte to the last one (the manifest's end).
    const uint64_t budget = point == 19 ? total - 1 : total * point / 19;
    FaultInjectingFileSystem faulty(FileSystem::Default(), budget);
    const Status st = WriteAll(&faulty, tmp.path(), 20, second);
    ASSERT_FALSE(st.ok()) << "budget " << budget;
    EXPECT_NE(st.message().find("injected fault"), std::string::npos) << st.message();
    StatusOr<std::string> dir = ResolveCheckpoint(tmp.path());
    ASSERT_TRUE(dir.ok()) << dir.status().message();
    EXPECT_EQ(*dir, tmp.path() + "/" + CheckpointDirName(10, false)) << "budget " << budget;
    StatusOr<CheckpointManifest> m = ReadManifest(*dir);
    ASSERT_TRUE(m.ok());
    EXPECT_TRUE(VerifyCheckpointFiles(*dir, *m).ok());
    Status load;
    const auto back = Restore(*dir, 2, &load);
    ASSERT_TRUE(load.ok()) << load.message();
    EXPECT_EQ(AllRows(back), AllRows(first));
  }
}

TEST(CheckpointTest, AFlippedByteIsRefusedNamingTheFileAndTheChecksum) {
  testing::ScopedTempDir tmp;
  const auto shards = TrainedShards(2, 5);
  ASSERT_TRUE(WriteAll(FileSystem::Default(), tmp.path(), 5, shards).ok());
  const std::string dir = tmp.path() + "/" + CheckpointDirName(5, false);
  const std::string file = dir + "/" + ShardFileName(1);
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(0, std::ios::end);
    const auto size = static_cast<int64_t>(f.tellg());
    f.seekp(size - 9);
    char c;
    f.seekg(size - 9);
    f.get(c);
    f.seekp(size - 9);
    f.put(static_cast<char>(c ^ 0x10));
  }
  Status st;
  (void)Restore(dir, 2, &st);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find(file), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("checksum mismatch"), std::string::npos) << st.message();
  StatusOr<CheckpointManifest> m = ReadManifest(dir);
  ASSERT_TRUE(m.ok());
  const Status v = VerifyCheckpointFiles(dir, *m);
  EXPECT_NE(v.message().find("XXH3-64"), std::string::npos) << v.message();
  EXPECT_FALSE(LoadTrainedModel(dir).ok());

  // The manifest checks itself.
  {
    std::fstream f(dir + "/MANIFEST", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(90);
    f.put('9');
  }
  StatusOr<CheckpointManifest> bad = ReadManifest(dir);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("MANIFEST: checksum mismatch"), std::string::npos) << bad.status().message();
}

// A truncated file is refused before it is parsed, naming the file, the
// size its manifest entry records and the size on disk; by every reader
// (the servers' restore, the verification of tether-export, a worker's
// state).
TEST(CheckpointTest, ATruncatedFileIsRefusedNamingBothSizes) {
  testing::ScopedTempDir tmp;
  ASSERT_TRUE(WriteAll(FileSystem::Default(), tmp.path(), 5, TrainedShards(2, 5)).ok());
  const std::string dir = tmp.path() + "/" + CheckpointDirName(5, false);
  StatusOr<CheckpointManifest> m = ReadManifest(dir);
  ASSERT_TRUE(m.ok());
  auto manifest_bytes = [&](const std::string& name) {
    for (const CheckpointFile& f : m->files())
      if (f.name() == name) return f.bytes();
    ADD_FAILURE() << name << " not in the manifest";
    return uint64_t{0};
  };
  const std::string shard = dir + "/" + ShardFileName(1);
  const uint64_t full = manifest_bytes(ShardFileName(1));
  ASSERT_GT(full, 1000u);
  std::filesystem::resize_file(shard, full - 700);  // ends inside the rows
  const std::string want = shard + ": " + std::to_string(full - 700) + " bytes on disk, but the manifest says " +
                           std::to_string(full) + " (a truncated or replaced file)";
  Status st;
  (void)Restore(dir, 2, &st);
  EXPECT_EQ(st.code(), Status::Code::kDataLoss);
  EXPECT_EQ(st.message(), want);
  EXPECT_EQ(VerifyCheckpointFiles(dir, *m).message(), want);
  EXPECT_EQ(LoadTrainedModel(dir).status().message(), want);
  std::filesystem::resize_file(shard, full + 3);  // longer: replaced or appended to
  (void)Restore(dir, 2, &st);
  EXPECT_EQ(st.message(), shard + ": " + std::to_string(full + 3) + " bytes on disk, but the manifest says " +
                              std::to_string(full) + " (a truncated or replaced file)");

  const std::string state = dir + "/" + WorkerFileName(0);
  const uint64_t state_bytes = manifest_bytes(WorkerFileName(0));
  std::filesystem::resize_file(state, 1);
  EXPECT_EQ(ReadWorkerState(dir, *m, 0).status().message(),
            state + ": 1 bytes on disk, but the manifest says " + std::to_string(state_bytes) +
                " (a truncated or replaced file)");
}

TEST(CheckpointTest, PruneKeepsTheNewestCompleteOnes) {
  testing::ScopedTempDir tmp;
  const auto shards = TrainedShards(1, 2);
  for (int c : {10, 20, 30, 40}) ASSERT_TRUE(WriteAll(FileSystem::Default(), tmp.path(), c, shards).ok());
  std::filesystem::create_directories(tmp.path() + "/" + CheckpointDirName(25, false));  // abandoned
  std::filesystem::create_directories(tmp.path() + "/" + CheckpointDirName(50, false));  // in progress
  ASSERT_TRUE(PruneCheckpoints(FileSystem::Default(), tmp.path(), 2).ok());
  std::vector<std::string> left;
  for (const auto& e : std::filesystem::directory_iterator(tmp.path())) left.push_back(e.path().filename().string());
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{CheckpointDirName(30, false), CheckpointDirName(40, false),
                                            CheckpointDirName(50, false)}));
  EXPECT_FALSE(ResolveCheckpoint(tmp.path() + "/nope").ok());
}

// A file of a checkpoint (a shard file, the MANIFEST) given where a
// checkpoint directory goes (tether-export --checkpoint, --resume_from) is
// refused saying it is a file and which directory to give; a checkpoint
// given where a model file goes (tether-predict --model) names the
// tether-export command that writes one.
TEST(CheckpointTest, TheWrongKindOfPathSaysWhatToGiveInstead) {
  testing::ScopedTempDir tmp;
  ASSERT_TRUE(WriteAll(FileSystem::Default(), tmp.path(), 30, TrainedShards(2, 3)).ok());
  const std::string ck = tmp.path() + "/" + CheckpointDirName(30, false);
  const std::string shard = ck + "/" + ShardFileName(1);
  const std::string manifest = ck + "/" + kManifestName;
  const std::string notes = tmp.path() + "/notes.txt";
  std::ofstream(notes) << "x";
  const std::string other = tmp.path() + "/other";
  std::filesystem::create_directories(other);
  std::ofstream(other + "/afile") << "x";
  const std::string is_file = ": is a file, not a checkpoint directory; ";
  StatusOr<std::string> r = ResolveCheckpoint(shard);
  EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(r.status().message(), shard + is_file + "give the checkpoint directory that holds it: " + ck);
  EXPECT_EQ(ResolveCheckpoint(manifest).status().message(),
            manifest + is_file + "give the checkpoint directory that holds it: " + ck);
  EXPECT_EQ(ResolveCheckpoint(notes).status().message(),
            notes + is_file + "give a checkpoint directory (one holding a MANIFEST) or a directory of them, such as " +
                tmp.path() + " (its latest complete checkpoint is " + ck + ")");
  EXPECT_EQ(ResolveCheckpoint(other + "/afile").status().message(),
            other + "/afile" + is_file + "give a checkpoint directory (one holding a MANIFEST) or a directory of them");
  EXPECT_EQ(CheckCheckpointPaths("", shard).message(),
            "--resume_from=" + shard + ": " + shard + is_file + "give the checkpoint directory that holds it: " + ck);
  // The directory it names is the one that works.
  StatusOr<std::string> ok = ResolveCheckpoint(ck);
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(*ok, ck);

  const std::string out = " --out=model.safetensors";
  EXPECT_EQ(CheckModelFilePath(ck).message(), ck + ": is a directory, not a model file; it is a checkpoint; write "
                                              "its model file with tether-export --checkpoint=" + ck + out);
  EXPECT_EQ(CheckModelFilePath(tmp.path()).message(),
            tmp.path() + ": is a directory, not a model file; it holds checkpoints: write the latest one's model "
                         "file with tether-export --checkpoint=" + tmp.path() + out);
  EXPECT_EQ(CheckModelFilePath(other).message(), other + ": is a directory, not a model file");
  const std::string then = ", not a model file; write the checkpoint's model file with tether-export --checkpoint=";
  EXPECT_EQ(CheckModelFilePath(shard).message(), shard + ": is a checkpoint's shard file" + then + ck + out);
  EXPECT_EQ(CheckModelFilePath(manifest).message(), manifest + ": is a checkpoint's MANIFEST" + then + ck + out);
  const std::string state = ck + "/" + WorkerFileName(0);
  EXPECT_EQ(CheckModelFilePath(state).message(), state + ": is a checkpoint's worker state file" + then + ck + out);
  EXPECT_EQ(CheckModelFilePath(tmp.path() + "/none").code(), Status::Code::kNotFound);
  EXPECT_TRUE(CheckModelFilePath(notes).ok());  // not refused by its path: read as safetensors next
}

// A checkpoint is never written into a complete one of the same clock: a
// resumed job reaching it writes "-r1", "-r2", ... beside it, and "the
// latest" and pruning take those after the plain name.
TEST(CheckpointTest, ANewCheckpointNeverGoesIntoACompleteOne) {
  testing::ScopedTempDir tmp;
  const auto shards = TrainedShards(1, 2);
  const std::string base = tmp.path() + "/" + CheckpointDirName(40, true);
  EXPECT_EQ(FreeCheckpointDir(tmp.path(), 40, true), base);
  std::filesystem::create_directories(base);  // begun, not complete: written into
  EXPECT_EQ(FreeCheckpointDir(tmp.path(), 40, true), base);
  CheckpointManifest m;
  m.set_format_version(kCheckpointFormatVersion);
  m.set_clock(40);
  m.set_final(true);
  ASSERT_TRUE(WriteManifest(FileSystem::Default(), base, m).ok());
  EXPECT_EQ(FreeCheckpointDir(tmp.path(), 40, true), base + "-r1");
  EXPECT_EQ(FreeCheckpointDir(tmp.path(), 40, false), tmp.path() + "/" + CheckpointDirName(40, false));
  ASSERT_TRUE(WriteManifest(FileSystem::Default(), base + "-r1", m).ok());
  EXPECT_EQ(FreeCheckpointDir(tmp.path(), 40, true), base + "-r2");
  ASSERT_TRUE(WriteAll(FileSystem::Default(), tmp.path(), 30, shards).ok());
  StatusOr<std::string> latest = ResolveCheckpoint(tmp.path());
  ASSERT_TRUE(latest.ok()) << latest.status().message();
  EXPECT_EQ(*latest, base + "-r1");
  ASSERT_TRUE(PruneCheckpoints(FileSystem::Default(), tmp.path(), 2).ok());
  std::vector<std::string> left;
  for (const auto& e : std::filesystem::directory_iterator(tmp.path())) left.push_back(e.path().filename().string());
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{CheckpointDirName(40, true), CheckpointDirName(40, true) + "-r1"}));
}

}  // namespace
}  // namespace tether
