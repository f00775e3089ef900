// CheckLaunchProcessCount: a launch past kMaxLaunchProcesses or the user's
// RLIMIT_NPROC is refused naming both counts and the limit; at the limits
// it passes.
#include "launch/process_count.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

namespace tether {
namespace {

TEST(ProcessCountTest, AboveThePerHostLimitIsRefused) {
  EXPECT_EQ(kMaxLaunchProcesses, 1024);
  EXPECT_TRUE(CheckLaunchProcessCount(1, 1023, 0, "tcp", UINT64_MAX).ok());
  EXPECT_EQ(CheckLaunchProcessCount(1, 100000, 0, "tcp", UINT64_MAX).message(),
            "tether-launch would start 1 server(s) and 100000 worker(s): 100001 processes on this host, above the "
            "1024 one launcher starts; run a larger job's processes on several hosts (srun or mpirun with "
            "tether-launch in engine mode, or tether-server and tether-worker by hand: docs/DEPLOY.md), or give "
            "fewer --workers");
  const std::string joins = CheckLaunchProcessCount(2, 1000, 30, "ipc", UINT64_MAX).message();
  EXPECT_EQ(joins.rfind("tether-launch would start 2 server(s) and 1000 worker(s) and 30 joining worker(s): 1032 "
                        "processes on this host, above the 1024",
                        0),
            0u)
      << joins;
  const std::string threads = CheckLaunchProcessCount(1, 2000, 0, "inproc", UINT64_MAX).message();
  EXPECT_EQ(threads.rfind("tether-launch would start 1 server(s) and 2000 worker(s) as threads of one process: 2001 "
                          "threads on this host, above the 1024",
                          0),
            0u)
      << threads;
}

TEST(ProcessCountTest, AboveRlimitNprocIsRefused) {
  EXPECT_TRUE(CheckLaunchProcessCount(2, 98, 0, "tcp", 100).ok());
  EXPECT_EQ(CheckLaunchProcessCount(2, 99, 0, "tcp", 100).message(),
            "tether-launch would start 2 server(s) and 99 worker(s): 101 processes on this host, above the process "
            "limit RLIMIT_NPROC (ulimit -u) of 100, which the user's every process and thread counts against; raise "
            "it, or give fewer --workers");
  EXPECT_GE(CurrentProcessLimit(), 1u);
}

}  // namespace
}  // namespace tether
