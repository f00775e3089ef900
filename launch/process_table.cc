#include "launch/process_table.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glog/logging.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <thread>

#include "launch/exec_signals.h"

namespace tether {

std::string Child::Name() const { return role + " " + std::to_string(index) + " (pid " + std::to_string(pid) + ")"; }

bool Child::Succeeded() const { return WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0; }

std::string Child::HowItEnded() const {
  if (WIFEXITED(wait_status)) return "exited with code " + std::to_string(WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status)) {
    const int sig = WTERMSIG(wait_status);
    return "was killed by signal " + std::to_string(sig) + " (" + strsignal(sig) + ")";
  }
  return "ended with wait status " + std::to_string(wait_status);
}

std::string Child::RunState() const {
  std::FILE* f = std::fopen(("/proc/" + std::to_string(pid) + "/stat").c_str(), "r");
  if (f == nullptr) return "";
  char line[512] = {0};
  const size_t n = std::fread(line, 1, sizeof(line) - 1, f);
  std::fclose(f);
  // "PID (COMM) S ...": the state follows the last ')' (COMM may hold one).
  const char* close = std::strrchr(line, ')');
  if (n == 0 || close == nullptr || close[1] != ' ') return "";
  if (close[2] == 'T') return "stopped (SIGSTOP)";
  if (close[2] == 't') return "traced";
  return "";
}

std::string FormatDuration(std::chrono::steady_clock::duration d) {
  const long s = static_cast<long>(std::chrono::duration_cast<std::chrono::seconds>(d).count());
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%ld:%02ld:%02ld", s / 3600, (s / 60) % 60, s % 60);
  return buf;
}

std::string ErrnoText(const std::string& what) { return what + ": " + std::strerror(errno); }

ProcessTable::ProcessTable(std::string bin_dir, int devnull_fd)
    : bin_dir_(std::move(bin_dir)), devnull_fd_(devnull_fd), keep_sighup_ignored_(SighupIgnored()) {}

StatusOr<pid_t> ProcessTable::Spawn(const std::string& binary, std::vector<std::string> args) {
  const std::string path = bin_dir_ + "/" + binary;
  args.insert(args.begin(), path);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  const pid_t parent = getpid();
  const pid_t group = pgid_;  // 0: this child founds the group
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) return Status::Internal(ErrnoText("fork " + binary));
  if (pid == 0) {
    // Child: only async-signal-safe calls from here to execv.
    auto die = [](const char* msg) {
      ssize_t unused = write(STDERR_FILENO, msg, std::strlen(msg));
      (void)unused;
      _exit(127);
    };
    if (setpgid(0, group) != 0) die("tether-launch: child: setpgid failed\n");
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) die("tether-launch: child: prctl(PR_SET_PDEATHSIG) failed\n");
    // The launcher may have died before prctl took effect; then nobody
    // would kill us, so do not start at all.
    if (getppid() != parent) _exit(127);
    if (dup2(devnull_fd_, STDIN_FILENO) < 0) die("tether-launch: child: dup2 /dev/null failed\n");
    // Not the mask of the thread that forked: a restarted job's launcher has
    // its stop signals blocked already (launch/exec_signals.h).
    ResetSignalsBeforeExec(keep_sighup_ignored_);
    execv(argv[0], argv.data());
    die("tether-launch: child: execv failed\n");
  }
  // Also set the group from the parent, so that a signal to the group right
  // after fork cannot miss a child that has not run setpgid yet. EACCES
  // (child already exec'd) and ESRCH (already exited) are fine: the child's
  // own setpgid ran first, or it _exit'ed.
  if (setpgid(pid, group == 0 ? pid : group) != 0 && errno != EACCES && errno != ESRCH)
    PLOG(WARNING) << "[launch] setpgid for pid " << pid;
  if (pgid_ == 0) pgid_ = pid;
  return pid;
}

Status ProcessTable::Start(const std::string& role, int index, const std::string& binary,
                           std::vector<std::string> args) {
  std::string cmdline = binary;
  for (const auto& a : args) cmdline += " " + a;
  TETHER_ASSIGN_OR_RETURN(pid_t pid, Spawn(binary, std::move(args)));
  Child c;
  c.role = role;
  c.index = index;
  c.pid = pid;
  c.running = true;
  children_.push_back(c);
  LOG(INFO) << "[launch] started " << c.Name() << " in process group " << pgid_ << ": " << cmdline;
  return Status::OK();
}

void ProcessTable::ReapExited() {
  while (true) {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid <= 0) return;  // 0: none exited; -1/ECHILD: no children left
    for (auto& c : children_) {
      if (c.pid == pid && c.running) {
        c.running = false;
        c.wait_status = status;
      }
    }
  }
}

Child* ProcessTable::NextExited() {
  for (const bool signalled : {true, false}) {
    for (auto& c : children_) {
      if (!c.running && !c.reported && WIFSIGNALED(c.wait_status) == signalled) {
        c.reported = true;
        return &c;
      }
    }
  }
  return nullptr;
}

Child* ProcessTable::AwaitSignalled(std::chrono::milliseconds within) {
  const auto until = std::chrono::steady_clock::now() + within;
  while (true) {
    ReapExited();
    for (auto& c : children_) {
      if (!c.running && !c.reported && WIFSIGNALED(c.wait_status)) {
        c.reported = true;
        return &c;
      }
    }
    if (Live() == 0 || std::chrono::steady_clock::now() >= until) return nullptr;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // a bounded poll, not a wait for an event we get
  }
}

int ProcessTable::Live(const std::string& role) const {
  return static_cast<int>(
      std::count_if(children_.begin(), children_.end(), [&](const Child& c) { return c.running && c.role == role; }));
}

int ProcessTable::Live() const {
  return static_cast<int>(std::count_if(children_.begin(), children_.end(), [](const Child& c) { return c.running; }));
}

void ProcessTable::SignalAll(int sig) {
  // The group reaches children that have not been reaped yet (a zombie keeps
  // the group id reserved, so it cannot name some other process group) and
  // anything they started. Only signal while one of ours is unreaped.
  if (Live() == 0) return;
  if (pgid_ > 0 && killpg(pgid_, sig) != 0 && errno != ESRCH) PLOG(WARNING) << "[launch] killpg " << pgid_;
  // Direct kill too, in case a child left the group.
  for (const auto& c : children_)
    if (c.running) kill(c.pid, sig);
}

void ProcessTable::Terminate(const std::string& role) {
  for (const auto& c : children_)
    if (c.running && c.role == role) kill(c.pid, SIGTERM);
}

}  // namespace tether
