// The checkpoint library without a server: names and paths, manifests,
// the manifest's writer, shape checks on resume. Writing and restoring a
// server's tables is server/table_checkpoint_test.cc; the shard-file format
// on its own is shard_file_test.cc.
#include "checkpoint/checkpoint.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/testing/log_capture.h"
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

std::vector<TableSpec> Specs() {
  return {Row(0, "w1", 7, ADAM), Dense(1, "b1", 13, ADAM), Row(2, "w2", 3, ADAGRAD), Row(3, "w3", 5, FTRL)};
}

TEST(CheckpointTest, ShapeChangesAreRefusedNamingTheField) {
  google::protobuf::RepeatedPtrField<TableSpec> a, b;
  for (const TableSpec& s : Specs()) *a.Add() = s;
  b = a;
  b[2].mutable_optimizer()->set_learning_rate(0.5f);  // may change
  b[1].mutable_consistency()->set_staleness(3);
  EXPECT_EQ(DiffTableShapes(a, b), "");
  b[0].set_dim(8);
  EXPECT_NE(DiffTableShapes(a, b).find("table 'w1', field dim: the checkpoint has 7, the job has 8"),
            std::string::npos)
      << DiffTableShapes(a, b);
  b = a;
  b[2].mutable_optimizer()->set_type(ADAM);
  EXPECT_NE(DiffTableShapes(a, b).find("field optimizer.type"), std::string::npos);
}

// Worker 0 writes the manifest while it trains; a cut it is not part of
// (it finished its share, or left) is written by the lowest rank in it.
TEST(CheckpointTest, TheLowestRankInTheCutWritesTheManifest) {
  auto entry = [](int rank, CheckpointWorker::Kind kind) {
    CheckpointWorker w;
    w.set_rank(rank);
    w.set_kind(kind);
    return w;
  };
  using W = CheckpointWorker;
  EXPECT_EQ(ManifestWriterRank({entry(0, W::TRAINING), entry(1, W::TRAINING), entry(2, W::TRAINING)}), 0);
  EXPECT_EQ(ManifestWriterRank({entry(0, W::FINISHED), entry(1, W::TRAINING), entry(2, W::TRAINING)}), 1);
  EXPECT_EQ(ManifestWriterRank({entry(0, W::LEFT), entry(1, W::GONE), entry(2, W::TRAINING)}), 2);
  EXPECT_EQ(ManifestWriterRank({entry(3, W::TRAINING), entry(0, W::FINISHED), entry(2, W::TRAINING)}), 2);
  // The end-of-job checkpoint: nobody is in a cut.
  EXPECT_EQ(ManifestWriterRank({entry(0, W::FINISHED), entry(1, W::LEFT)}), -1);
  EXPECT_EQ(ManifestWriterRank({}), -1);
}

// Bad checkpoint paths are refused at start, naming the path and why.
TEST(CheckpointTest, BadCheckpointPathsAreRefusedNamingWhy) {
  testing::ScopedTempDir tmp;
  const std::string file = tmp.path() + "/afile";
  std::ofstream(file) << "x";
  EXPECT_TRUE(CheckCheckpointDir(tmp.path()).ok());
  EXPECT_TRUE(CheckCheckpointDir(tmp.path() + "/new/deeper").ok());
  const std::string what = "checkpoint.dir (--checkpoint_dir) ";
  EXPECT_EQ(CheckCheckpointDir(file).message(), what + file + ": is a file, not a directory");
  EXPECT_EQ(CheckCheckpointDir(file + "/ck").message(),
            what + file + "/ck: " + file + " is a file, not a directory, so it cannot be created");
  EXPECT_EQ(CheckCheckpointPaths("", tmp.path() + "/none").message(),
            "--resume_from=" + tmp.path() + "/none: " + tmp.path() + "/none: no such checkpoint directory");
  EXPECT_TRUE(CheckCheckpointPaths(tmp.path(), "").ok());
}

// Puts a FIFO that no process writes at `path` (a blocking open() of it for
// reading would never return), or a link to /dev/zero (never ends).
void PutFifo(const std::string& path) {
  std::filesystem::remove(path);
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0) << path;
}
void PutDevZero(const std::string& path) {
  std::filesystem::remove(path);
  ASSERT_EQ(::symlink("/dev/zero", path.c_str()), 0) << path;
}

// Runs `read`, failing the test unless it returns within 5 s (a read that
// blocked would never return: the test would time out).
template <typename Fn>
void ExpectPrompt(Fn read) {
  const auto start = std::chrono::steady_clock::now();
  read();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

std::string Fifo(const std::string& path) { return path + ": is a FIFO (named pipe), not a regular file"; }
std::string Device(const std::string& path) { return path + ": is a character device, not a regular file"; }

// A FIFO or a device in place of a checkpoint's MANIFEST is refused at
// once, naming it and what it is, never waited on or read.
TEST(CheckpointTest, AFifoOrADeviceAsTheManifestIsRefusedAtOnce) {
  testing::ScopedTempDir tmp;
  CheckpointManifest m;
  m.set_format_version(kCheckpointFormatVersion);
  ASSERT_TRUE(WriteManifest(FileSystem::Default(), tmp.path(), m).ok());
  const std::string manifest = tmp.File(kManifestName);
  PutFifo(manifest);
  StatusOr<CheckpointManifest> back = Status::Internal("not read");
  ExpectPrompt([&] { back = ReadManifest(tmp.path()); });
  EXPECT_EQ(back.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(back.status().message(), Fifo(manifest));
  PutDevZero(manifest);
  back = ReadManifest(tmp.path());
  EXPECT_EQ(back.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(back.status().message(), Device(manifest));
  std::filesystem::remove(manifest);
  EXPECT_EQ(ReadManifest(tmp.path()).status().message(), tmp.path() + " is not a checkpoint: it has no MANIFEST");
}

// The same for a file the manifest lists: read whole (ReadListedFile), by
// the checked reader (a worker's state), or checked (VerifyCheckpointFiles)
// and copied (CopyWorkerFiles).
TEST(CheckpointTest, AFifoOrADeviceAsAListedFileIsRefusedAtOnce) {
  testing::ScopedTempDir tmp;
  CheckpointManifest m;
  CheckpointFile* state = m.add_files();
  state->set_name(WorkerFileName(0));
  state->set_bytes(10);
  const std::string path = tmp.File(WorkerFileName(0));
  for (const bool fifo : {true, false}) {
    if (fifo) {
      PutFifo(path);
    } else {
      PutDevZero(path);
    }
    const std::string want = fifo ? Fifo(path) : Device(path);
    ExpectPrompt([&] {
      const StatusOr<std::string> listed = ReadListedFile(tmp.path(), *state, FileLister::kManifest);
      EXPECT_EQ(listed.status().code(), Status::Code::kInvalidArgument);
      EXPECT_EQ(listed.status().message(), want);
      const StatusOr<WorkerState> worker = ReadWorkerState(tmp.path(), m, 0);
      EXPECT_EQ(worker.status().code(), Status::Code::kInvalidArgument);
      EXPECT_EQ(worker.status().message(), want);
      EXPECT_EQ(VerifyCheckpointFiles(tmp.path(), m).message(), want);
      EXPECT_EQ(CopyWorkerFiles(FileSystem::Default(), tmp.path(), tmp.File("to"), *state).message(), want);
    });
  }
  std::filesystem::remove(path);
  EXPECT_EQ(ReadListedFile(tmp.path(), *state, FileLister::kManifest).status().message(),
            path + ": missing, but the checkpoint's MANIFEST lists it");
  EXPECT_EQ(ReadWorkerState(tmp.path(), m, 0).status().message(), path + ": cannot open: No such file or directory");
}

// A listed file's size is compared with its entry before it is read.
TEST(CheckpointTest, AListedFileOfAnotherSizeIsRefusedBeforeItIsRead) {
  testing::ScopedTempDir tmp;
  CheckpointFile entry;
  ASSERT_TRUE(WriteListedFile(FileSystem::Default(), tmp.path(), "notes", "0123456789", &entry).ok());
  StatusOr<std::string> back = ReadListedFile(tmp.path(), entry, FileLister::kWorkerState);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, "0123456789");
  std::ofstream(tmp.File("notes"), std::ios::trunc) << "01234";
  back = ReadListedFile(tmp.path(), entry, FileLister::kWorkerState);
  EXPECT_EQ(back.status().code(), Status::Code::kDataLoss);
  EXPECT_EQ(back.status().message(), tmp.File("notes") +
                                         ": 5 bytes on disk, but the worker's state file says 10 (a truncated or "
                                         "replaced file)");
}

// Across hosts: the manifest's writer creates the directory when it holds
// nothing on its host yet (the servers wrote their files on theirs), and a
// worker's relative paths are made absolute before the servers see them.
TEST(CheckpointTest, AcrossHostsTheManifestMakesItsDirectoryAndPathsGoAbsolute) {
  EXPECT_EQ(AbsoluteCheckpointPath("/a/b/"), "/a/b");
  EXPECT_EQ(AbsoluteCheckpointPath(""), "");
  EXPECT_EQ(AbsoluteCheckpointPath("ck/./x"), (std::filesystem::current_path() / "ck/x").string());
  testing::ScopedTempDir tmp;
  CheckpointManifest m;
  m.set_format_version(kCheckpointFormatVersion);
  m.set_clock(7);
  const std::string dir = tmp.path() + "/ck/" + CheckpointDirName(7, true);
  ASSERT_TRUE(WriteManifest(FileSystem::Default(), dir, m).ok());
  StatusOr<CheckpointManifest> back = ReadManifest(dir);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->clock(), 7);
}

// A checkpoint folder is shared with people and other tools: entries that
// Tether did not write (a clock past int64, too few digits, a stray file, a
// look-alike file) are never taken for checkpoints, never pruned, and named
// in one warning; the real checkpoints are still found and pruned.
TEST(CheckpointTest, EntriesTetherDidNotWriteAreIgnoredWithOneWarning) {
  testing::ScopedTempDir tmp;
  const std::string parent = tmp.path() + "/ck";
  CheckpointManifest m;
  m.set_format_version(kCheckpointFormatVersion);
  for (int64_t clock : {10, 20, 30}) {
    m.set_clock(clock);
    ASSERT_TRUE(WriteManifest(FileSystem::Default(), CheckpointJoinPath(parent, CheckpointDirName(clock, false)), m).ok());
  }
  const std::vector<std::string> foreign = {"ckpt-99999999999999999999", "ckpt-12", "ckpt-000000000040-r0",
                                            "ckpt-00000000004x", "notes"};
  for (const std::string& name : foreign) std::filesystem::create_directories(parent + "/" + name);
  std::ofstream(parent + "/ckpt-000000000050") << "a file, not a directory";
  testing::LogCapture log;
  StatusOr<std::string> latest = ResolveCheckpoint(parent);
  ASSERT_TRUE(latest.ok()) << latest.status().message();
  EXPECT_EQ(*latest, CheckpointJoinPath(parent, CheckpointDirName(30, false)));
  ASSERT_TRUE(PruneCheckpoints(FileSystem::Default(), parent, 1).ok());
  EXPECT_FALSE(std::filesystem::exists(CheckpointJoinPath(parent, CheckpointDirName(10, false))));
  EXPECT_FALSE(std::filesystem::exists(CheckpointJoinPath(parent, CheckpointDirName(20, false))));
  EXPECT_TRUE(std::filesystem::exists(CheckpointJoinPath(parent, CheckpointDirName(30, false))));
  for (const std::string& name : foreign) EXPECT_TRUE(std::filesystem::exists(parent + "/" + name)) << name;
  const std::vector<std::string> warned = log.Matching({"checkpoint folder " + parent + ": ignoring 6 entries"});
  ASSERT_EQ(warned.size(), 1u);
  for (const std::string& name : foreign) EXPECT_NE(warned[0].find("'" + name + "'"), std::string::npos) << name;
  EXPECT_NE(warned[0].find("'ckpt-000000000050'"), std::string::npos);
  EXPECT_TRUE(CheckCheckpointPaths(parent, parent).ok());
}

// The input's reading may not change on resume; the first field that
// differs is named with both values.
TEST(CheckpointTest, DiffInputTransformNamesTheFieldThatChanged) {
  DataConfig a;
  DataConfig b = a;
  EXPECT_EQ(DiffInputTransform(a, b), "");
  b.set_tf_idf(true);
  EXPECT_EQ(DiffInputTransform(a, b),
            "field data.tf_idf: the checkpoint has false, the job has true (a resume reads its rows as the "
            "checkpoint's model was trained on them)");
  b = a;
  b.set_normalize_rows(true);
  EXPECT_EQ(DiffInputTransform(a, b).rfind("field data.normalize_rows: the checkpoint has false", 0), 0u);
  b = a;
  b.set_feature_scale(0.5f);
  EXPECT_EQ(DiffInputTransform(a, b).rfind("field data.feature_scale: the checkpoint has 1, the job has 0.5", 0), 0u);
  // Fields that do not change how a row is read may differ.
  b = a;
  b.set_train_file("elsewhere.txt");
  EXPECT_EQ(DiffInputTransform(a, b), "");
}

// The rows set aside for validation may not change on resume: a split file
// added or dropped, another fraction or seed is named with both values.
TEST(CheckpointTest, DiffValidationRowsNamesTheFieldThatChanged) {
  JobConfig a;
  JobConfig b = a;
  EXPECT_EQ(DiffValidationRows(a, b), "");
  b.mutable_data()->set_validation_split("data/val.txt");
  EXPECT_EQ(DiffValidationRows(a, b),
            "field data.validation_split: the checkpoint has none, the job has 'data/val.txt' (the validation rows "
            "are left out of training: a resume trains on the rows the checkpoint's run trained on)");
  EXPECT_EQ(DiffValidationRows(b, a).rfind(
                "field data.validation_split: the checkpoint has 'data/val.txt', the job has none (", 0),
            0u);
  // Another file on both sides is the data stamps' to judge.
  a.mutable_data()->set_validation_split("elsewhere/val.txt");
  EXPECT_EQ(DiffValidationRows(a, b), "");
  a = JobConfig();
  b = a;
  a.mutable_train()->set_validation_fraction(0.2);
  EXPECT_EQ(DiffValidationRows(a, b).rfind("field train.validation_fraction: the checkpoint has 0.2, the job has 0 (",
                                           0),
            0u);
  b.mutable_train()->set_validation_fraction(0.1);
  EXPECT_EQ(DiffValidationRows(a, b).rfind(
                "field train.validation_fraction: the checkpoint has 0.2, the job has 0.1 (", 0),
            0u);
  b.mutable_train()->set_validation_fraction(0.2);
  b.mutable_train()->set_validation_seed(7);
  EXPECT_EQ(DiffValidationRows(a, b).rfind("field train.validation_seed: the checkpoint has 1, the job has 7 (", 0),
            0u);
  // Without a fraction the seed chooses nothing.
  a.mutable_train()->set_validation_fraction(0);
  b.mutable_train()->set_validation_fraction(0);
  EXPECT_EQ(DiffValidationRows(a, b), "");
}

}  // namespace
}  // namespace tether

namespace tether {
namespace {

// A checkpoint of `clock` under `parent` whose MANIFEST lists worker 0's
// and worker 1's state files; returns its directory.
std::string WriteStates(const std::string& parent, int64_t clock) {
  const std::string dir = CheckpointJoinPath(parent, CheckpointDirName(clock, false));
  CheckpointManifest m;
  m.set_format_version(kCheckpointFormatVersion);
  m.set_clock(clock);
  m.set_num_servers(1);
  for (int rank : {0, 1}) {
    WorkerState s;
    s.set_rank(rank);
    EXPECT_TRUE(WriteWorkerState(FileSystem::Default(), dir, s, m.add_files()).ok());
  }
  EXPECT_TRUE(WriteManifest(FileSystem::Default(), dir, m).ok());
  return dir;
}

// What tether-launch checks of --resume_from before it starts a process:
// the MANIFEST and every file it lists, a damaged one named with the older
// checkpoints to resume from instead.
TEST(CheckpointTest, AResumeCheckpointIsVerifiedWholeNamingTheFileAndTheOlderOnes) {
  testing::ScopedTempDir tmp;
  WriteStates(tmp.path(), 3);
  WriteStates(tmp.path(), 6);
  const std::string dir = WriteStates(tmp.path(), 9);
  EXPECT_TRUE(VerifyResumeCheckpoint(tmp.path()).ok());
  EXPECT_TRUE(VerifyResumeCheckpoint("").ok());
  const std::string advice = "checkpoint " + dir + " is damaged or incomplete; resume from an older one with "
                             "--resume_from=" + tmp.File("ckpt-000000000006") + " (older complete ones in " + tmp.path() +
                             ", newest first: ckpt-000000000006, ckpt-000000000003)";
  EXPECT_EQ(OlderCheckpointsAdvice(dir), advice);
  EXPECT_EQ(OlderCheckpointsAdvice(dir + "/"), advice);
  std::filesystem::remove(CheckpointJoinPath(dir, WorkerFileName(1)));
  Status st = VerifyResumeCheckpoint(tmp.path());
  EXPECT_EQ(st.code(), Status::Code::kNotFound);
  EXPECT_EQ(st.message(), dir + "/worker-1.state: cannot open: No such file or directory; " + advice);
  EXPECT_EQ(VerifyResumeCheckpoint(dir).message(), st.message());
  // Said once, however often it is added.
  EXPECT_EQ(WithOlderCheckpointsAdvice(st, dir).message(), st.message());
  const std::string manifest = CheckpointJoinPath(dir, kManifestName);
  std::filesystem::resize_file(manifest, std::filesystem::file_size(manifest) - 10);
  st = VerifyResumeCheckpoint(dir);
  EXPECT_EQ(st.code(), Status::Code::kDataLoss);
  EXPECT_EQ(st.message(), manifest + ": no checksum line (\"# xxh3 ...\") at the end: truncated or edited; " + advice);
  WriteStates(tmp.path(), 12);  // newer: not offered
  EXPECT_EQ(OlderCheckpointsAdvice(dir), advice);
  std::filesystem::remove_all(tmp.File("ckpt-000000000003"));
  std::filesystem::remove_all(tmp.File("ckpt-000000000006"));
  EXPECT_EQ(OlderCheckpointsAdvice(dir),
            "checkpoint " + dir + " is damaged or incomplete, and " + tmp.path() +
                " holds no older complete checkpoint to resume from");
}

}  // namespace
}  // namespace tether
