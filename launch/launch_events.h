// What wakes tether-launch's event loop: its signals (SIGCHLD, SIGINT,
// SIGTERM and SIGHUP) read through a signalfd, and files appearing in its
// folder (port and progress files) through inotify, in one poll.
//
// Ownership: owns the two descriptors (closed when destroyed). The signal
// mask is left blocked when destroyed: unblocking then could let a stop
// signal that arrived during teardown kill the launcher instead of letting
// it exit with 128+N. Thread-safety: single-threaded (the launcher's loop).
#pragma once

#include <signal.h>

#include <chrono>
#include <string>

#include "core/status.h"

namespace tether {

class LaunchEvents {
 public:
  LaunchEvents() = default;
  ~LaunchEvents();
  LaunchEvents(const LaunchEvents&) = delete;
  LaunchEvents& operator=(const LaunchEvents&) = delete;

  /// Takes SIGCHLD, SIGINT, SIGTERM and, unless it is ignored (nohup),
  /// SIGHUP over: blocked, and read through a signalfd. A SIGCHLD inherited
  /// as SIG_IGN is reset first, or the kernel would reap children behind
  /// the launcher's back. Errors: Internal naming the call that failed.
  Status Open();

  /// Watches `dir` for files renamed into it or closed after writing. Where
  /// inotify is unavailable, logs a WARNING saying the caller checks every
  /// `poll` instead, and watching() stays false.
  void Watch(const std::string& dir, std::chrono::milliseconds poll);
  bool watching() const { return inotify_fd_ >= 0; }

  /// Waits up to `timeout_ms` (≥ 0) for a signal or a change in the watched
  /// folder, then reads every pending signal. The first SIGINT, SIGTERM or
  /// SIGHUP becomes stop_signal(); a later one, a second or more after it,
  /// sets escalate() (a repeat within a second is the same request:
  /// `timeout`, a shell and a terminal each pass one stop on). Logs each
  /// stop signal with its sender's pid.
  void Wait(long timeout_ms);

  /// The first stop signal received, 0 if none.
  int stop_signal() const { return stop_signal_; }
  /// A stop signal came again since reset_escalate().
  bool escalate() const { return escalate_; }
  void reset_escalate() { escalate_ = false; }

 private:
  int signal_fd_ = -1;
  int inotify_fd_ = -1;
  sigset_t handled_{};
  int stop_signal_ = 0;
  std::chrono::steady_clock::time_point stop_at_;
  bool escalate_ = false;
};

}  // namespace tether
