#include "launch/exec_signals.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <thread>

#include "launch/process_table.h"
#include "tests/testing/poll.h"

namespace tether {
namespace {

// One field of /proc/PID/status ("SigBlk", "SigIgn", "Name"), "" if none.
std::string StatusField(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) {
      const size_t start = line.find_first_not_of(" \t", field.size() + 1);
      return start == std::string::npos ? "" : line.substr(start);
    }
  }
  return "";
}

struct ChildSignals {
  std::string blocked, ignored;
  bool ended_by_sigterm = false;
};

// From a thread of its own with SIGTERM blocked (as a restarted launcher's
// thread has it), starts `sleep 30` and reads its signal state once it runs
// sleep; then sends it SIGTERM and waits for it to end (`sleep 30` is a
// stand-in that runs until that SIGTERM, never a wait: 30 s only bounds a
// child the test failed to reap). PR_SET_PDEATHSIG
// follows the thread that forked, so all of it happens on that thread.
ChildSignals SpawnFromBlockedThread() {
  ChildSignals out;
  std::thread([&out] {
    sigset_t term;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &term, nullptr);
    const int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    ProcessTable table("/bin", devnull);
    ASSERT_TRUE(table.Start("worker", 0, "sleep", {"30"}).ok());
    const pid_t pid = table.children()[0].pid;
    ASSERT_TRUE(testing::PollUntil(5000, [&] { return StatusField(pid, "Name") == "sleep"; }));
    out.blocked = StatusField(pid, "SigBlk");
    out.ignored = StatusField(pid, "SigIgn");
    kill(pid, SIGTERM);
    const bool reaped = testing::PollUntil(5000, [&] {
      table.ReapExited();
      return table.Live() == 0;
    });
    if (!reaped) table.SignalAll(SIGKILL);
    while (!reaped && table.Live() > 0) table.ReapExited();
    const int status = table.children()[0].wait_status;
    out.ended_by_sigterm = reaped && WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM;
    close(devnull);
  }).join();
  return out;
}

TEST(ExecSignalsTest, AChildStartsWithAnEmptyMaskAndDefaultActionsWhateverTheLauncherBlockedOrIgnored) {
  struct sigaction ign {}, old_usr1 {}, old_pipe {};
  ign.sa_handler = SIG_IGN;
  sigaction(SIGUSR1, &ign, &old_usr1);
  sigaction(SIGPIPE, &ign, &old_pipe);
  const ChildSignals child = SpawnFromBlockedThread();
  sigaction(SIGUSR1, &old_usr1, nullptr);
  sigaction(SIGPIPE, &old_pipe, nullptr);
  EXPECT_EQ(child.blocked, "0000000000000000");
  EXPECT_EQ(child.ignored, "0000000000000000");
  EXPECT_TRUE(child.ended_by_sigterm);
}

TEST(ExecSignalsTest, ASighupIgnoredUnderNohupStaysIgnoredInTheChild) {
  struct sigaction ign {}, old_hup {};
  ign.sa_handler = SIG_IGN;
  sigaction(SIGHUP, &ign, &old_hup);
  ASSERT_TRUE(SighupIgnored());
  const ChildSignals child = SpawnFromBlockedThread();
  sigaction(SIGHUP, &old_hup, nullptr);
  EXPECT_FALSE(SighupIgnored());
  EXPECT_EQ(child.blocked, "0000000000000000");
  EXPECT_EQ(child.ignored, "0000000000000001");  // bit 0: SIGHUP alone
  EXPECT_TRUE(child.ended_by_sigterm);
}

}  // namespace
}  // namespace tether
