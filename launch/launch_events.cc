#include "launch/launch_events.h"

#include <poll.h>
#include <sys/inotify.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <glog/logging.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "cli/signals.h"
#include "launch/process_table.h"

namespace tether {

LaunchEvents::~LaunchEvents() {
  if (signal_fd_ >= 0) close(signal_fd_);
  if (inotify_fd_ >= 0) close(inotify_fd_);
}

Status LaunchEvents::Open() {
  signal(SIGCHLD, SIG_DFL);
  sigemptyset(&handled_);
  sigaddset(&handled_, SIGCHLD);
  // Every stop signal (cli/signals.h: SIGTERM, SIGINT, SIGHUP, SIGUSR1/2,
  // SIGXCPU, SIGPWR) stops the job; respect nohup: one inherited as ignored
  // stays ignored.
  for (int sig : StopSignals()) {
    struct sigaction old {};
    if (sigaction(sig, nullptr, &old) == 0 && old.sa_handler != SIG_IGN) sigaddset(&handled_, sig);
  }
  if (sigprocmask(SIG_BLOCK, &handled_, nullptr) != 0) return Status::Internal(ErrnoText("sigprocmask"));
  signal_fd_ = signalfd(-1, &handled_, SFD_NONBLOCK | SFD_CLOEXEC);
  if (signal_fd_ < 0) return Status::Internal(ErrnoText("signalfd"));
  return Status::OK();
}

void LaunchEvents::Watch(const std::string& dir, std::chrono::milliseconds poll) {
  inotify_fd_ = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (inotify_fd_ >= 0 && inotify_add_watch(inotify_fd_, dir.c_str(), IN_MOVED_TO | IN_CLOSE_WRITE) < 0) {
    const int saved = errno;
    close(inotify_fd_);
    inotify_fd_ = -1;
    errno = saved;
  }
  if (inotify_fd_ < 0)
    LOG(WARNING) << "[launch] inotify unavailable (" << std::strerror(errno) << "); checking port files every "
                 << poll.count() << " ms instead";
}

void LaunchEvents::Wait(long timeout_ms) {
  pollfd fds[2] = {{signal_fd_, POLLIN, 0}, {inotify_fd_, POLLIN, 0}};
  const int nfds = inotify_fd_ >= 0 ? 2 : 1;
  if (poll(fds, nfds, static_cast<int>(std::min(timeout_ms, 3600000L))) < 0 && errno != EINTR)
    PLOG(ERROR) << "[launch] poll";

  signalfd_siginfo info;
  while (read(signal_fd_, &info, sizeof(info)) == static_cast<ssize_t>(sizeof(info))) {
    const int sig = static_cast<int>(info.ssi_signo);
    if (sig == SIGCHLD) continue;  // the caller reaps, whatever the count
    if (stop_signal_ != 0 && std::chrono::steady_clock::now() - stop_at_ >= std::chrono::seconds(1)) escalate_ = true;
    if (stop_signal_ == 0) {
      stop_signal_ = sig;
      stop_at_ = std::chrono::steady_clock::now();
    }
    LOG(WARNING) << "[launch] received " << strsignal(sig) << " (from pid " << info.ssi_pid << ")";
  }
  if (nfds == 2) {
    // Only the wake-up matters; the files themselves are re-read.
    char buf[4096];
    while (read(inotify_fd_, buf, sizeof(buf)) > 0) {
    }
  }
}

}  // namespace tether
