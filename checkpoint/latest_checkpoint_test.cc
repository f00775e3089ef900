// The latest checkpoint of a folder read while a live job prunes it: a
// checkpoint pruned between its choice and its read is replaced by the
// then-latest one; pruned every time, the read fails naming the live job;
// a fault of a checkpoint nobody prunes is reported at once.
#include "checkpoint/latest_checkpoint.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "checkpoint/dir_lock.h"
#include "checkpoint/shard_file.h"
#include "tests/testing/temp_dir.h"

namespace tether {
namespace {

// A one-shard checkpoint of `clock` under `parent` holding one DENSE table
// of 2 weights {clock, clock + 0.5}; returns its directory.
std::string WriteCheckpoint(const std::string& parent, int64_t clock) {
  TableSpec spec;
  spec.set_id(0);
  spec.set_name("b");
  spec.set_kind(TableSpec::DENSE);
  spec.set_size(2);
  spec.mutable_optimizer()->set_type(SGD);
  const std::vector<float> w = {static_cast<float>(clock), static_cast<float>(clock) + 0.5f};
  std::vector<ShardFileTable> tables(1);
  tables[0].spec = &spec;
  tables[0].stride = 1;
  tables[0].dense_end = 2;
  tables[0].data = w.data();
  tables[0].floats = w.size();
  const std::string dir = CheckpointJoinPath(parent, CheckpointDirName(clock, false));
  CheckpointManifest m;
  m.set_format_version(kCheckpointFormatVersion);
  m.set_clock(clock);
  m.set_num_servers(1);
  *m.add_tables() = spec;
  EXPECT_TRUE(WriteShardFile(FileSystem::Default(), dir, 0, 1, clock, tables, m.add_files()).ok());
  EXPECT_TRUE(WriteManifest(FileSystem::Default(), dir, m).ok());
  return dir;
}

// What a live job with keep_last 1 does between a reader's choice and its
// read: it completes the next checkpoint (3 clocks on) and prunes the rest.
struct PruningJob {
  std::string parent;
  int64_t clock;
  std::vector<std::string> chosen;
  void operator()(const std::string& dir) {
    chosen.push_back(dir);
    clock += 3;
    WriteCheckpoint(parent, clock);
    ASSERT_TRUE(PruneCheckpoints(FileSystem::Default(), parent, 1).ok());
  }
};

std::string Host() {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  return host;
}

TEST(LatestCheckpointTest, ACheckpointPrunedBetweenItsChoiceAndItsReadGivesWayToTheThenLatest) {
  testing::ScopedTempDir tmp;
  WriteCheckpoint(tmp.path(), 201);
  const std::string first = WriteCheckpoint(tmp.path(), 204);
  PruningJob job{tmp.path(), 204, {}};
  bool pruned_once = false;
  StatusOr<LoadedCheckpoint> got = LoadLatestCheckpoint(tmp.path(), [&](const std::string& dir) {
    if (!pruned_once) job(dir);
    pruned_once = true;
  });
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(job.chosen, std::vector<std::string>{first});
  EXPECT_EQ(got->dir, CheckpointJoinPath(tmp.path(), CheckpointDirName(207, false)));
  EXPECT_EQ(got->manifest.clock(), 207);
  EXPECT_EQ(got->model.clock, 207);
  ASSERT_EQ(got->model.tables.size(), 1u);
  EXPECT_EQ(got->model.tables[0].values, (std::vector<float>{207.0f, 207.5f}));
  EXPECT_FALSE(std::filesystem::exists(first));
}

TEST(LatestCheckpointTest, PrunedAtEveryChoiceTheReadFailsNamingTheLiveJobThatPrunes) {
  testing::ScopedTempDir tmp;
  WriteCheckpoint(tmp.path(), 204);
  StatusOr<CheckpointDirLock> live = CheckpointDirLock::Acquire(tmp.path(), CheckpointDirLock::Mode::kWrite);
  ASSERT_TRUE(live.ok()) << live.status().message();
  PruningJob job{tmp.path(), 204, {}};
  StatusOr<LoadedCheckpoint> got = LoadLatestCheckpoint(tmp.path(), std::ref(job));
  ASSERT_EQ(job.chosen.size(), 5u);
  EXPECT_EQ(job.chosen[4], CheckpointJoinPath(tmp.path(), CheckpointDirName(216, false)));
  EXPECT_EQ(got.status().code(), Status::Code::kUnavailable);
  EXPECT_EQ(got.status().message(),
            "checkpoint folder " + tmp.path() + ": the latest checkpoint was pruned while it was read, 5 times in a "
            "row (last: " + job.chosen[4] + " is not a checkpoint: it has no MANIFEST); it is in use by a "
            "live job (pid " + std::to_string(getpid()) + " on host " + Host() + ") that prunes its older "
            "checkpoints as it writes new ones (checkpoint.keep_last): export once the job has ended, from a copy "
            "of one of its checkpoints (cp -r), or give the job a larger checkpoint.keep_last");
}

TEST(LatestCheckpointTest, AFaultyCheckpointNobodyPrunesIsReportedAtOnce) {
  testing::ScopedTempDir tmp;
  const std::string dir = WriteCheckpoint(tmp.path(), 204);
  std::filesystem::remove(CheckpointJoinPath(dir, ShardFileName(0)));
  std::vector<std::string> chosen;
  StatusOr<LoadedCheckpoint> got =
      LoadLatestCheckpoint(tmp.path(), [&](const std::string& d) { chosen.push_back(d); });
  EXPECT_EQ(chosen, std::vector<std::string>{dir});
  EXPECT_EQ(got.status().code(), Status::Code::kNotFound);
  EXPECT_EQ(got.status().message(), dir + "/shard-0.tables: cannot open: No such file or directory");
  // Named on its own, a checkpoint is read once, pruned or not.
  chosen.clear();
  EXPECT_EQ(LoadLatestCheckpoint(dir, [&](const std::string& d) { chosen.push_back(d); }).status().message(),
            dir + "/shard-0.tables: cannot open: No such file or directory");
  EXPECT_EQ(chosen, std::vector<std::string>{dir});
  EXPECT_EQ(CheckpointDirLock::LiveWriter(tmp.path()), "");
}

}  // namespace
}  // namespace tether
