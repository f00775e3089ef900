// CheckLaunch (launch/launch_checks.h): a launched job and a task of
// srun/mpirun are checked alike, with exact messages, and a check makes no
// folder: after it, every output folder that did not exist still does not.
#include "launch/launch_checks.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

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

}  // namespace
}  // namespace tether
