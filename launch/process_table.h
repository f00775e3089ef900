// The launcher's child processes (tether-launch): started with fork and
// execv from the launcher's own directory into one process group, reaped
// with waitpid, signalled as a group and one by one.
//
// Every child gets PR_SET_PDEATHSIG(SIGKILL), so no child outlives the
// launcher, even a SIGKILLed one; stdin from /dev/null; and an empty signal
// mask with every signal at its default action (launch/exec_signals.h),
// whatever the launcher blocked or ignored, whichever thread starts it. The group id is the
// first child's pid; a zombie keeps it reserved until reaped, so a signal to
// the group never reaches some other process group.
//
// Ownership: the table owns its Child records (pointers stay valid until
// the next Start); it borrows the /dev/null descriptor given to it.
// Thread-safety: single-threaded, like the launcher's event loop.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "core/status.h"

namespace tether {

/// One launched process.
struct Child {
  std::string role;  // "server", "worker" or "replacement" (a server process joining a shard as its replica)
  int index = 0;     // shard, rank, or a replacement's process number (launch/server_deaths.h)
  pid_t pid = -1;
  bool running = false;
  bool reported = false;  // its exit has been looked at by the launcher
  int wait_status = 0;
  std::string endpoint;  // servers: where it listened (from its port file)
  bool leaving = false;  // workers: stopped by --elastic_schedule (SIGTERM; exit 143 is its success)

  /// "worker 2 (pid 1234)".
  std::string Name() const;
  /// Exited with code 0.
  bool Succeeded() const;
  /// "exited with code 1", "was killed by signal 9 (Killed)", ...
  std::string HowItEnded() const;
  /// A running child's scheduler state from /proc/PID/stat: "stopped
  /// (SIGSTOP)" for T, "traced" for t, "" for any other state or when it
  /// cannot be read (not Linux, already reaped).
  std::string RunState() const;
};

/// "H:MM:SS" of a duration (whole seconds, rounded down).
std::string FormatDuration(std::chrono::steady_clock::duration d);

/// `what`: strerror(errno).
std::string ErrnoText(const std::string& what);

class ProcessTable {
 public:
  /// `bin_dir`: where the binaries are; `devnull_fd`: stdin of every child
  /// (not owned). Whether SIGHUP is ignored (nohup) is read here and passed
  /// on to every child.
  ProcessTable(std::string bin_dir, int devnull_fd);

  /// Starts BIN_DIR/binary with `args` as child `role` `index` and logs the
  /// command line. Errors: Internal when fork fails.
  Status Start(const std::string& role, int index, const std::string& binary, std::vector<std::string> args);

  /// Reaps every child that exited (never blocks).
  void ReapExited();
  /// The first exited child not yet looked at (marking it looked at), or
  /// null. Children killed by a signal come first: when several ended
  /// between two looks (a SIGKILLed server, and a shard that then failed
  /// because its workers aborted), the killed one is the cause.
  Child* NextExited();
  /// After a child failed with an exit code while others still run: waits
  /// up to `within`, reaping, for a child that a signal ends, and returns it
  /// (marked looked at) or null. A SIGKILLed server closes its sockets
  /// before the kernel lets it be reaped, so the shard it takes down with it
  /// (told by a worker that saw the connection drop) can exit first; the
  /// killed one is still the cause to name.
  Child* AwaitSignalled(std::chrono::milliseconds within);

  /// Children of `role` still running (not reaped).
  int Live(const std::string& role) const;
  /// Children of any role still running.
  int Live() const;

  /// `sig` to the group and to every child not reaped, while one is.
  void SignalAll(int sig);
  /// SIGTERM to every running child of `role`.
  void Terminate(const std::string& role);

  std::vector<Child>& children() { return children_; }
  const std::vector<Child>& children() const { return children_; }
  /// The children's process group (0 before the first child).
  pid_t group() const { return pgid_; }

 private:
  StatusOr<pid_t> Spawn(const std::string& binary, std::vector<std::string> args);

  std::string bin_dir_;
  int devnull_fd_;
  bool keep_sighup_ignored_;
  std::vector<Child> children_;
  pid_t pgid_ = 0;
};

}  // namespace tether
