// JudgeFailure (launch/failure_cause.h): which process a failed job failed
// on, and the launcher's exit code for it.
#include "launch/failure_cause.h"

#include <csignal>

#include <gtest/gtest.h>

namespace tether {
namespace {

int Exited(int code) { return code << 8; }  // a waitpid status of exit(code)
int Killed(int sig) { return sig; }         // a waitpid status of a death by `sig`

EndedProcess Ended(const std::string& role, int index, int wait_status, bool in_teardown = false) {
  EndedProcess p;
  p.name = role + " " + std::to_string(index) + " (pid " + std::to_string(100 + index) + ")";
  p.role = role;
  p.wait_status = wait_status;
  p.in_teardown = in_teardown;
  return p;
}

TEST(FailureCauseTest, AWorkerThatRefusedItsDataDecidesThoughTheServersItAbortedExitedFirst) {
  // The data file changed: worker 0 sends ABORT, both servers end (exit 1),
  // and are reaped before the worker's exit 6.
  const FailureCause v = JudgeFailure(
      {Ended("server", 0, Exited(1)), Ended("server", 1, Exited(1)), Ended("worker", 0, Exited(6))});
  EXPECT_EQ(v.cause, 2);
  EXPECT_EQ(v.job_exit, 6);
  EXPECT_EQ(v.why,
            "worker 0 (pid 100) refused its input data (exit 6: the error above names the file and what is wrong in "
            "it): the job exits 6, not restarted (the input is bad: a restart would read it again)");
}

TEST(FailureCauseTest, AnUnrestartableExitDuringTheTeardownStillDecides) {
  // The worker was still sending its ABORTs when the launcher stopped the job.
  const FailureCause v = JudgeFailure({Ended("server", 0, Exited(1)), Ended("worker", 1, Exited(143), true),
                                       Ended("worker", 0, Exited(6), true)});
  EXPECT_EQ(v.cause, 2);
  EXPECT_EQ(v.job_exit, 6);
}

TEST(FailureCauseTest, ARefusedConfigurationAnywhereExitsTwo) {
  const FailureCause v = JudgeFailure({Ended("worker", 0, Exited(1)), Ended("server", 1, Exited(2))});
  EXPECT_EQ(v.cause, 1);
  EXPECT_EQ(v.job_exit, 2);
}

TEST(FailureCauseTest, AKilledServerIsTheCauseOfTheExitsAfterIt) {
  const FailureCause v = JudgeFailure({Ended("worker", 0, Exited(1)), Ended("server", 1, Killed(SIGKILL))});
  EXPECT_EQ(v.cause, 1);
  EXPECT_EQ(v.job_exit, 1);
  EXPECT_EQ(v.why, "");
}

TEST(FailureCauseTest, AStoppedWorkerIsTheCauseOfTheServersFailure) {
  EndedProcess stopped = Ended("worker", 1, 0);
  stopped.stopped = true;
  const FailureCause v = JudgeFailure({Ended("server", 0, Exited(1)), stopped, Ended("worker", 0, Exited(1))});
  EXPECT_EQ(v.cause, 1);
  EXPECT_EQ(v.job_exit, 1);
}

TEST(FailureCauseTest, AStoppedServerIsNotAStoppedWorker) {
  EndedProcess stopped = Ended("server", 1, 0);
  stopped.stopped = true;
  const FailureCause v = JudgeFailure({stopped, Ended("server", 0, Exited(1))});
  EXPECT_EQ(v.cause, 1);
  EXPECT_EQ(v.job_exit, 1);
}

TEST(FailureCauseTest, AWorkersFailureDecidesOverTheServerExitsItCaused) {
  const FailureCause v = JudgeFailure({Ended("server", 0, Exited(1)), Ended("worker", 1, Exited(1))});
  EXPECT_EQ(v.cause, 1);
  EXPECT_EQ(v.job_exit, 1);
}

TEST(FailureCauseTest, AServerThatFailedAloneIsTheCause) {
  // The workers it left ended in the teardown: they are not the cause.
  const FailureCause v = JudgeFailure({Ended("server", 0, Exited(1)), Ended("worker", 0, Exited(143), true),
                                       Ended("worker", 1, Killed(SIGTERM), true)});
  EXPECT_EQ(v.cause, 0);
  EXPECT_EQ(v.job_exit, 1);
}

TEST(FailureCauseTest, NothingFailedIsNoCause) {
  const FailureCause none = JudgeFailure({});
  EXPECT_EQ(none.cause, -1);
  EXPECT_EQ(none.job_exit, 1);
  const FailureCause ok = JudgeFailure({Ended("worker", 0, Exited(0))});
  EXPECT_EQ(ok.cause, -1);
  EXPECT_EQ(ok.job_exit, 1);
}

}  // namespace
}  // namespace tether
