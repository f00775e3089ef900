// UnrestartableExit (launch/unrestartable.h): a refused configuration and
// refused input data end the job with their own exit code and a line that
// says why it is not restarted; any other failure is the job's exit 1.
#include "launch/unrestartable.h"

#include <sys/wait.h>

#include <csignal>

#include <gtest/gtest.h>

#include "worker/train/job_outcome.h"

namespace tether {
namespace {

int Exited(int code) { return code << 8; }  // a waitpid status of exit(code)

TEST(UnrestartableTest, BadInputDataIsNeverRestarted) {
  ASSERT_TRUE(WIFEXITED(Exited(kExitBadInput)));
  ASSERT_EQ(WEXITSTATUS(Exited(kExitBadInput)), kExitBadInput);
  const std::optional<Unrestartable> u = UnrestartableExit("worker 0", Exited(kExitBadInput));
  ASSERT_TRUE(u.has_value());
  EXPECT_EQ(u->job_exit, 6);
  EXPECT_EQ(u->why,
            "worker 0 refused its input data (exit 6: the error above names the file and what is wrong in it): the job exits 6, not "
            "restarted (the input is bad: a restart would read it again)");
}

TEST(UnrestartableTest, ARefusedConfigurationExitsTwo) {
  const std::optional<Unrestartable> u = UnrestartableExit("server 1", Exited(2));
  ASSERT_TRUE(u.has_value());
  EXPECT_EQ(u->job_exit, 2);
  EXPECT_EQ(u->why, "server 1 refused its configuration (exit 2): the job exits 2, not restarted");
}

TEST(UnrestartableTest, OtherFailuresAreTheJobsExitOne) {
  EXPECT_FALSE(UnrestartableExit("worker 0", Exited(1)).has_value());
  EXPECT_FALSE(UnrestartableExit("worker 0", Exited(143)).has_value());
  EXPECT_FALSE(UnrestartableExit("worker 0", SIGKILL).has_value());  // killed by a signal, no exit code
  EXPECT_FALSE(UnrestartableExit("worker 0", Exited(0)).has_value());
}

TEST(UnrestartableTest, TheExitCodesAreTheDocumentedOnes) {
  // docs/ERRORS.md's exit-code tables: 2 a refused start, 3 diverged, 4 a
  // partial evaluation, 6 bad input data.
  EXPECT_EQ(kExitDiverged, 3);
  EXPECT_EQ(kExitPartialEval, 4);
  EXPECT_EQ(kExitBadInput, 6);
}

}  // namespace
}  // namespace tether
