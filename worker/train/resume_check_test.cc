// CheckResumeConfig / ResumeConfigDiff (worker/train/resume_check.h): a
// resume with another table shape, input transform or validation rows is
// refused naming the field and both values; a checkpoint that cannot be
// read is left to the resume.
#include "worker/train/resume_check.h"

#include <gtest/gtest.h>

#include "checkpoint/checkpoint.h"
#include "core/config.h"
#include "core/env.h"
#include "tests/testing/temp_dir.h"
#include "worker/models/model_registry.h"

namespace tether {
namespace {

JobConfig Bibtex() {
  StatusOr<JobConfig> c = LoadJobConfig("tests/data/bibtex_fixed.pbtxt");
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return *c;
}

// The manifest a run of `job` writes: its tables and its config.
CheckpointManifest ManifestOf(const JobConfig& job) {
  CheckpointManifest m;
  m.set_format_version(kCheckpointFormatVersion);
  m.set_clock(5);
  for (const TableSpec& t : TablesForJob(job)) *m.add_tables() = t;
  *m.mutable_config() = job;
  return m;
}

TEST(ResumeCheckTest, TheFirstDifferenceIsNamedWithBothValues) {
  const JobConfig job = Bibtex();
  const CheckpointManifest m = ManifestOf(job);
  EXPECT_EQ(ResumeConfigDiff(m, job, TablesForJob(job)), "");
  JobConfig narrower = job;
  narrower.mutable_model()->set_hidden(128);
  EXPECT_EQ(ResumeConfigDiff(m, narrower, TablesForJob(narrower)),
            "table 'w1', field dim: the checkpoint has 256, the job has 128 (a table's shape and optimizer type "
            "cannot change on resume)");
  JobConfig tf_idf = job;
  tf_idf.mutable_data()->set_tf_idf(true);
  EXPECT_EQ(ResumeConfigDiff(m, tf_idf, TablesForJob(tf_idf)),
            "field data.tf_idf: the checkpoint has false, the job has true (a resume reads its rows as the "
            "checkpoint's model was trained on them)");
  // A manifest that records no config: only the tables are compared.
  CheckpointManifest bare = m;
  bare.clear_config();
  EXPECT_EQ(ResumeConfigDiff(bare, tf_idf, TablesForJob(tf_idf)), "");
}

TEST(ResumeCheckTest, AResumeFromAFolderIsRefusedNamingTheCheckpoint) {
  testing::ScopedTempDir tmp;
  const JobConfig job = Bibtex();
  const std::string ckpt = tmp.File("ck/ckpt-000000000005");
  ASSERT_TRUE(WriteManifest(FileSystem::Default(), ckpt, ManifestOf(job)).ok());
  EXPECT_TRUE(CheckResumeConfig(job, tmp.File("ck")).ok());
  EXPECT_TRUE(CheckResumeConfig(job, "").ok());
  JobConfig narrower = job;
  narrower.mutable_model()->set_hidden(128);
  const Status st = CheckResumeConfig(narrower, tmp.File("ck"));
  EXPECT_EQ(st.code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(st.message(), "cannot resume from " + ckpt +
                              ": table 'w1', field dim: the checkpoint has 256, the job has 128 (a table's shape and "
                              "optimizer type cannot change on resume)");
  // No checkpoint there: the resume names that itself.
  EXPECT_TRUE(CheckResumeConfig(narrower, tmp.File("none")).ok());
}

TEST(ResumeCheckTest, FewerEpochsThanAFinishedCheckpointTrainedAreRefusedNamingBoth) {
  testing::ScopedTempDir tmp;
  JobConfig job = Bibtex();
  job.mutable_train()->set_epochs(15);
  job.mutable_cluster()->set_num_workers(1);
  CheckpointManifest m = ManifestOf(job);
  m.set_num_workers(1);
  m.set_final(true);
  CheckpointWorker* w = m.add_workers();
  w->set_rank(0);
  w->set_kind(CheckpointWorker::FINISHED);
  const std::string ckpt = tmp.File("ck/ckpt-000000000005-final");
  ASSERT_TRUE(WriteManifest(FileSystem::Default(), ckpt, m).ok());
  EXPECT_TRUE(CheckResumeConfig(job, tmp.File("ck")).ok());
  JobConfig fewer = job;
  fewer.mutable_train()->set_epochs(3);
  const Status st = CheckResumeConfig(fewer, tmp.File("ck"));
  EXPECT_EQ(st.code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(st.message(), "cannot resume from " + ckpt +
                              ": the checkpoint has begun epoch 15 (worker 0), but train.epochs (--epochs) is 3: a "
                              "resume trains on to train.epochs and never undoes an epoch, so its figures would be "
                              "of 15 epochs; resume with --epochs=15 or more, or export the checkpoint's model "
                              "(tether-export)");
}

}  // namespace
}  // namespace tether
