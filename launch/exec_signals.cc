#include "launch/exec_signals.h"

#include <signal.h>

namespace tether {

void ResetSignalsBeforeExec(bool keep_sighup_ignored) {
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  // NSIG covers the real-time signals; sigaction refuses SIGKILL, SIGSTOP
  // and the numbers glibc keeps for itself, which is harmless.
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig == SIGKILL || sig == SIGSTOP) continue;
    if (sig == SIGHUP && keep_sighup_ignored) continue;
    sigaction(sig, &dfl, nullptr);
  }
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
}

bool SighupIgnored() {
  struct sigaction old {};
  return sigaction(SIGHUP, nullptr, &old) == 0 && !(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_IGN;
}

}  // namespace tether
