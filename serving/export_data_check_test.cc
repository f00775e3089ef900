// CheckExportData: an export reads the training data only for label counts
// or TF-IDF weights; the training files are compared with the checkpoint's
// stamps (unchanged, changed, copied elsewhere, none recorded), and a
// changed test file, which an export does not read, is not compared.
#include "serving/export_data_check.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "tests/testing/file_bytes.h"
#include "tests/testing/temp_dir.h"
#include "worker/train/data_watch.h"

namespace tether {
namespace {

const char kRows[] = "2 3 2\n0 0:1 2:1\n1 1:1\n";

class ExportDataCheckTest : public ::testing::Test {
 protected:
  void SetUp() override {
    train_ = dir_.File("train.txt");
    test_ = dir_.File("test.txt");
    split_ = dir_.File("split.txt");
    testing::WriteFileBytes(train_, kRows);
    testing::WriteFileBytes(test_, kRows);
    testing::WriteFileBytes(split_, "1\n2\n");
    testing::SetMtime(train_, 1796000000);
    testing::SetMtime(test_, 1796000000);
    config_.mutable_data()->set_train_file(train_);
    config_.mutable_data()->set_train_split(split_);
    config_.mutable_data()->set_test_file(test_);
    StatusOr<std::vector<WatchedFile>> files = JobDataFiles(config_);
    ASSERT_TRUE(files.ok()) << files.status().message();
    StatusOr<DataWatch> w = DataWatch::Start(*files);
    ASSERT_TRUE(w.ok()) << w.status().message();
    w->Record(&manifest_);
    ASSERT_EQ(manifest_.data_files_size(), 3);
  }

  Status Check(std::vector<std::string>* notes) { return CheckExportData(config_, manifest_, ckpt_, notes); }

  testing::ScopedTempDir dir_;
  std::string train_, test_, split_;
  JobConfig config_;
  CheckpointManifest manifest_;
  const std::string ckpt_ = "/ck/ckpt-000000000040";
};

TEST_F(ExportDataCheckTest, ReadsTrainingDataOnlyForLabelCountsOrTfIdf) {
  JobConfig c;
  c.mutable_model()->set_type(XMC_MLP);
  c.mutable_data()->set_num_labels(159);
  EXPECT_TRUE(ExportReadsTrainingData(c, true));
  EXPECT_FALSE(ExportReadsTrainingData(c, false));
  c.mutable_data()->set_tf_idf(true);
  EXPECT_TRUE(ExportReadsTrainingData(c, false));
  JobConfig binary;
  binary.mutable_model()->set_type(SPARSE_LR);
  EXPECT_FALSE(ExportReadsTrainingData(binary, true));
}

TEST_F(ExportDataCheckTest, UnchangedTrainingFilesPass) {
  std::vector<std::string> notes;
  EXPECT_TRUE(Check(&notes).ok());
  EXPECT_TRUE(notes.empty()) << notes.front();
}

TEST_F(ExportDataCheckTest, AChangedTrainingFileIsRefusedNamingItAndTheCheckpoint) {
  testing::WriteFileBytes(train_, std::string(kRows) + "1 2:1\n");
  testing::SetMtime(train_, 1796000060);
  std::vector<std::string> notes;
  const Status st = Check(&notes);
  EXPECT_EQ(st.code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(st.message().rfind("cannot export from " + ckpt_ + ": data file " + train_ +
                                   " changed: size 22 → 28 bytes, modified 2026-11-30T00:53:20.000000000Z → "
                                   "2026-11-30T00:54:20.000000000Z, content digest ",
                               0),
            0u)
      << st.message();
  EXPECT_NE(st.message().find("restore the training files, or export with --label_counts=false"), std::string::npos)
      << st.message();
}

TEST_F(ExportDataCheckTest, AChangedSplitIsRefusedAndWithTfIdfNoWayAroundIsOffered) {
  testing::WriteFileBytes(split_, "1\n");
  config_.mutable_data()->set_tf_idf(true);
  std::vector<std::string> notes;
  const Status st = Check(&notes);
  EXPECT_EQ(st.code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(st.message().find("data file " + split_ + " changed: size 4 → 2 bytes"), std::string::npos)
      << st.message();
  EXPECT_EQ(st.message().find("--label_counts=false"), std::string::npos) << st.message();
}

TEST_F(ExportDataCheckTest, AMissingTrainingFileIsRefusedWithTheRemedyOfAChangedOne) {
  std::filesystem::remove(train_);
  std::vector<std::string> notes;
  Status st = Check(&notes);
  EXPECT_EQ(st.code(), Status::Code::kNotFound);
  EXPECT_EQ(st.message(), "cannot export from " + ckpt_ + ": data file " + train_ +
                              ": no such file; the label counts an export writes for PSP@k "
                              "are counted from the rows the job trained on; restore the training files, or export "
                              "with --label_counts=false (no label counts)");
  config_.mutable_data()->set_tf_idf(true);
  st = Check(&notes);
  EXPECT_EQ(st.message(), "cannot export from " + ckpt_ + ": data file " + train_ +
                              ": no such file; the TF-IDF weights an export writes are "
                              "counted from the rows the job trained on; restore the training files");
}

TEST_F(ExportDataCheckTest, AChangedTestFileIsNotCompared) {
  testing::WriteFileBytes(test_, "garbage\n");
  std::vector<std::string> notes;
  EXPECT_TRUE(Check(&notes).ok());
  EXPECT_TRUE(notes.empty()) << notes.front();
}

TEST_F(ExportDataCheckTest, ACopyElsewhereWithTheSameBytesIsAcceptedWithANote) {
  const std::string copy = dir_.File("copy.txt");
  testing::WriteFileBytes(copy, kRows);
  config_.mutable_data()->set_train_file(copy);
  std::vector<std::string> notes;
  EXPECT_TRUE(Check(&notes).ok());
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0], "data.train_file: " + copy + " has the size and content digest of " + train_ +
                          ", which the checkpoint's job read: accepted as the same file");
}

TEST_F(ExportDataCheckTest, AManifestWithoutStampsIsAcceptedWithANote) {
  manifest_.Clear();
  std::vector<std::string> notes;
  EXPECT_TRUE(Check(&notes).ok());
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("records no data-file stamps"), std::string::npos) << notes[0];
}

TEST_F(ExportDataCheckTest, AMissingTrainingFileIsNamed) {
  config_.mutable_data()->set_train_file(dir_.File("gone.txt"));
  std::vector<std::string> notes;
  const Status st = Check(&notes);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find(dir_.File("gone.txt")), std::string::npos) << st.message();
}

}  // namespace
}  // namespace tether
