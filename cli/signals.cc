#include "cli/signals.h"

#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace tether {
namespace {

constexpr int kMaxSignal = 65;
// The line each reported signal writes, made before any signal can come
// (a handler may not format or allocate).
char g_lines[kMaxSignal][160];
size_t g_line_size[kMaxSignal];

void Report(int sig) {
  if (sig > 0 && sig < kMaxSignal && g_line_size[sig] > 0) {
    const ssize_t ignored = write(STDERR_FILENO, g_lines[sig], g_line_size[sig]);
    (void)ignored;
  }
  // The default action now ends the process as the signal would have,
  // once this handler returns and the signal is unblocked.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(sig, &dfl, nullptr);
  raise(sig);
}

bool AtDefault(int sig) {
  struct sigaction old {};
  return sigaction(sig, nullptr, &old) == 0 && !(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_DFL;
}

// Signals whose default action ends the process (signal(7): Term or Core),
// but for SIGKILL and the ones a fault raises (SIGSEGV, SIGBUS, SIGFPE,
// SIGILL, SIGABRT, SIGTRAP, SIGSYS: glog and the sanitizers report those).
std::vector<int> TerminatingSignals() {
  std::vector<int> out = {SIGHUP, SIGINT,  SIGQUIT,  SIGUSR1, SIGUSR2, SIGALRM, SIGTERM,
                          SIGXCPU, SIGVTALRM, SIGPROF, SIGIO, SIGPWR, SIGSTKFLT};
  for (int s = SIGRTMIN; s <= SIGRTMAX; ++s) out.push_back(s);
  return out;
}

// A process may start with signals blocked (a parent that blocked them
// for a signalfd or sigwait and did not reset its child's mask): a handler
// would then never run, and a SIGTERM would wait, pending, for ever.
void UnblockSignals(const std::vector<int>& sigs) {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : sigs) sigaddset(&set, sig);
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
}

}  // namespace

const std::vector<int>& StopSignals() {
  static const std::vector<int> kStop = {SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2, SIGXCPU, SIGPWR};
  return kStop;
}

std::string SignalName(int sig) {
  if (sig >= SIGRTMIN && sig <= SIGRTMAX)
    return sig == SIGRTMIN ? "SIGRTMIN" : "SIGRTMIN+" + std::to_string(sig - SIGRTMIN);
  const char* abbrev = sigabbrev_np(sig);
  return abbrev != nullptr ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

void InstallSignalReports(const std::string& program) {
  signal(SIGPIPE, SIG_IGN);
  signal(SIGXFSZ, SIG_IGN);
  std::vector<int> reported;
  for (int sig : TerminatingSignals()) {
    if (sig <= 0 || sig >= kMaxSignal || !AtDefault(sig)) continue;
    const int n = std::snprintf(g_lines[sig], sizeof(g_lines[sig]), "%s: ended by %s (signal %d)\n",
                                program.c_str(), SignalName(sig).c_str(), sig);
    g_line_size[sig] = n > 0 ? std::min<size_t>(static_cast<size_t>(n), sizeof(g_lines[sig]) - 1) : 0;
    struct sigaction sa {};
    sa.sa_handler = Report;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, nullptr);
    reported.push_back(sig);
  }
  UnblockSignals(reported);
}

std::vector<int> InstallStopSignals(void (*handler)(int)) {
  std::vector<int> installed;
  for (int sig : StopSignals()) {
    struct sigaction old {};
    if (sigaction(sig, nullptr, &old) != 0 || (!(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_IGN)) continue;
    struct sigaction sa {};
    sa.sa_handler = handler;
    sa.sa_flags = SA_RESTART;  // as std::signal: poll(2) still returns EINTR
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, nullptr);
    installed.push_back(sig);
  }
  UnblockSignals(installed);
  return installed;
}

}  // namespace tether
