// Signals, in child processes (a signal's default action ends the process
// that gets it): each terminating signal says its name and keeps its exit
// status, an inherited SIG_IGN stays, a write past the file-size limit fails
// naming the file instead of killing the process, and the stop signals reach
// a graceful handler.
#include "cli/signals.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include "core/file_util.h"
#include "tests/testing/temp_dir.h"

namespace tether {
namespace {

struct Child {
  int status = 0;
  std::string err;  // what it wrote to stderr
};

// Runs `body` in a child whose stderr is captured; waits at most 10 s.
template <typename F>
Child RunChild(F body) {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], STDERR_FILENO);
    close(fds[0]);
    body();
    _exit(0);
  }
  close(fds[1]);
  Child c;
  char buf[512];
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  fcntl(fds[0], F_SETFL, O_NONBLOCK);
  while (std::chrono::steady_clock::now() < deadline) {
    const ssize_t n = read(fds[0], buf, sizeof(buf));
    if (n > 0) c.err.append(buf, static_cast<size_t>(n));
    if (n == 0) break;
    if (n < 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  close(fds[0]);
  if (waitpid(pid, &c.status, WNOHANG) == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &c.status, 0);
    ADD_FAILURE() << "child still running after 10 s";
  }
  return c;
}

TEST(SignalsTest, ATerminatingSignalIsNamedAndKeepsItsExitStatus) {
  for (int sig : {SIGUSR1, SIGALRM, SIGHUP, SIGXCPU, SIGRTMIN + 3}) {
    const Child c = RunChild([sig] {
      InstallSignalReports("tether-test");
      raise(sig);
      _exit(7);  // not reached
    });
    ASSERT_TRUE(WIFSIGNALED(c.status)) << SignalName(sig);
    EXPECT_EQ(WTERMSIG(c.status), sig);
    EXPECT_EQ(c.err, "tether-test: ended by " + SignalName(sig) + " (signal " + std::to_string(sig) + ")\n");
  }
  EXPECT_EQ(SignalName(SIGUSR2), "SIGUSR2");
  EXPECT_EQ(SignalName(SIGRTMIN + 3), "SIGRTMIN+3");
}

TEST(SignalsTest, AnInheritedIgnoreStaysAndPipeIsIgnored) {
  const Child c = RunChild([] {
    signal(SIGHUP, SIG_IGN);  // as nohup leaves it
    InstallSignalReports("tether-test");
    raise(SIGHUP);
    raise(SIGPIPE);
    if (InstallStopSignals([](int) {}).size() != StopSignals().size() - 1) _exit(3);
    _exit(0);
  });
  ASSERT_TRUE(WIFEXITED(c.status)) << c.err;
  EXPECT_EQ(WEXITSTATUS(c.status), 0);
  EXPECT_EQ(c.err, "");
}

TEST(SignalsTest, AWritePastTheFileSizeLimitFailsNamingTheFile) {
  testing::ScopedTempDir dir;
  const std::string path = dir.File("big.bin");
  const Child c = RunChild([&path] {
    InstallSignalReports("tether-test");
    struct rlimit r {};
    getrlimit(RLIMIT_FSIZE, &r);
    r.rlim_cur = 4096;
    setrlimit(RLIMIT_FSIZE, &r);
    StatusOr<AtomicFile> f = AtomicFile::Create(path);
    if (!f.ok()) _exit(4);
    const Status st = f->Append(std::string(8192, 'x'));
    const std::string msg = st.message() + "\n";
    (void)!write(STDERR_FILENO, msg.data(), msg.size());
    _exit(st.ok() ? 5 : 0);
  });
  ASSERT_TRUE(WIFEXITED(c.status)) << "killed by signal " << WTERMSIG(c.status);
  EXPECT_EQ(WEXITSTATUS(c.status), 0);
  EXPECT_NE(c.err.find(path + ".tmp."), std::string::npos) << c.err;
  EXPECT_NE(c.err.find(": cannot write: File too large (the file-size limit RLIMIT_FSIZE, ulimit -f, is 4096 bytes)"),
            std::string::npos)
      << c.err;
}

volatile sig_atomic_t g_stop = 0;

TEST(SignalsTest, EveryStopSignalReachesTheGracefulHandler) {
  for (int sig : StopSignals()) {
    const Child c = RunChild([sig] {
      InstallSignalReports("tether-test");
      InstallStopSignals([](int s) { g_stop = s; });
      raise(sig);
      _exit(g_stop == sig ? 0 : 6);
    });
    ASSERT_TRUE(WIFEXITED(c.status)) << SignalName(sig);
    EXPECT_EQ(WEXITSTATUS(c.status), 0) << SignalName(sig);
  }
}

TEST(SignalsTest, AStopSignalInheritedBlockedIsUnblockedAndReachesTheHandler) {
  const Child c = RunChild([] {
    sigset_t term;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    sigprocmask(SIG_BLOCK, &term, nullptr);  // as a parent's mask would leave it
    InstallSignalReports("tether-test");
    InstallStopSignals([](int s) { g_stop = s; });
    sigset_t now;
    sigprocmask(SIG_BLOCK, nullptr, &now);
    if (sigismember(&now, SIGTERM)) _exit(7);
    raise(SIGTERM);
    _exit(g_stop == SIGTERM ? 0 : 6);
  });
  ASSERT_TRUE(WIFEXITED(c.status)) << c.err;
  EXPECT_EQ(WEXITSTATUS(c.status), 0);
}

}  // namespace
}  // namespace tether
