// DataWatch: the job's data files by config field; a file changed under the
// job named once with what changed; a checkpoint's stamps against a resume's
// files (unchanged, changed, copied elsewhere, another count, none recorded).
#include "worker/train/data_watch.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>

#include <fstream>
#include <string>
#include <vector>

#include "tests/testing/file_bytes.h"
#include "tests/testing/temp_dir.h"

namespace tether {
namespace {

void Write(const std::string& path, const std::string& text) { testing::WriteFileBytes(path, text); }
using testing::SetMtime;

const char kRows[] = "2 3 2\n0 0:1 2:1\n1 1:1\n";

TEST(DataWatchTest, JobDataFilesListsEveryFieldInOrder) {
  testing::ScopedTempDir dir;
  JobConfig c;
  c.mutable_data()->set_train_file(dir.File("a.txt") + "," + dir.File("b.txt"));
  c.mutable_data()->set_train_split(dir.File("tr.txt"));
  c.mutable_data()->set_test_file(dir.File("a.txt"));
  c.mutable_data()->set_test_split(dir.File("../x/ts.txt"));
  StatusOr<std::vector<WatchedFile>> files = JobDataFiles(c);
  ASSERT_TRUE(files.ok()) << files.status().message();
  ASSERT_EQ(files->size(), 5u);
  const std::vector<std::pair<std::string, std::string>> want = {
      {"data.train_file", dir.File("a.txt")}, {"data.train_file", dir.File("b.txt")},
      {"data.train_split", dir.File("tr.txt")}, {"data.test_file", dir.File("a.txt")},
      {"data.test_split", dir.path().substr(0, dir.path().rfind('/')) + "/x/ts.txt"}};
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ((*files)[i].field, want[i].first) << i;
    EXPECT_EQ((*files)[i].path, want[i].second) << i;
  }
}

TEST(DataWatchTest, AFileChangedUnderTheJobIsNamedOnce) {
  testing::ScopedTempDir dir;
  const std::string train = dir.File("train.txt");
  Write(train, kRows);
  SetMtime(train, 1796000000);
  // Named by two fields (train_file and test_file): checked, and named, once.
  StatusOr<DataWatch> watch = DataWatch::Start({{"data.train_file", train}, {"data.test_file", train}});
  ASSERT_TRUE(watch.ok()) << watch.status().message();
  EXPECT_EQ(watch->size(), 2u);
  EXPECT_EQ(watch->stamps()[0].bytes, 22u);
  EXPECT_TRUE(watch->Check("at the end of epoch 1").ok());
  std::ofstream(train, std::ios::app) << "1 2:1\n";
  SetMtime(train, 1796000060);
  const Status st = watch->Check("at the end of epoch 2");
  EXPECT_EQ(st.code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(st.message().rfind("data file " + train + " changed: size 22 → 28 bytes, modified ", 0), 0u)
      << st.message();
  EXPECT_NE(st.message().find("(while the job ran: checked at the end of epoch 2)"), std::string::npos);
  EXPECT_EQ(st.message().find("data file", 1), std::string::npos) << "named twice: " << st.message();
  // Gone: NotFound at the start, named.
  StatusOr<DataWatch> none = DataWatch::Start({{"data.train_file", dir.File("none.txt")}});
  EXPECT_EQ(none.status().code(), Status::Code::kNotFound);
  EXPECT_EQ(none.status().message(), "data file " + dir.File("none.txt") + ": no such file");
}

class DataWatchResumeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    train_ = dir_.File("train.txt");
    split_ = dir_.File("split.txt");
    Write(train_, kRows);
    Write(split_, "1\n2\n");
    SetMtime(train_, 1796000000);
    StatusOr<DataWatch> w = DataWatch::Start({{"data.train_file", train_}, {"data.train_split", split_}});
    ASSERT_TRUE(w.ok()) << w.status().message();
    w->Record(&manifest_);
  }
  // The resume's watch over `train` (and the same split).
  StatusOr<DataWatch> Resumed(const std::string& train) {
    return DataWatch::Start({{"data.train_file", train}, {"data.train_split", split_}});
  }

  testing::ScopedTempDir dir_;
  std::string train_, split_;
  CheckpointManifest manifest_;
  const std::string ckpt_ = "/ck/ckpt-000000000040";
};

TEST_F(DataWatchResumeTest, TheManifestRecordsEveryFile) {
  ASSERT_TRUE(manifest_.data_files_recorded());
  ASSERT_EQ(manifest_.data_files_size(), 2);
  EXPECT_EQ(manifest_.data_files(0).field(), "data.train_file");
  EXPECT_EQ(manifest_.data_files(0).path(), train_);
  EXPECT_EQ(manifest_.data_files(0).bytes(), 22u);
  EXPECT_EQ(manifest_.data_files(0).mtime_ns(), 1796000000ll * 1000000000);
  EXPECT_NE(manifest_.data_files(0).digest(), 0u);
  EXPECT_EQ(manifest_.data_files(1).field(), "data.train_split");
}

TEST_F(DataWatchResumeTest, UnchangedFilesResume) {
  StatusOr<DataWatch> now = Resumed(train_);
  ASSERT_TRUE(now.ok());
  std::vector<std::string> notes;
  EXPECT_TRUE(now->CheckResume(manifest_, ckpt_, &notes).ok());
  EXPECT_TRUE(notes.empty()) << notes.front();
}

TEST_F(DataWatchResumeTest, AChangedFileIsRefusedNamingItAndTheCheckpoint) {
  Write(train_, "2 3 2\n0 0:1 2:1\n1 1:1\n1 2:1\n");
  SetMtime(train_, 1796000060);
  StatusOr<DataWatch> now = Resumed(train_);
  ASSERT_TRUE(now.ok());
  std::vector<std::string> notes;
  const Status st = now->CheckResume(manifest_, ckpt_, &notes);
  EXPECT_EQ(st.code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(st.message().rfind("cannot resume from " + ckpt_ + ": data file " + train_ +
                                   " changed: size 22 → 28 bytes, modified 2026-11-30T00:53:20.000000000Z → "
                                   "2026-11-30T00:54:20.000000000Z, content digest ",
                               0),
            0u)
      << st.message();
  EXPECT_NE(st.message().find(" (since the checkpoint): "), std::string::npos) << st.message();
  // Only touched, at the same path: the time tells.
  Write(train_, kRows);
  SetMtime(train_, 1796000120);
  now = Resumed(train_);
  EXPECT_EQ(now->CheckResume(manifest_, ckpt_, &notes).code(), Status::Code::kFailedPrecondition);
}

TEST_F(DataWatchResumeTest, TheSameFileAtAnotherPathIsAccepted) {
  const std::string copy = dir_.File("copy.txt");
  Write(copy, kRows);
  SetMtime(copy, 1796009999);  // a copy's own time
  StatusOr<DataWatch> now = Resumed(copy);
  ASSERT_TRUE(now.ok());
  std::vector<std::string> notes;
  EXPECT_TRUE(now->CheckResume(manifest_, ckpt_, &notes).ok());
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0], "data.train_file: " + copy + " has the size and content digest of " + train_ +
                          ", which the checkpoint's job read: accepted as the same file");
  // Another file at another path is refused, naming both paths.
  Write(copy, "2 3 2\n0 0:1 2:1\n1 0:1\n");
  now = Resumed(copy);
  const Status st = now->CheckResume(manifest_, ckpt_, &notes);
  EXPECT_EQ(st.message().rfind("cannot resume from " + ckpt_ + ": data file " + copy +
                                   " (data.train_file; the checkpoint's job read " + train_ +
                                   ") changed: content digest ",
                               0),
            0u)
      << st.message();
}

// data.validation_split is stamped and compared as data.train_split is:
// another file of other rows is refused naming the field and both paths;
// a file the checkpoint's job did not read is said not compared.
TEST_F(DataWatchResumeTest, AnotherValidationSplitIsRefusedAsATrainSplitIs) {
  JobConfig c;
  c.mutable_data()->set_train_file(train_);
  c.mutable_data()->set_validation_split(dir_.File("val.txt"));
  Write(dir_.File("val.txt"), "2\n");
  StatusOr<std::vector<WatchedFile>> files = JobDataFiles(c);
  ASSERT_TRUE(files.ok()) << files.status().message();
  ASSERT_EQ(files->size(), 2u);
  EXPECT_EQ((*files)[1].field, "data.validation_split");
  CheckpointManifest m;
  StatusOr<DataWatch> then = DataWatch::Start(*files);
  ASSERT_TRUE(then.ok());
  then->Record(&m);
  const std::string other = dir_.File("val_other.txt");
  Write(other, "1\n");
  c.mutable_data()->set_validation_split(other);
  StatusOr<DataWatch> now = DataWatch::Start(*JobDataFiles(c));
  ASSERT_TRUE(now.ok());
  std::vector<std::string> notes;
  const Status st = now->CheckResume(m, ckpt_, &notes);
  EXPECT_EQ(st.code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(st.message().rfind("cannot resume from " + ckpt_ + ": data file " + other +
                                   " (data.validation_split; the checkpoint's job read " + dir_.File("val.txt") +
                                   ") changed: ",
                               0),
            0u)
      << st.message();
  c.mutable_data()->clear_validation_split();
  now = DataWatch::Start(*JobDataFiles(c));
  notes.clear();
  EXPECT_TRUE(now->CheckResume(m, ckpt_, &notes).ok());
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0], "data.validation_split is not set in this job (the checkpoint's job read " +
                          dir_.File("val.txt") + "): not compared");
}

TEST_F(DataWatchResumeTest, AFileOfTwoFieldsIsNamedOnce) {
  CheckpointManifest m;
  StatusOr<DataWatch> then = DataWatch::Start({{"data.train_file", train_}, {"data.test_file", train_}});
  ASSERT_TRUE(then.ok());
  then->Record(&m);
  const std::string copy = dir_.File("copy.txt");
  Write(copy, kRows);
  StatusOr<DataWatch> now = DataWatch::Start({{"data.train_file", copy}, {"data.test_file", copy}});
  std::vector<std::string> notes;
  EXPECT_TRUE(now->CheckResume(m, ckpt_, &notes).ok());
  EXPECT_EQ(notes.size(), 1u);
  Write(copy, "2 3 2\n0 0:1 2:1\n1 0:1\n");
  now = DataWatch::Start({{"data.train_file", copy}, {"data.test_file", copy}});
  const Status st = now->CheckResume(m, ckpt_, &notes);
  EXPECT_EQ(st.code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(st.message().find("data file", st.message().find("data file") + 1), std::string::npos)
      << "named twice: " << st.message();
}

TEST_F(DataWatchResumeTest, AnotherNumberOfFilesIsRefused) {
  const std::string more = dir_.File("more.txt");
  Write(more, kRows);
  StatusOr<DataWatch> now = DataWatch::Start({{"data.train_file", train_}, {"data.train_file", more}});
  ASSERT_TRUE(now.ok());
  std::vector<std::string> notes;
  const Status st = now->CheckResume(manifest_, ckpt_, &notes);
  EXPECT_EQ(st.message(), "cannot resume from " + ckpt_ + ": config field data.train_file names 2 file(s) (" +
                              train_ + ", " + more + "), the checkpoint's job read 1 (" + train_ +
                              ") (since the checkpoint): its places in the data are rows of the files it recorded; "
                              "restore the file, or start a new job from it");
  // data.train_split is not set now: not compared, said so.
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0], "data.train_split is not set in this job (the checkpoint's job read " + split_ +
                          "): not compared");
}

TEST_F(DataWatchResumeTest, ACheckpointWithoutStampsResumesSayingSo) {
  CheckpointManifest old;
  StatusOr<DataWatch> now = Resumed(train_);
  std::vector<std::string> notes;
  EXPECT_TRUE(now->CheckResume(old, ckpt_, &notes).ok());
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0], "the checkpoint " + ckpt_ +
                          " records no data-file stamps (written before they were recorded): the data files could "
                          "not be checked against it");
}

TEST(DataWatchTest, FieldDigestsFollowTheContentNotThePathOrTime) {
  testing::ScopedTempDir dir;
  const std::string a = dir.File("a.txt"), b = dir.File("b.txt"), split = dir.File("split.txt");
  Write(a, kRows);
  Write(b, kRows);
  Write(split, "1\n2\n");
  SetMtime(b, 1796000999);
  StatusOr<DataWatch> wa = DataWatch::Start({{"data.train_file", a}, {"data.train_split", split}});
  StatusOr<DataWatch> wb = DataWatch::Start({{"data.train_file", b}, {"data.train_split", split}});
  ASSERT_TRUE(wa.ok() && wb.ok());
  const auto da = wa->FieldDigests(), db = wb->FieldDigests();
  ASSERT_EQ(da.size(), 2u);
  EXPECT_EQ(da[0].first, "data.train_file");
  EXPECT_EQ(da[1].first, "data.train_split");
  EXPECT_EQ(da, db);  // a copy elsewhere, another time: the same digests
  EXPECT_NE(da[0].second, da[1].second);
  Write(b, "2 3 2\n0 0:1 2:1\n2 1:1\n");  // one label changed, same size
  StatusOr<DataWatch> changed = DataWatch::Start({{"data.train_file", b}, {"data.train_split", split}});
  ASSERT_TRUE(changed.ok());
  EXPECT_NE(changed->FieldDigests()[0].second, da[0].second);
  EXPECT_EQ(changed->FieldDigests()[1].second, da[1].second);
  // Two files of one field: their order counts.
  StatusOr<DataWatch> ab = DataWatch::Start({{"data.train_file", a}, {"data.train_file", split}});
  StatusOr<DataWatch> ba = DataWatch::Start({{"data.train_file", split}, {"data.train_file", a}});
  ASSERT_TRUE(ab.ok() && ba.ok());
  ASSERT_EQ(ab->FieldDigests().size(), 1u);
  EXPECT_NE(ab->FieldDigests()[0].second, ba->FieldDigests()[0].second);
}

}  // namespace
}  // namespace tether
