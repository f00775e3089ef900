// CheckLaunch (launch/launch_checks.h): a launched job and a task of
// srun/mpirun are checked alike, with exact messages, and a check makes no
// folder: after it, every output folder that did not exist still does not.
#include "launch/launch_checks.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"

#include "tests/testing/temp_dir.h"

namespace tether {
namespace {

JobConfig TwoByTwo() {
  JobConfig c;
  c.set_name("job");
  c.mutable_cluster()->set_num_servers(2);
  c.mutable_cluster()->set_num_workers(2);
  c.mutable_cluster()->set_job_id("job-1");
  return c;
}

EngineTask SlurmTask(int rank, int ntasks) {
  EngineTask t;
  t.scheduler = "SLURM";
  t.rank_var = "SLURM_PROCID";
  t.rank = rank;
  t.ntasks = ntasks;
  return t;
}

// Both ways a launch is checked: as the launcher of the whole job, and as
// task 1 of the 4 srun tasks of the same job.
std::vector<Status> CheckBoth(const LaunchRequest& r, const JobConfig& job) {
  return {CheckLaunch(r, job, "/b", std::nullopt).status(), CheckLaunch(r, job, "/b", SlurmTask(1, 4)).status()};
}

TEST(LaunchChecksTest, OutputFoldersAreFoundCreatableNeverMade) {
  testing::ScopedTempDir tmp;
  LaunchRequest r;
  r.config_path = "job.pbtxt";
  r.metrics_out = tmp.File("m.json");
  r.metrics_port = 0;
  r.metrics_sd_dir = tmp.File("sd/targets");
  JobConfig job = TwoByTwo();
  job.mutable_checkpoint()->set_dir(tmp.File("ck/run1"));
  job.mutable_train()->set_metrics_dir(tmp.File("md/run1"));
  for (const Status& st : CheckBoth(r, job)) EXPECT_TRUE(st.ok()) << st.ToString();
  for (const char* made : {"sd", "ck", "md", "m.json"})
    EXPECT_FALSE(std::filesystem::exists(tmp.File(made))) << made << " was made by a check";
}

TEST(LaunchChecksTest, TheLauncherAndATaskRefuseAlike) {
  testing::ScopedTempDir tmp;
  LaunchRequest r;
  r.config_path = "job.pbtxt";
  r.metrics_sd_dir = tmp.File("sd");
  for (const Status& st : CheckBoth(r, TwoByTwo()))
    EXPECT_EQ(st.message(), "--metrics_sd_dir needs --metrics_port (0: a free port per process)");
  std::ofstream(tmp.File("file")) << "x";
  r.metrics_port = 0;
  r.metrics_sd_dir = tmp.File("file/sd");
  for (const Status& st : CheckBoth(r, TwoByTwo()))
    EXPECT_EQ(st.message(), "flag --metrics_sd_dir=" + r.metrics_sd_dir + ": " + tmp.File("file") +
                                " is a file, not a directory, so nothing can be made under it");
  r.metrics_sd_dir.clear();
  r.metrics_out = tmp.File("missing/m.json");
  for (const Status& st : CheckBoth(r, TwoByTwo()))
    EXPECT_EQ(st.message(), "flag --metrics_out=" + r.metrics_out + ": its folder " + tmp.File("missing") +
                                " does not exist");
}

TEST(LaunchChecksTest, ATaskIsCheckedForItsPlaceInTheJob) {
  LaunchRequest r;
  r.config_path = "job.pbtxt";
  EXPECT_TRUE(CheckLaunch(r, TwoByTwo(), "/b", SlurmTask(0, 4)).ok());
  EXPECT_EQ(CheckLaunch(r, TwoByTwo(), "/b", SlurmTask(0, 2)).status().message(),
            "SLURM task 0 of 2 (SLURM_PROCID): 2 task(s) and --num_servers=2 leave no worker: start num_servers + "
            "num_workers tasks (srun -n / mpirun -np)");
  r.num_workers_flag = "3";
  EXPECT_EQ(CheckLaunch(r, TwoByTwo(), "/b", SlurmTask(0, 4)).status().message(),
            "SLURM task 0 of 4 (SLURM_PROCID): --num_workers=3 contradicts the 4 tasks less 2 server(s) = 2 "
            "worker(s)");
}

// The launcher makes its folder under $TMPDIR: one it cannot is refused
// before anything starts, naming TMPDIR. A task of srun/mpirun makes none.
TEST(LaunchChecksTest, ATmpdirTheLauncherCannotWriteIsRefusedNamingIt) {
  testing::ScopedTempDir tmp;
  const char* old = std::getenv("TMPDIR");
  const std::string saved = old == nullptr ? "" : old;
  LaunchRequest r;
  r.config_path = "job.pbtxt";
  setenv("TMPDIR", "/nonexistent/tmp", 1);
  std::vector<Status> both = CheckBoth(r, TwoByTwo());
  EXPECT_EQ(both[0].code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(both[0].message(), "TMPDIR=/nonexistent/tmp: no such folder; set TMPDIR to a writable folder");
  EXPECT_TRUE(both[1].ok()) << both[1].ToString();
  std::ofstream(tmp.File("file")) << "x";
  setenv("TMPDIR", tmp.File("file").c_str(), 1);
  EXPECT_EQ(CheckLaunch(r, TwoByTwo(), "/b", std::nullopt).status().message(),
            "TMPDIR=" + tmp.File("file") + ": is not a folder; set TMPDIR to a writable folder");
  setenv("TMPDIR", tmp.path().c_str(), 1);
  EXPECT_TRUE(CheckLaunch(r, TwoByTwo(), "/b", std::nullopt).ok());
  if (old == nullptr)
    unsetenv("TMPDIR");
  else
    setenv("TMPDIR", saved.c_str(), 1);
}

// --check_config reads a resume's checkpoint whole (CheckLaunch leaves it to
// the processes): a damaged MANIFEST is named with the older checkpoints.
TEST(LaunchChecksTest, ADamagedResumeCheckpointIsRefusedNamingTheFile) {
  testing::ScopedTempDir tmp;
  LaunchRequest r;
  r.config_path = "job.pbtxt";
  r.resume_from = tmp.File("ck");
  for (const int64_t clock : {3, 6}) {
    CheckpointManifest m;
    m.set_format_version(kCheckpointFormatVersion);
    m.set_clock(clock);
    m.set_num_servers(2);
    ASSERT_TRUE(WriteManifest(FileSystem::Default(), tmp.File("ck/" + CheckpointDirName(clock, false)), m).ok());
  }
  const std::string dir = tmp.File("ck/ckpt-000000000006");
  const std::string manifest = dir + "/MANIFEST";
  std::filesystem::resize_file(manifest, std::filesystem::file_size(manifest) - 10);
  for (const Status& st : CheckBoth(r, TwoByTwo())) EXPECT_TRUE(st.ok()) << st.ToString();
  const Status st = CheckResumeFiles(r);
  EXPECT_EQ(st.code(), Status::Code::kDataLoss);
  EXPECT_EQ(st.message(), "--resume_from=" + r.resume_from + ": " + manifest + ": no checksum line (\"# xxh3 ...\") at the end: truncated or edited; checkpoint " + dir +
                                   " is damaged or incomplete; resume from an older one with --resume_from=" +
                                   tmp.File("ck/ckpt-000000000003") + " (older complete ones in " + tmp.File("ck") +
                                   ", newest first: ckpt-000000000003)");
  EXPECT_TRUE(CheckResumeFiles(LaunchRequest{}).ok());
}

}  // namespace
}  // namespace tether
