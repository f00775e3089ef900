// tether-launch: runs a whole Tether job on this machine. Starts
// cluster.num_servers `tether-server` shards on 127.0.0.1 port 0, reads their
// bound endpoints back from port files, then starts cluster.num_workers
// `tether-worker` ranks pointed at them, monitors everything, and prints the
// metrics of rank 0 and the wall time on success.
//
// --transport picks how the processes talk:
//   tcp     (default) TCP on 127.0.0.1, as between hosts;
//   ipc     Unix-domain sockets in the launcher's private directory: one
//           process per shard and worker as with tcp, less kernel work per byte;
//   inproc  one `tether-worker --in_process` child that runs every shard and
//           every worker as threads, passing messages by pointer
//           (local/local_job.h). The fastest on one host; a single process,
//           so a crash takes the whole job with it.
//
// The child binaries are taken from the launcher's own directory
// (/proc/self/exe). Every child runs in one process group owned by the
// launcher and gets PR_SET_PDEATHSIG(SIGKILL), so no child outlives the
// launcher, even a SIGKILLed one. Every wait is bounded.
//
// Engine mode: run as every task of `srun -n N` or `mpirun -np N` (detected
// from SLURM_STEP_ID / OMPI_COMM_WORLD_RANK; --engine), this binary starts
// nothing: each task execs its own role, server shard i for task i < S, else
// worker i - S, and the processes find each other through the rendezvous
// (core/net/rendezvous.h; RunEngineTask below, docs/OPERATIONS.md).
//
// Exit codes: 0 success; 1 a child failed, the servers did not exit after the
// workers, the metrics file is missing, or a start-up error; 2 bad config or
// flags; 124 --timeout_s expired; 128+N on signal N (130 SIGINT, 143 SIGTERM,
// 129 SIGHUP).
//
// Single-threaded: the launcher is one event loop over a signalfd (SIGCHLD,
// SIGINT, SIGTERM, SIGHUP) and, while servers start, an inotify watch on the
// port-file directory.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gflags/gflags.h>
#include <glog/logging.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "core/config.h"
#include "core/net/curve.h"
#include "core/net/rendezvous.h"
#include "core/status.h"
#include "checkpoint/checkpoint.h"
#include "cli/config_flags.h"
#include "tools/elastic_schedule.h"
#include "cli/metrics_flags.h"
#include "worker/models/model_registry.h"
#include "worker/trainer.h"

DEFINE_int32(servers, 0, "number of server shards (overrides cluster.num_servers); 0: from the config");
DEFINE_int32(workers, 0, "number of workers (overrides cluster.num_workers); 0: from the config");
DEFINE_string(metrics_out, "",
              "passed to worker 0 (with --elastic_schedule: to every worker; the evaluator writes it), which "
              "writes the final metrics JSON there; printed on success");
DEFINE_string(model_out, "",
              "with --transport=inproc: the trained model is written here at the end (FILE.npz: NumPy npz, else "
              "safetensors; docs/OPERATIONS.md, Export)");
DEFINE_string(transport, "tcp",
              "tcp (127.0.0.1, as between hosts), ipc (Unix-domain sockets, one process per shard and worker) "
              "or inproc (one process, shards and workers as threads; see local/local_job.h)");
DEFINE_int32(timeout_s, 1800, "bound on the whole job in seconds; on expiry every child is killed (exit 124)");
DEFINE_string(resume_from, "",
              "resume the job from this checkpoint, or the latest complete one under this directory "
              "(passed to every server and worker)");
DEFINE_string(engine, "auto",
              "engine mode, where this process is one task of a job started by srun or mpirun and runs one "
              "role (see below): auto (when SLURM_STEP_ID or OMPI_COMM_WORLD_RANK is set), on (required), off");
DEFINE_string(listen, "tcp://*:0",
              "engine mode: the endpoint a server task binds (default every interface, advertised as "
              "--advertise_host or the node's hostname)");
DEFINE_string(advertise_host, "", "engine mode: the host workers connect to for a wildcard --listen");
DEFINE_bool(rendezvous_serve, false,
            "serve the rendezvous store at --rendezvous=tcp://HOST:PORT: in engine mode task 0 (server 0) serves "
            "it; otherwise this launcher does, for the whole job");
DEFINE_bool(resume_if_present, false,
            "resume from the latest complete checkpoint under checkpoint.dir when there is one, else start "
            "afresh (a requeued job); excludes --resume_from");
DEFINE_string(metrics_sd_dir, "",
              "with --metrics_port: every server and worker writes its Prometheus file_sd target file "
              "(JOBID-server-I.json, JOBID-worker-R.json) here, for a file_sd_configs entry of DIR/*.json");
DEFINE_string(elastic_schedule, "",
              "add and stop workers by the job's epoch, e.g. \"2:+2,4:-1\": at the start of epoch 2 start two "
              "workers with new ranks, at epoch 4 stop the most recently started one gracefully (SIGTERM: it says "
              "BYE). Needs cluster.max_workers above the ranks started and train.data_on_demand for the joiners "
              "(docs/OPERATIONS.md, Joining and leaving); not with --transport=inproc or engine mode");
DEFINE_int32(max_restarts, 0,
             "when the job fails (a process died or failed), restart it from the latest complete checkpoint "
             "under checkpoint.dir, up to N times, each as the next cluster.generation");

namespace tether {
namespace {

using Clock = std::chrono::steady_clock;

// How long each bounded wait of the launcher lasts. Not flags: they bound
// local process start-up and shutdown, not training, which --timeout_s covers.
constexpr std::chrono::seconds kPortFileWait{30};     // server start → port file written
constexpr std::chrono::seconds kServerExitWait{60};   // last worker done → servers gone
constexpr std::chrono::seconds kWorkerStopGrace{3};   // workers: SIGTERM → BYE → exit (≈ 1 s)
constexpr std::chrono::seconds kServerStopGrace{2};   // then servers: SIGTERM → exit (≈ 0.1 s)
constexpr std::chrono::seconds kKillWait{5};          // SIGKILL → reaped
constexpr std::chrono::seconds kStatusEvery{10};      // progress line period
constexpr std::chrono::milliseconds kPortFilePoll{200};  // only where inotify is unavailable

struct LaunchOptions {
  std::string config_path;
  // How long stopped workers may take to leave before the servers are
  // stopped: longer with checkpoints on, as a stop first takes one.
  std::chrono::seconds worker_stop_grace{0};
  std::string bin_dir;                  // holds tether-server and tether-worker
  int num_servers = 0;
  int num_workers = 0;
  std::string metrics_out;              // "" = none
  std::string model_out;                // "" = none; --transport=inproc only
  std::chrono::seconds timeout{1800};
  std::string transport = "tcp";        // tcp | ipc | inproc (--transport)
  std::vector<std::string> forwarded;   // "--flag=value" for every child
  // /metrics (--metrics_port): -1 none; 0 a free port per process; else
  // server i at base + i, worker r at base + num_servers + r.
  int metrics_port = -1;
  std::string metrics_sd_dir;           // "" = no file_sd target files
  std::string metrics_sd_prefix;        // file name prefix there (the job id)
  std::chrono::seconds metrics_linger{0};  // children serve this long after training
  // --elastic_schedule: steps by epoch (tools/elastic_schedule.h); empty:
  // the job keeps its cluster.num_workers workers.
  std::vector<ElasticStep> elastic;
  // train.data_on_demand: a worker killed by a signal does not fail the job
  // (shard 0 deals its chunks again; the job ends when the data is used),
  // as when the processes are started by hand.
  bool data_on_demand = false;
};

// A worker whose loss diverged under train.fail_on_divergence exits with
// this (kExitDiverged, worker/trainer.h); the job runs to its end, so the
// metrics are written, and the launcher then exits with it too.
constexpr int kExitDiverged = 3;

struct Child {
  std::string role;  // "server" or "worker"
  int index = 0;     // shard or rank
  pid_t pid = -1;
  bool running = false;
  bool reported = false;  // its exit has been looked at by the launcher
  int wait_status = 0;
  std::string endpoint;  // servers: where it listened (from its port file)
  bool leaving = false;  // workers: stopped by --elastic_schedule (SIGTERM; exit 143 is its success)

  std::string Name() const { return role + " " + std::to_string(index) + " (pid " + std::to_string(pid) + ")"; }
  bool Succeeded() const { return WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0; }
  std::string HowItEnded() const {
    if (WIFEXITED(wait_status)) return "exited with code " + std::to_string(WEXITSTATUS(wait_status));
    if (WIFSIGNALED(wait_status)) {
      const int sig = WTERMSIG(wait_status);
      return "was killed by signal " + std::to_string(sig) + " (" + strsignal(sig) + ")";
    }
    return "ended with wait status " + std::to_string(wait_status);
  }
};

std::string FormatDuration(Clock::duration d) {
  const long s = static_cast<long>(std::chrono::duration_cast<std::chrono::seconds>(d).count());
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%ld:%02ld:%02ld", s / 3600, (s / 60) % 60, s % 60);
  return buf;
}

std::string ErrnoText(const std::string& what) { return what + ": " + std::strerror(errno); }

// Field 22 of /proc/PID/stat (start time in clock ticks since boot), which
// tells a process from a later one given the same pid; "" when unknown.
std::string ProcessStartTime(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t paren = stat.rfind(')');  // the command name may hold spaces
  if (paren == std::string::npos) return "";
  std::istringstream fields(stat.substr(paren + 1));
  std::string f;
  for (int i = 3; i <= 22 && fields >> f; ++i) {
    if (i == 22) return f;
  }
  return "";
}

// Removes the temp folders ($TMPDIR/tether-launch.PID.XXXXXX) of launchers
// that are gone, killed before they could clean up (C25): a folder of this
// user whose owner file names a pid that no longer runs, or runs as another
// process (another start time). A live launcher's folder, another user's,
// and one without an owner file (a launcher still starting, or an older
// build) are left alone.
void RemoveDeadLaunchersTempDirs(const std::string& parent) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(parent, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("tether-launch.", 0) != 0) continue;
    struct stat st {};
    if (lstat(entry.path().c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != getuid()) continue;
    std::ifstream owner(entry.path() / "owner");
    long pid = 0;
    std::string started;
    if (!(owner >> pid >> started) || pid <= 0) continue;
    const bool alive = kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
    if (alive && ProcessStartTime(static_cast<pid_t>(pid)) == started) continue;
    std::error_code rm;
    std::filesystem::remove_all(entry.path(), rm);
    if (rm) {
      LOG(WARNING) << "[launch] could not remove " << entry.path().string() << ", left by launcher pid " << pid
                   << " (gone): " << rm.message();
    } else {
      LOG(INFO) << "[launch] removed " << entry.path().string() << ", left by launcher pid " << pid
                << ", which is gone";
    }
  }
}

// The endpoint in a port file, or nullopt while the file is not there yet.
// The server renames a complete file into place, so a file that exists is
// whole; an empty or malformed one is an error, not "not yet".
StatusOr<std::optional<std::string>> ReadPortFile(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return std::optional<std::string>();
    return Status::IOError(ErrnoText(path));
  }
  std::ifstream in(path);
  if (!in) return Status::IOError(path + ": cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  const size_t colon = text.rfind(':');
  const bool tcp_ok = text.rfind("tcp://", 0) == 0 && colon != std::string::npos && colon + 1 < text.size() &&
                      text.find_first_not_of("0123456789", colon + 1) == std::string::npos &&
                      text.substr(colon + 1) != "0";
  const bool ipc_ok = text.rfind("ipc://", 0) == 0 && text.size() > 6;
  if (!tcp_ok && !ipc_ok)
    return Status::DataLoss(path + ": expected a bound endpoint tcp://HOST:PORT or ipc://PATH, got '" + text + "'");
  return std::optional<std::string>(text);
}

class Launcher {
 public:
  explicit Launcher(LaunchOptions options) : options_(std::move(options)) {}
  ~Launcher();

  /// Runs the job; returns the process exit code (see the file comment).
  /// Never returns with a child still running that it could reap.
  int Run();

 private:
  int RunJob();
  Status Setup();
  StatusOr<pid_t> Spawn(const std::string& binary, std::vector<std::string> args);
  Status StartChild(const std::string& role, int index, const std::string& binary, std::vector<std::string> args);

  // Waits until a signal arrives, the port-file directory changes, or
  // `until` (whichever is first), then reaps every child that exited and
  // prints the progress line when due. Sets stop_signal_ on SIGINT/SIGTERM/SIGHUP.
  void Pump(Clock::time_point until);
  void ReapExited();
  void PrintStatusLine();
  int Live(const std::string& role) const;
  int Live() const { return Live("server") + Live("worker"); }
  // The first exited child not yet looked at, or nullptr.
  Child* NextExited();

  // SIGTERM to the workers, up to kWorkerStopGrace (each says BYE, so the
  // servers stop waiting for it), then to the servers, up to
  // kServerStopGrace, then SIGKILL to the group and up to kKillWait. A second
  // stop signal meanwhile skips straight to SIGKILL.
  void Teardown(const std::string& why);
  void SignalAll(int sig);

  // Phases; each returns the exit code to end with, or nullopt to go on.
  std::optional<int> WaitForPortFiles(std::vector<std::string>* endpoints);
  // --metrics_port (and --metrics_sd_file) of one child.
  void AddMetricsFlags(const std::string& role, int index, std::vector<std::string>* args) const;
  std::optional<int> Monitor();
  // --elastic_schedule: the job's epoch (the largest any worker reported in
  // its progress file), and the steps due by it applied. Returns false (and
  // tears down) when a joiner could not be started.
  int JobEpoch() const;
  bool ApplyElasticSteps();
  std::vector<std::string> WorkerArgs(int rank) const;
  std::optional<int> Interrupted(const std::string& phase);
  int PrintSummary();

  LaunchOptions options_;
  std::vector<Child> children_;
  pid_t pgid_ = 0;            // the children's process group (= first child's pid)
  std::string tmp_dir_;
  int signal_fd_ = -1;
  int inotify_fd_ = -1;       // -1: port files are re-checked every kPortFilePoll
  int devnull_fd_ = -1;
  sigset_t handled_{};        // blocked and read through signal_fd_
  sigset_t original_mask_{};  // restored in children before exec
  int stop_signal_ = 0;       // first SIGINT/SIGTERM/SIGHUP received
  Clock::time_point stop_at_;  // when it came
  bool escalate_ = false;     // a stop signal arrived during teardown
  bool torn_down_ = false;    // Teardown ran; what it could not kill, a second try will not either
  std::vector<std::string> diverged_;  // workers that exited kExitDiverged (C24)
  std::string phase_ = "starting";
  std::string server_addresses_;  // the shards' endpoints, for workers started later
  size_t next_step_ = 0;          // the first --elastic_schedule step not applied
  bool worker_finished_ = false;  // a worker exited 0: the job's data is used
  int next_rank_ = 0;             // the next unused worker rank
  Clock::time_point start_ = Clock::now();
  Clock::time_point deadline_;
  Clock::time_point next_status_;
};

Launcher::~Launcher() {
  // Run() tears down on every path; this is the last line of defence for the
  // process group if a future early return forgets to.
  if (Live() > 0 && !torn_down_) Teardown("launcher exiting");
  if (signal_fd_ >= 0) close(signal_fd_);
  if (inotify_fd_ >= 0) close(inotify_fd_);
  if (devnull_fd_ >= 0) close(devnull_fd_);
  if (!tmp_dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(tmp_dir_, ec);
    if (ec) LOG(WARNING) << "[launch] could not remove " << tmp_dir_ << ": " << ec.message();
  }
  // The signal mask stays as it is: unblocking now could let a stop signal
  // that arrived during teardown kill us instead of exiting with 128+N.
}

Status Launcher::Setup() {
  start_ = Clock::now();
  deadline_ = start_ + options_.timeout;
  next_status_ = start_ + kStatusEvery;

  // A SIGCHLD inherited as SIG_IGN would make the kernel reap children
  // behind our back, and waitpid could no longer tell us how they ended.
  signal(SIGCHLD, SIG_DFL);
  sigemptyset(&handled_);
  sigaddset(&handled_, SIGCHLD);
  sigaddset(&handled_, SIGINT);
  sigaddset(&handled_, SIGTERM);
  // Respect nohup: only take SIGHUP over when it is not ignored.
  struct sigaction hup {};
  if (sigaction(SIGHUP, nullptr, &hup) == 0 && hup.sa_handler != SIG_IGN) sigaddset(&handled_, SIGHUP);
  if (sigprocmask(SIG_BLOCK, &handled_, &original_mask_) != 0) return Status::Internal(ErrnoText("sigprocmask"));
  signal_fd_ = signalfd(-1, &handled_, SFD_NONBLOCK | SFD_CLOEXEC);
  if (signal_fd_ < 0) return Status::Internal(ErrnoText("signalfd"));

  devnull_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (devnull_fd_ < 0) return Status::IOError(ErrnoText("/dev/null"));

  // Port files go under $TMPDIR (as mktemp does), so that a test run with
  // its own TMPDIR leaves nothing in /tmp. The folder's name carries this
  // launcher's pid and an "owner" file its pid and start time, so that the
  // next launcher can remove what a killed one (kill -9) left (C25).
  const char* tmpdir = std::getenv("TMPDIR");
  const std::string parent = tmpdir != nullptr && *tmpdir != '\0' ? tmpdir : "/tmp";
  RemoveDeadLaunchersTempDirs(parent);
  std::string tmpl = parent + "/tether-launch." + std::to_string(getpid()) + ".XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) return Status::IOError(ErrnoText("mkdtemp " + tmpl));
  tmp_dir_ = tmpl;
  {
    std::ofstream owner(tmp_dir_ + "/owner");
    owner << getpid() << " " << ProcessStartTime(getpid()) << "\n";
    if (!owner) return Status::IOError(ErrnoText("cannot write " + tmp_dir_ + "/owner"));
  }

  inotify_fd_ = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (inotify_fd_ >= 0 && inotify_add_watch(inotify_fd_, tmp_dir_.c_str(), IN_MOVED_TO | IN_CLOSE_WRITE) < 0) {
    const int saved = errno;
    close(inotify_fd_);
    inotify_fd_ = -1;
    errno = saved;
  }
  if (inotify_fd_ < 0)
    LOG(WARNING) << "[launch] inotify unavailable (" << std::strerror(errno) << "); checking port files every "
                 << kPortFilePoll.count() << " ms instead";

  for (const char* binary : {"tether-server", "tether-worker"}) {
    const std::string path = options_.bin_dir + "/" + binary;
    if (access(path.c_str(), X_OK) != 0) return Status::NotFound(ErrnoText(path + " (expected next to tether-launch)"));
  }
  if (!options_.metrics_out.empty()) {
    // A file left by an earlier run must not pass for this run's metrics.
    if (unlink(options_.metrics_out.c_str()) == 0)
      LOG(INFO) << "[launch] removed old metrics file " << options_.metrics_out;
    else if (errno != ENOENT)
      return Status::IOError(ErrnoText("cannot remove old metrics file " + options_.metrics_out));
  }
  return Status::OK();
}

StatusOr<pid_t> Launcher::Spawn(const std::string& binary, std::vector<std::string> args) {
  const std::string path = options_.bin_dir + "/" + binary;
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
    sigprocmask(SIG_SETMASK, &original_mask_, nullptr);
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

Status Launcher::StartChild(const std::string& role, int index, const std::string& binary,
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

void Launcher::ReapExited() {
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

Child* Launcher::NextExited() {
  // Children killed by a signal first: when several ended between two
  // looks (a SIGKILLed server, and a shard that then failed because its
  // workers aborted), the killed one is the cause and is reported first.
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

int Launcher::Live(const std::string& role) const {
  return static_cast<int>(
      std::count_if(children_.begin(), children_.end(), [&](const Child& c) { return c.running && c.role == role; }));
}

void Launcher::PrintStatusLine() {
  // Straight to stderr rather than through glog: a progress line, meant to be
  // seen whatever the log settings, between the children's own log lines.
  if (options_.transport == "inproc") {
    std::fprintf(stderr, "[launch] %s elapsed, %s: one process (%d worker(s), %d server(s) as threads) %s\n",
                 FormatDuration(Clock::now() - start_).c_str(), phase_.c_str(), options_.num_workers,
                 options_.num_servers, Live() > 0 ? "live" : "exited");
  } else {
    std::fprintf(stderr, "[launch] %s elapsed, %s: workers %d/%d live, servers %d/%d live\n",
                 FormatDuration(Clock::now() - start_).c_str(), phase_.c_str(), Live("worker"), options_.num_workers,
                 Live("server"), options_.num_servers);
  }
  std::fflush(stderr);
}

void Launcher::Pump(Clock::time_point until) {
  const Clock::time_point now = Clock::now();
  Clock::time_point wake = std::min(until, next_status_);
  if (inotify_fd_ < 0 && (phase_ == "servers starting" || next_step_ < options_.elastic.size()))
    wake = std::min(wake, now + kPortFilePoll);  // port and progress files
  const long timeout_ms =
      wake <= now ? 0 : static_cast<long>(std::chrono::ceil<std::chrono::milliseconds>(wake - now).count());

  pollfd fds[2] = {{signal_fd_, POLLIN, 0}, {inotify_fd_, POLLIN, 0}};
  const int nfds = inotify_fd_ >= 0 ? 2 : 1;
  if (poll(fds, nfds, static_cast<int>(std::min(timeout_ms, 3600000L))) < 0 && errno != EINTR)
    PLOG(ERROR) << "[launch] poll";

  signalfd_siginfo info;
  while (read(signal_fd_, &info, sizeof(info)) == static_cast<ssize_t>(sizeof(info))) {
    const int sig = static_cast<int>(info.ssi_signo);
    if (sig == SIGCHLD) continue;  // reaped below, whatever the count
    // A repeat within a second is the same request: `timeout`, a shell and
    // a terminal each pass one stop on, to the launcher and to its group.
    if (stop_signal_ != 0 && Clock::now() - stop_at_ >= std::chrono::seconds(1)) escalate_ = true;
    if (stop_signal_ == 0) {
      stop_signal_ = sig;
      stop_at_ = Clock::now();
    }
    LOG(WARNING) << "[launch] received " << strsignal(sig) << " (from pid " << info.ssi_pid << ")";
  }
  if (nfds == 2) {
    // Only the wake-up matters; the port files themselves are re-read.
    char buf[4096];
    while (read(inotify_fd_, buf, sizeof(buf)) > 0) {
    }
  }
  ReapExited();
  if (Clock::now() >= next_status_) {
    PrintStatusLine();
    next_status_ = Clock::now() + kStatusEvery;
  }
}

void Launcher::SignalAll(int sig) {
  // The group reaches children that have not been reaped yet (a zombie keeps
  // the group id reserved, so it cannot name some other process group) and
  // anything they started. Only signal while one of ours is unreaped.
  if (Live() == 0) return;
  if (pgid_ > 0 && killpg(pgid_, sig) != 0 && errno != ESRCH) PLOG(WARNING) << "[launch] killpg " << pgid_;
  // Direct kill too, in case a child left the group.
  for (const auto& c : children_)
    if (c.running) kill(c.pid, sig);
}

void Launcher::Teardown(const std::string& why) {
  if (Live() == 0) return;
  const std::string old_phase = phase_;
  phase_ = "tearing down";
  LOG(WARNING) << "[launch] " << why << ": stopping " << Live() << " child process(es) (SIGTERM to the workers, "
               << "then after at most " << std::max(kWorkerStopGrace, options_.worker_stop_grace).count()
               << " s to the servers, then SIGKILL after at most "
               << kServerStopGrace.count() << " s more)";
  escalate_ = false;
  // Workers first: a worker stopped gracefully says BYE, and a server that
  // went first would leave it waiting on a dead shard.
  const auto worker_grace = std::max(kWorkerStopGrace, options_.worker_stop_grace);
  for (const auto& [role, grace] : {std::pair{"worker", worker_grace}, std::pair{"server", kServerStopGrace}}) {
    if (escalate_ || Live(role) == 0) continue;
    for (const auto& c : children_)
      if (c.running && c.role == role) kill(c.pid, SIGTERM);
    const Clock::time_point grace_end = Clock::now() + grace;
    while (Live(role) > 0 && !escalate_ && Clock::now() < grace_end) Pump(grace_end);
  }
  if (Live() > 0) {
    std::string names;
    for (const auto& c : children_)
      if (c.running) names += " " + c.Name();
    LOG(WARNING) << "[launch] " << (escalate_ ? "second stop signal" : "still running after SIGTERM")
                 << "; sending SIGKILL to:" << names;
    SignalAll(SIGKILL);
    const Clock::time_point kill_end = Clock::now() + kKillWait;
    while (Live() > 0 && Clock::now() < kill_end) Pump(kill_end);
  }
  for (const auto& c : children_)
    if (c.running) LOG(ERROR) << "[launch] " << c.Name() << " did not die after SIGKILL; giving up on it";
  phase_ = old_phase;
  torn_down_ = true;
}

std::optional<int> Launcher::Interrupted(const std::string& phase) {
  if (stop_signal_ != 0) {
    Teardown(std::string("interrupted by ") + strsignal(stop_signal_) + " while " + phase);
    return 128 + stop_signal_;
  }
  if (Clock::now() >= deadline_) {
    LOG(ERROR) << "[launch] job timed out after " << options_.timeout.count() << " s (--timeout_s) while " << phase;
    Teardown("timeout");
    return 124;
  }
  return std::nullopt;
}

void Launcher::AddMetricsFlags(const std::string& role, int index, std::vector<std::string>* args) const {
  if (options_.metrics_port < 0) return;
  const int offset = role == "server" ? index : options_.num_servers + index;
  args->push_back("--metrics_port=" + std::to_string(options_.metrics_port == 0 ? 0 : options_.metrics_port + offset));
  if (!options_.metrics_sd_dir.empty())
    args->push_back("--metrics_sd_file=" + options_.metrics_sd_dir + "/" + options_.metrics_sd_prefix + "-" + role +
                    "-" + std::to_string(index) + ".json");
}

std::optional<int> Launcher::WaitForPortFiles(std::vector<std::string>* endpoints) {
  phase_ = "servers starting";
  endpoints->assign(options_.num_servers, "");
  const Clock::time_point port_deadline = std::min(deadline_, Clock::now() + kPortFileWait);
  while (true) {
    int missing = 0;
    for (int i = 0; i < options_.num_servers; ++i) {
      if (!(*endpoints)[i].empty()) continue;
      auto ep = ReadPortFile(tmp_dir_ + "/server_" + std::to_string(i) + ".port");
      if (!ep.ok()) {
        LOG(ERROR) << "[launch] server " << i << ": " << ep.status().message();
        Teardown("bad port file");
        return 1;
      }
      if (ep->has_value()) {
        (*endpoints)[i] = **ep;
        LOG(INFO) << "[launch] server " << i << " listening on " << (*endpoints)[i];
      } else {
        ++missing;
      }
    }
    // Any exit before the job runs is a failure, even with code 0.
    if (Child* c = NextExited()) {
      LOG(ERROR) << "[launch] " << c->Name() << " " << c->HowItEnded() << " before the job started";
      Teardown(c->Name() + " failed");
      return 1;
    }
    if (missing == 0) return std::nullopt;
    if (auto code = Interrupted("waiting for servers")) return code;
    if (Clock::now() >= port_deadline) {
      LOG(ERROR) << "[launch] " << missing << " server(s) did not write their port file within "
                 << kPortFileWait.count() << " s";
      Teardown("servers did not start");
      return 1;
    }
    Pump(port_deadline);
  }
}

std::optional<int> Launcher::Monitor() {
  phase_ = "training";
  std::optional<Clock::time_point> servers_deadline;
  while (true) {
    while (Child* c = NextExited()) {
      if (c->role == "worker" && WIFEXITED(c->wait_status) && WEXITSTATUS(c->wait_status) == kExitDiverged) {
        LOG(WARNING) << "[launch] " << c->Name() << " finished, but its training loss diverged "
                     << "(train.fail_on_divergence): the job will exit " << kExitDiverged;
        diverged_.push_back(c->Name());
        continue;
      }
      // A scheduled stop: the worker leaves on SIGTERM (exit 143), or dies of
      // it when it came before the worker's handler was in place.
      if (c->leaving && ((WIFEXITED(c->wait_status) && WEXITSTATUS(c->wait_status) == 128 + SIGTERM) ||
                         (WIFSIGNALED(c->wait_status) && WTERMSIG(c->wait_status) == SIGTERM))) {
        LOG(INFO) << "[launch] " << c->Name() << " left the job as scheduled (--elastic_schedule)";
        continue;
      }
      if (options_.data_on_demand && c->role == "worker" && WIFSIGNALED(c->wait_status) && Live("worker") > 0) {
        // Its held chunks go to the others once the servers declare it
        // gone (cluster.worker_timeout_ms); every row is still trained.
        LOG(WARNING) << "[launch] " << c->Name() << " " << c->HowItEnded()
                     << ": the job goes on without it (train.data_on_demand: its chunks are dealt again)";
        continue;
      }
      if (!c->Succeeded()) {
        LOG(ERROR) << "[launch] " << c->Name() << " " << c->HowItEnded()
                   << (c->role == "server" && !c->endpoint.empty() ? "; it was shard " + std::to_string(c->index) +
                                                                          " at " + c->endpoint
                                                                    : std::string());
        Teardown(c->Name() + " failed");
        return 1;
      }
      LOG(INFO) << "[launch] " << c->Name() << " finished";
      if (c->role == "worker") worker_finished_ = true;
    }
    // A worker that finished means the job's data is used: a joiner started
    // now would find the job over (and its servers perhaps gone).
    if (worker_finished_ && next_step_ < options_.elastic.size()) {
      LOG(WARNING) << "[launch] the job's workers are finishing: " << options_.elastic.size() - next_step_
                   << " --elastic_schedule step(s) from epoch " << options_.elastic[next_step_].epoch
                   << " not applied";
      next_step_ = options_.elastic.size();
    }
    if (worker_finished_ && !options_.elastic.empty()) {
      // A joiner not yet in the job (no progress file) when the data is
      // used would wait for servers that are exiting: stop it instead.
      for (Child& c : children_) {
        if (c.role != "worker" || !c.running || c.leaving || c.index < options_.num_workers) continue;
        std::ifstream in(tmp_dir_ + "/progress_" + std::to_string(c.index));
        int e = 0;
        if (in >> e) continue;
        LOG(WARNING) << "[launch] " << c.Name() << " had not joined when the job's data was used: stopping it";
        c.leaving = true;
        kill(c.pid, SIGTERM);
      }
    }
    if (Live("worker") > 0 && !ApplyElasticSteps()) return 1;
    if (Live() == 0) return std::nullopt;
    if (Live("worker") == 0 && !servers_deadline) {
      phase_ = "waiting for servers to exit";
      // Servers serving /metrics stay up --metrics_linger_s more.
      servers_deadline = Clock::now() + kServerExitWait + options_.metrics_linger;
      LOG(INFO) << "[launch] all workers finished; waiting up to "
                << (kServerExitWait + options_.metrics_linger).count() << " s for the servers to exit";
    }
    if (auto code = Interrupted(phase_)) return code;
    if (servers_deadline && Clock::now() >= *servers_deadline) {
      LOG(ERROR) << "[launch] " << Live("server") << " server(s) still running " << kServerExitWait.count()
                 << " s after the last worker finished";
      Teardown("servers did not exit");
      return 1;
    }
    Pump(servers_deadline ? std::min(deadline_, *servers_deadline) : deadline_);
  }
}

int Launcher::PrintSummary() {
  const std::string wall = FormatDuration(Clock::now() - start_);
  const double wall_s = std::chrono::duration<double>(Clock::now() - start_).count();
  if (!options_.metrics_out.empty()) {
    std::ifstream in(options_.metrics_out);
    if (!in) {
      LOG(ERROR) << "[launch] job finished but the evaluating worker (rank 0, or the lowest rank left) wrote no metrics file "
                 << options_.metrics_out;
      return 1;
    }
    nlohmann::json metrics = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (metrics.is_discarded()) {
      LOG(ERROR) << "[launch] " << options_.metrics_out << ": not valid JSON";
      return 1;
    }
    std::printf("metrics (%s):\n%s\n", options_.metrics_out.c_str(), metrics.dump(2).c_str());
    if (metrics.value("diverged", false)) {
      LOG(WARNING) << "[launch] the training loss diverged at epoch " << metrics.value("diverged_at_epoch", 0)
                   << " (\"diverged\" in " << options_.metrics_out << "); the metrics describe a diverged model";
    }
  }
  if (!diverged_.empty()) {
    std::string who;
    for (const auto& n : diverged_) who += (who.empty() ? "" : ", ") + n;
    std::printf("tether-launch: job finished, but the training loss diverged (%s): exit %d\n", who.c_str(),
                kExitDiverged);
    std::fflush(stdout);
    return kExitDiverged;
  }
  std::printf("tether-launch: job finished: %d server(s), %d worker(s), wall time %s (%.1f s)\n",
              options_.num_servers, options_.num_workers, wall.c_str(), wall_s);
  std::fflush(stdout);
  return 0;
}

int Launcher::Run() {
  const int code = RunJob();
  if (code > 128) {
    LOG(WARNING) << "[launch] job stopped by " << strsignal(code - 128) << " after "
                 << FormatDuration(Clock::now() - start_) << " (exit code " << code << ")";
  } else if (code != 0) {
    LOG(ERROR) << "[launch] job failed after " << FormatDuration(Clock::now() - start_) << " (exit code " << code
               << ")";
  }
  return code;
}

int Launcher::RunJob() {
  if (Status st = Setup(); !st.ok()) {
    LOG(ERROR) << "[launch] " << st.ToString();
    return 1;
  }
  LOG(INFO) << "[launch] " << options_.num_servers << " server(s), " << options_.num_workers
            << " worker(s), timeout " << options_.timeout.count() << " s, binaries from " << options_.bin_dir
            << ", port files in " << tmp_dir_;

  const std::string config_flag = "--config=" + options_.config_path;
  if (options_.transport == "inproc") {
    // One child runs the whole job; it is monitored like a worker, and there
    // are no server processes to wait for.
    std::vector<std::string> args = {config_flag, "--in_process"};
    if (!options_.metrics_out.empty()) args.push_back("--metrics_out=" + options_.metrics_out);
    if (!options_.model_out.empty()) args.push_back("--model_out=" + options_.model_out);
    args.insert(args.end(), options_.forwarded.begin(), options_.forwarded.end());
    LOG(INFO) << "[launch] transport inproc: one tether-worker process runs the " << options_.num_servers
              << " shard(s) and " << options_.num_workers << " worker(s) as threads";
    if (Status st = StartChild("worker", 0, "tether-worker", std::move(args)); !st.ok()) {
      LOG(ERROR) << "[launch] " << st.ToString();
      Teardown("could not start the in-process job");
      return 1;
    }
    if (auto code = Monitor()) return *code;
    return PrintSummary();
  }
  for (int i = 0; i < options_.num_servers; ++i) {
    const std::string listen = options_.transport == "ipc"
                                   ? "ipc://" + tmp_dir_ + "/server_" + std::to_string(i) + ".ipc"
                                   : std::string("tcp://127.0.0.1:0");
    std::vector<std::string> args = {config_flag, "--shard=" + std::to_string(i), "--listen=" + listen,
                                     "--port_file=" + tmp_dir_ + "/server_" + std::to_string(i) + ".port"};
    AddMetricsFlags("server", i, &args);
    args.insert(args.end(), options_.forwarded.begin(), options_.forwarded.end());
    if (Status st = StartChild("server", i, "tether-server", std::move(args)); !st.ok()) {
      LOG(ERROR) << "[launch] " << st.ToString();
      Teardown("could not start server " + std::to_string(i));
      return 1;
    }
  }

  std::vector<std::string> endpoints;
  if (auto code = WaitForPortFiles(&endpoints)) return *code;
  std::string addresses;
  for (const auto& ep : endpoints) addresses += (addresses.empty() ? "" : ",") + ep;
  for (auto& c : children_)
    if (c.role == "server") c.endpoint = endpoints[c.index];

  server_addresses_ = addresses;
  next_rank_ = options_.num_workers;
  for (int r = 0; r < options_.num_workers; ++r) {
    if (Status st = StartChild("worker", r, "tether-worker", WorkerArgs(r)); !st.ok()) {
      LOG(ERROR) << "[launch] " << st.ToString();
      Teardown("could not start worker " + std::to_string(r));
      return 1;
    }
  }

  if (auto code = Monitor()) return *code;
  return PrintSummary();
}

std::vector<std::string> Launcher::WorkerArgs(int rank) const {
  std::vector<std::string> args = {"--config=" + options_.config_path, "--rank=" + std::to_string(rank),
                                   "--server_addresses=" + server_addresses_};
  // Elastic: the evaluator is the lowest rank still there at the end (rank
  // 0 unless it left), so every worker is told where the metrics go; only
  // the evaluator writes them.
  if (!options_.metrics_out.empty() && (rank == 0 || !options_.elastic.empty() || options_.data_on_demand))
    args.push_back("--metrics_out=" + options_.metrics_out);
  if (!options_.elastic.empty()) args.push_back("--progress_file=" + tmp_dir_ + "/progress_" + std::to_string(rank));
  AddMetricsFlags("worker", rank, &args);
  args.insert(args.end(), options_.forwarded.begin(), options_.forwarded.end());
  return args;
}

int Launcher::JobEpoch() const {
  int epoch = 1;
  for (const Child& c : children_) {
    if (c.role != "worker") continue;
    std::ifstream in(tmp_dir_ + "/progress_" + std::to_string(c.index));
    int e = 0;
    if (in >> e) epoch = std::max(epoch, e);
  }
  return epoch;
}

bool Launcher::ApplyElasticSteps() {
  if (next_step_ >= options_.elastic.size()) return true;
  const int epoch = JobEpoch();
  for (; next_step_ < options_.elastic.size() && options_.elastic[next_step_].epoch <= epoch; ++next_step_) {
    const ElasticStep& step = options_.elastic[next_step_];
    if (step.delta > 0) {
      LOG(INFO) << "[launch] epoch " << epoch << ": starting " << step.delta << " worker(s) with new ranks "
                << next_rank_ << ".." << next_rank_ + step.delta - 1 << " (--elastic_schedule " << step.epoch
                << ":+" << step.delta << ")";
      for (int i = 0; i < step.delta; ++i, ++next_rank_) {
        if (Status st = StartChild("worker", next_rank_, "tether-worker", WorkerArgs(next_rank_)); !st.ok()) {
          LOG(ERROR) << "[launch] " << st.ToString();
          Teardown("could not start worker " + std::to_string(next_rank_));
          return false;
        }
      }
      continue;
    }
    // The most recently started workers still running leave first, once
    // they are in the job (they wrote their progress file: connected and
    // training). A worker started but not yet in it would die of the
    // SIGTERM before it ever joined, so the step waits for it instead.
    int to_stop = -step.delta;
    auto in_job = [this](const Child& c) {
      std::ifstream in(tmp_dir_ + "/progress_" + std::to_string(c.index));
      int e = 0;
      return static_cast<bool>(in >> e);
    };
    int ready = 0, starting = 0;
    for (const Child& c : children_) {
      if (c.role != "worker" || !c.running || c.leaving) continue;
      (in_job(c) ? ready : starting) += 1;
    }
    // Never stop the job's last workers in it while joiners are starting:
    // the job would end before they join (retried at the next progress event).
    if (ready - to_stop < 1 && starting > 0) break;
    std::string names;
    for (auto it = children_.rbegin(); it != children_.rend() && to_stop > 0; ++it) {
      if (it->role != "worker" || !it->running || it->leaving || !in_job(*it)) continue;
      it->leaving = true;
      kill(it->pid, SIGTERM);
      names += " " + it->Name();
      --to_stop;
    }
    LOG(INFO) << "[launch] epoch " << epoch << ": stopping" << (names.empty() ? " no worker (none running)" : names)
              << " gracefully (--elastic_schedule " << step.epoch << ":" << step.delta << ")";
  }
  return true;
}

// Directory of the running executable, where the child binaries live.
StatusOr<std::string> OwnDirectory() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return Status::Internal("cannot read /proc/self/exe: " + ec.message());
  return exe.parent_path().string();
}


// ---- Engine mode -------------------------------------------------------------
//
// Under `srun -n N tether-launch ...` or `mpirun -np N tether-launch ...`,
// every task runs this binary; each takes its place from the scheduler's
// environment (no MPI library: only the variables srun and Open MPI set)
// and becomes its role by exec'ing tether-server or tether-worker from this
// directory. Exec, not a child: the scheduler's task IS the role, so its
// exit code is the task's, a SIGTERM from srun/mpirun reaches it directly,
// and nothing is left behind when the step is killed.
struct EngineTask {
  std::string scheduler;   // "SLURM" or "Open MPI"
  std::string rank_var;    // the variable the rank came from
  int rank = 0;            // task index in [0, ntasks)
  int ntasks = 0;
  std::string job_id;      // "" when the scheduler gives none
  uint64_t generation = 0;
};

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

StatusOr<int> EnvInt(const char* name) {
  const std::string v = Env(name);
  char* end = nullptr;
  errno = 0;
  const long n = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno != 0 || n < 0 || n > (1 << 30))
    return Status::InvalidArgument(std::string("environment variable ") + name + "='" + v +
                                   "': expected a non-negative integer");
  return static_cast<int>(n);
}

// The task's place, or nullopt when this process is not a task of srun
// (a step: SLURM_STEP_ID; inside `sbatch` alone it is not) or mpirun.
StatusOr<std::optional<EngineTask>> DetectEngineTask() {
  EngineTask t;
  // SLURM's special steps (the batch script 0xfffffffe, extern, interactive:
  // ids from 0xfffffff0 up) are not srun task steps: a tether-launch run
  // straight from an sbatch script runs the job on its node, as elsewhere.
  const std::string step = Env("SLURM_STEP_ID");
  if (!step.empty() && !(step.size() >= 10 && step >= "4294967280")) {
    t.scheduler = "SLURM";
    t.rank_var = "SLURM_PROCID";
    TETHER_ASSIGN_OR_RETURN(t.rank, EnvInt("SLURM_PROCID"));
    TETHER_ASSIGN_OR_RETURN(t.ntasks, EnvInt("SLURM_NTASKS"));
    // One job id per allocation and step (two sruns of one sbatch are two
    // jobs); the same after a requeue, which bumps SLURM_RESTART_COUNT.
    if (!Env("SLURM_JOB_ID").empty()) t.job_id = "slurm-" + Env("SLURM_JOB_ID") + "." + Env("SLURM_STEP_ID");
    if (!Env("SLURM_RESTART_COUNT").empty()) {
      TETHER_ASSIGN_OR_RETURN(int restarts, EnvInt("SLURM_RESTART_COUNT"));
      t.generation = static_cast<uint64_t>(restarts);
    }
    return std::optional<EngineTask>(t);
  }
  if (!Env("OMPI_COMM_WORLD_RANK").empty()) {
    t.scheduler = "Open MPI";
    t.rank_var = "OMPI_COMM_WORLD_RANK";
    TETHER_ASSIGN_OR_RETURN(t.rank, EnvInt("OMPI_COMM_WORLD_RANK"));
    TETHER_ASSIGN_OR_RETURN(t.ntasks, EnvInt("OMPI_COMM_WORLD_SIZE"));
    // Unique per mpirun (Open MPI 4.1 sets both).
    if (!Env("OMPI_MCA_ess_base_jobid").empty())
      t.job_id = "ompi-" + Env("OMPI_MCA_ess_base_jobid");
    else if (!Env("PMIX_NAMESPACE").empty())
      t.job_id = "ompi-" + Env("PMIX_NAMESPACE");
    return std::optional<EngineTask>(t);
  }
  return std::optional<EngineTask>();
}

// Runs this task's role; returns only on an error (the exit code).
int RunEngineTask(const EngineTask& task, const JobConfig& config, const std::string& bin_dir) {
  const int num_servers = config.cluster().num_servers();
  const std::string where = "[launch] " + task.scheduler + " task " + std::to_string(task.rank) + " of " +
                            std::to_string(task.ntasks) + " (" + task.rank_var + "): ";
  if (task.rank >= task.ntasks) {
    LOG(ERROR) << where << "rank outside [0, " << task.ntasks << ")";
    return 2;
  }
  if (task.ntasks <= num_servers) {
    LOG(ERROR) << where << task.ntasks << " task(s) and --num_servers=" << num_servers
               << " leave no worker: start num_servers + num_workers tasks (srun -n / mpirun -np)";
    return 2;
  }
  const int num_workers = task.ntasks - num_servers;
  std::string set_workers;
  if (gflags::GetCommandLineOption("num_workers", &set_workers) && !set_workers.empty() &&
      set_workers != std::to_string(num_workers)) {
    LOG(ERROR) << where << "--num_workers=" << set_workers << " contradicts the " << task.ntasks << " tasks less "
               << num_servers << " server(s) = " << num_workers << " worker(s)";
    return 2;
  }
  std::string job_id = config.cluster().job_id();
  if (job_id.empty()) job_id = task.job_id;
  if (job_id.empty()) {
    LOG(ERROR) << where << task.scheduler << " gave no job id (SLURM_JOB_ID / OMPI_MCA_ess_base_jobid / "
               << "PMIX_NAMESPACE unset): set cluster.job_id (--job_id), the same in every task";
    return 2;
  }
  const uint64_t generation = config.cluster().has_generation() ? config.cluster().generation() : task.generation;
  std::string rendezvous = config.cluster().rendezvous();
  if (rendezvous.empty()) {
    // Default: beside the job, in the working directory every task shares
    // (srun and mpirun start tasks there); a shared filesystem across hosts.
    std::error_code ec;
    rendezvous = "file:" + (std::filesystem::current_path(ec) / "tether-rendezvous").string();
  }
  if (FLAGS_rendezvous_serve && rendezvous.rfind("tcp://", 0) != 0) {
    LOG(ERROR) << where << "--rendezvous_serve needs --rendezvous=tcp://HOST:PORT, got '" << rendezvous << "'";
    return 2;
  }

  const bool is_server = task.rank < num_servers;
  const int index = is_server ? task.rank : task.rank - num_servers;
  const std::string binary = is_server ? "tether-server" : "tether-worker";
  std::string config_path;
  gflags::GetCommandLineOption("config", &config_path);
  std::vector<std::string> args = {bin_dir + "/" + binary, "--config=" + config_path};
  args.push_back(is_server ? "--shard=" + std::to_string(index) : "--rank=" + std::to_string(index));
  args.push_back("--num_servers=" + std::to_string(num_servers));
  args.push_back("--num_workers=" + std::to_string(num_workers));
  args.push_back("--job_id=" + job_id);
  args.push_back("--generation=" + std::to_string(generation));
  args.push_back("--rendezvous=" + rendezvous);
  for (const std::string& f : OverrideFlagsSet()) {
    const auto set_here = {"--num_servers=", "--num_workers=", "--job_id=", "--generation=", "--rendezvous="};
    if (std::none_of(set_here.begin(), set_here.end(), [&](const char* mine) { return f.rfind(mine, 0) == 0; }))
      args.push_back(f);
  }
  if (is_server) {
    args.push_back("--listen=" + FLAGS_listen);
    if (!FLAGS_advertise_host.empty()) args.push_back("--advertise_host=" + FLAGS_advertise_host);
    if (FLAGS_rendezvous_serve && index == 0) args.push_back("--rendezvous_serve");
  } else {
    if (index == 0 && !FLAGS_metrics_out.empty()) {
      // A file left by an earlier run must not pass for this run's metrics.
      if (unlink(FLAGS_metrics_out.c_str()) != 0 && errno != ENOENT) {
        PLOG(ERROR) << where << "cannot remove old metrics file " << FLAGS_metrics_out;
        return 1;
      }
      args.push_back("--metrics_out=" + FLAGS_metrics_out);
    }
  }
  if (!FLAGS_resume_from.empty()) args.push_back("--resume_from=" + FLAGS_resume_from);
  if (FLAGS_metrics_port >= 0) {
    // The same layout as a launched job: task i serves /metrics on BASE + i
    // (server i, then worker r on BASE + S + r); 0 picks a free port each.
    args.push_back("--metrics_port=" + std::to_string(FLAGS_metrics_port == 0 ? 0 : FLAGS_metrics_port + task.rank));
    args.push_back("--metrics_host=" + FLAGS_metrics_host);
    args.push_back("--metrics_linger_s=" + std::to_string(FLAGS_metrics_linger_s));
    if (!FLAGS_metrics_sd_dir.empty()) {
      std::error_code ec;  // every task makes it; the first one wins
      std::filesystem::create_directories(FLAGS_metrics_sd_dir, ec);
      if (ec) {
        LOG(ERROR) << where << "--metrics_sd_dir=" << FLAGS_metrics_sd_dir << ": " << ec.message();
        return 2;
      }
      std::string name = job_id;
      for (char& ch : name)
        if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '-' && ch != '_' && ch != '.') ch = '_';
      args.push_back("--metrics_sd_file=" + FLAGS_metrics_sd_dir + "/" + name + (is_server ? "-server-" : "-worker-") +
                     std::to_string(index) + ".json");
    }
  } else if (!FLAGS_metrics_sd_dir.empty()) {
    LOG(ERROR) << where << "--metrics_sd_dir needs --metrics_port (0: a free port per task)";
    return 2;
  }
  std::string cmdline;
  for (const auto& a : args) cmdline += (cmdline.empty() ? "" : " ") + a;
  LOG(INFO) << where << (is_server ? "server shard " : "worker rank ") << index << " of "
            << (is_server ? num_servers : num_workers) << ", job '" << job_id << "' generation " << generation
            << ", rendezvous " << rendezvous << ": exec " << cmdline;
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  // The role must not outlive the scheduler's process that started it
  // (mpirun, orted, slurmstepd): an mpirun stopped while it is still
  // launching exits without signalling the tasks it already started. When
  // that parent goes, the role gets SIGTERM and leaves as on any stop (the
  // setting survives exec).
  const pid_t parent = getppid();
  if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0) PLOG(WARNING) << where << "prctl(PR_SET_PDEATHSIG)";
  if (getppid() != parent) {
    LOG(ERROR) << where << "the process that started this task (pid " << parent << ") is gone; not starting the "
               << (is_server ? "server" : "worker");
    return 1;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  google::FlushLogFiles(google::GLOG_INFO);
  execv(argv[0], argv.data());
  PLOG(ERROR) << where << "cannot exec " << argv[0] << " (the " << (is_server ? "server" : "worker") << " role)";
  return 1;
}

}  // namespace
}  // namespace tether

int main(int argc, char** argv) {
  tether::ParseFlagsOrDie(
      &argc, &argv,
      {"tether-launch --config=JOB.pbtxt [--servers=S] [--workers=W] [--transport=tcp|ipc|inproc] "
       "[--metrics_out=FILE] [--timeout_s=1800] [--resume_from=DIR] [--max_restarts=N] "
       "[--metrics_port=BASE [--metrics_host=H] [--metrics_sd_dir=DIR] [--metrics_linger_s=15]] "
       "[override flags such as --staleness=N, forwarded to every server and worker]\n"
       "Runs S tether-server shards and W tether-worker ranks on 127.0.0.1 and waits for them.\n"
       "   or, as every task of srun/mpirun (engine mode): srun -n $((S+W)) tether-launch --config=JOB.pbtxt "
       "--num_servers=S [--rendezvous=...]: task i < S is server shard i, the others workers i-S."});
  if (FLAGS_servers < 0 || FLAGS_workers < 0) {
    LOG(ERROR) << "[launch] --servers and --workers must be positive (0 = take the config's value)";
    return 2;
  }
  if (FLAGS_transport != "tcp" && FLAGS_transport != "ipc" && FLAGS_transport != "inproc") {
    LOG(ERROR) << "[launch] --transport=" << FLAGS_transport << ": expected tcp, ipc or inproc";
    return 2;
  }
  if (FLAGS_timeout_s <= 0) {
    LOG(ERROR) << "[launch] --timeout_s must be positive, got " << FLAGS_timeout_s;
    return 2;
  }
  // --servers/--workers are the launcher's names for --num_servers/--num_workers;
  // refuse contradicting pairs instead of silently picking one.
  for (auto [mine, flag, override_name] : {std::tuple{FLAGS_servers, "servers", "num_servers"},
                                           std::tuple{FLAGS_workers, "workers", "num_workers"}}) {
    if (mine == 0) continue;
    std::string other;
    CHECK(gflags::GetCommandLineOption(override_name, &other)) << "--" << override_name << " not defined";
    if (!other.empty() && other != std::to_string(mine)) {
      LOG(ERROR) << "[launch] --" << flag << "=" << mine << " contradicts --" << override_name << "=" << other;
      return 2;
    }
    gflags::SetCommandLineOption(override_name, std::to_string(mine).c_str());
  }

  // Each child logs the values in force; the launcher would only repeat them.
  auto config = tether::LoadConfigFromFlags("launch", tether::ConfigScope::kJob, tether::ConfigLog::kQuiet);
  if (config.ok()) {
    // The model's checks (worker/models/model_registry.h) before anything starts.
    if (tether::Status st = tether::ValidateModelConfig(*config); !st.ok()) config = st;
  }
  // A missing data file is found before any server starts, with the full
  // path it was looked for at.
  if (config.ok()) {
    if (tether::Status st = tether::CheckDataFilesExist(*config); !st.ok()) config = st;
  }
  if (!config.ok()) {
    LOG(ERROR) << "[launch] " << config.status().ToString();
    return 2;
  }
  auto bin_dir = tether::OwnDirectory();
  if (!bin_dir.ok()) LOG(FATAL) << "[launch] " << bin_dir.status().ToString();

  if (FLAGS_resume_if_present) {
    if (!FLAGS_resume_from.empty()) {
      LOG(ERROR) << "[launch] --resume_if_present and --resume_from exclude each other";
      return 2;
    }
    if (config->checkpoint().dir().empty()) {
      LOG(ERROR) << "[launch] --resume_if_present needs checkpoint.dir (--checkpoint_dir): where to look for one";
      return 2;
    }
    if (auto latest = tether::ResolveCheckpoint(config->checkpoint().dir()); latest.ok()) {
      LOG(INFO) << "[launch] --resume_if_present: resuming from " << *latest;
      FLAGS_resume_from = *latest;
    } else {
      LOG(INFO) << "[launch] --resume_if_present: no complete checkpoint under " << config->checkpoint().dir()
                << "; starting afresh";
    }
  }
  if (FLAGS_engine != "auto" && FLAGS_engine != "on" && FLAGS_engine != "off") {
    LOG(ERROR) << "[launch] --engine=" << FLAGS_engine << ": expected auto, on or off";
    return 2;
  }
  auto engine_task = tether::DetectEngineTask();
  if (!engine_task.ok()) {
    LOG(ERROR) << "[launch] engine mode: " << engine_task.status().message();
    return 2;
  }
  if (FLAGS_engine == "off") engine_task->reset();
  if (FLAGS_engine == "on" && !engine_task->has_value()) {
    LOG(ERROR) << "[launch] --engine=on, but this process is not a task of srun (SLURM_STEP_ID unset, or the batch step) or mpirun "
                  "(OMPI_COMM_WORLD_RANK unset)";
    return 2;
  }
  if (engine_task->has_value()) {
    for (const char* flag : {"transport", "max_restarts", "model_out", "timeout_s", "elastic_schedule"}) {
      if (!gflags::GetCommandLineFlagInfoOrDie(flag).is_default) {
        LOG(ERROR) << "[launch] --" << flag << " does not apply in engine mode (one task of srun/mpirun runs one "
                   << "role; the scheduler bounds and restarts the job)";
        return 2;
      }
    }
    return tether::RunEngineTask(**engine_task, *config, *bin_dir);
  }

  // Bad checkpoint paths are refused before any process starts.
  if (tether::Status st = tether::CheckCheckpointPaths(config->checkpoint().dir(), FLAGS_resume_from); !st.ok()) {
    LOG(ERROR) << "[launch] " << st.message();
    return 2;
  }
  tether::LaunchOptions options;
  gflags::GetCommandLineOption("config", &options.config_path);
  options.bin_dir = *bin_dir;
  options.num_servers = config->cluster().num_servers();
  options.num_workers = config->cluster().num_workers();
  options.data_on_demand = config->train().data_on_demand();
  options.metrics_out = FLAGS_metrics_out;
  options.model_out = FLAGS_model_out;
  if (!FLAGS_elastic_schedule.empty()) {
    auto steps = tether::ParseElasticSchedule(FLAGS_elastic_schedule, options.num_workers,
                                              tether::MaxWorkers(config->cluster()));
    if (!steps.ok()) {
      LOG(ERROR) << "[launch] " << steps.status().message();
      return 2;
    }
    if (FLAGS_transport == "inproc") {
      LOG(ERROR) << "[launch] --elastic_schedule needs a process per worker: not with --transport=inproc";
      return 2;
    }
    for (const tether::ElasticStep& step : *steps) {
      if (step.delta > 0) {
        // A joiner's first rank: refused now, not mid-job (the data it needs).
        if (tether::Status st = tether::CheckWorkerRank(*config, options.num_workers,
                                                        tether::RowsDealtOnDemand(*config));
            !st.ok()) {
          LOG(ERROR) << "[launch] --elastic_schedule " << step.epoch << ":+" << step.delta << ": " << st.message();
          return 2;
        }
      }
      if (step.epoch > config->train().epochs())
        LOG(WARNING) << "[launch] --elastic_schedule step at epoch " << step.epoch << " is past train.epochs = "
                     << config->train().epochs() << ": it will never apply";
    }
    options.elastic = std::move(*steps);
  }
  if (!FLAGS_model_out.empty() && FLAGS_transport != "inproc") {
    LOG(ERROR) << "[launch] --model_out needs --transport=inproc (the one process that holds every shard's tables "
                  "at the end); for a job of several processes, export a checkpoint with tether-export";
    return 2;
  }
  options.timeout = std::chrono::seconds(FLAGS_timeout_s);
  options.transport = FLAGS_transport;
  // A stopped worker first trains on to the stop's checkpoint and writes it
  // (worker/trainer.cc allows it 60 s).
  if (!config->checkpoint().dir().empty()) options.worker_stop_grace = std::chrono::seconds(65);
  // Every child sees the same S and W, whatever the config file says.
  options.forwarded = {"--num_servers=" + std::to_string(options.num_servers),
                       "--num_workers=" + std::to_string(options.num_workers)};
  for (const std::string& f : tether::OverrideFlagsSet())
    if (f.rfind("--num_servers=", 0) != 0 && f.rfind("--num_workers=", 0) != 0) options.forwarded.push_back(f);
  if (config->cluster().job_id().empty()) {
    // A job id of this launch's own, so that no process of another launch of
    // the same config (a stale worker, a second user) can pair with these.
    std::random_device rd;
    char suffix[32];
    std::snprintf(suffix, sizeof(suffix), "-%d-%08x", static_cast<int>(getpid()), rd());
    options.forwarded.push_back("--job_id=" + config->name() + suffix);
  }

  if (FLAGS_max_restarts < 0) {
    LOG(ERROR) << "[launch] --max_restarts must be ≥ 0, got " << FLAGS_max_restarts;
    return 2;
  }
  if (FLAGS_max_restarts > 0 && config->checkpoint().dir().empty()) {
    LOG(ERROR) << "[launch] --max_restarts=" << FLAGS_max_restarts
               << " restarts from checkpoints: set checkpoint.dir (--checkpoint_dir) and an interval "
                  "(--checkpoint_every_clocks or --checkpoint_every_seconds)";
    return 2;
  }
  if (FLAGS_resume_from.empty() && !config->checkpoint().dir().empty()) {
    // Refused up front (worker 0 refuses it too, for jobs started by hand).
    auto existing = tether::ResolveCheckpoint(config->checkpoint().dir());
    if (existing.ok()) {
      LOG(ERROR) << "[launch] checkpoint.dir " << config->checkpoint().dir() << " already holds checkpoints (the latest: "
                 << *existing << "): resume from them with --resume_from=" << config->checkpoint().dir()
                 << ", or give the new job its own directory";
      return 2;
    }
  }
  std::unique_ptr<tether::RendezvousStore> store;
  if (FLAGS_rendezvous_serve) {
    const std::string& spec = config->cluster().rendezvous();
    if (spec.rfind("tcp://", 0) != 0) {
      LOG(ERROR) << "[launch] --rendezvous_serve needs --rendezvous=tcp://HOST:PORT, got '" << spec << "'";
      return 2;
    }
    // The store's thread must never take the launcher's signals (they are
    // read through a signalfd): it starts with every signal blocked.
    sigset_t all, saved;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &saved);
    // With security.curve the store holds the servers' key pair and admits
    // the servers' and the workers' keys only.
    tether::SocketOptions store_options;
    std::vector<std::string> admitted;
    tether::Status st;
    if (config->security().has_curve()) {
      auto curve = tether::RendezvousCurveServer(config->security().curve(), &admitted);
      if (curve.ok()) store_options.curve = *curve;
      else st = curve.status();
    }
    store = std::make_unique<tether::RendezvousStore>();
    if (st.ok()) st = store->Start(spec, store_options, admitted);
    pthread_sigmask(SIG_SETMASK, &saved, nullptr);
    if (!st.ok()) {
      LOG(ERROR) << "[launch] " << st.message();
      return 1;
    }
    LOG(INFO) << "[launch] serving the rendezvous store at " << store->endpoint();
  }
  // /metrics: each child gets its own port (cli/metrics_flags.h); host
  // and linger are the same for all.
  for (const char* flag : {"metrics_port_file", "metrics_sd_file"}) {
    if (!gflags::GetCommandLineFlagInfoOrDie(flag).is_default) {
      LOG(ERROR) << "[launch] flag --" << flag << " names one process's file; tether-launch takes --metrics_sd_dir "
                 << "(one file_sd target file per process)";
      return 2;
    }
  }
  if (FLAGS_metrics_port >= 0) {
    const int last = FLAGS_metrics_port + options.num_servers + options.num_workers - 1;
    if (FLAGS_metrics_port > 0 && last > 65535) {
      LOG(ERROR) << "[launch] --metrics_port=" << FLAGS_metrics_port << " gives the last of "
                 << options.num_servers + options.num_workers << " processes port " << last << ", past 65535";
      return 2;
    }
    if (FLAGS_transport == "inproc") {
      LOG(ERROR) << "[launch] --metrics_port needs server and worker processes: --transport=tcp or ipc";
      return 2;
    }
    if (FLAGS_metrics_linger_s < 0) {
      LOG(ERROR) << "[launch] --metrics_linger_s=" << FLAGS_metrics_linger_s << " is negative (0: exit at once)";
      return 2;
    }
    options.metrics_port = FLAGS_metrics_port;
    options.metrics_linger = std::chrono::seconds(FLAGS_metrics_linger_s);
    options.forwarded.push_back("--metrics_host=" + FLAGS_metrics_host);
    options.forwarded.push_back("--metrics_linger_s=" + std::to_string(FLAGS_metrics_linger_s));
    if (!FLAGS_metrics_sd_dir.empty()) {
      std::error_code ec;
      std::filesystem::create_directories(FLAGS_metrics_sd_dir, ec);
      if (ec) {
        LOG(ERROR) << "[launch] --metrics_sd_dir=" << FLAGS_metrics_sd_dir << ": " << ec.message();
        return 2;
      }
      options.metrics_sd_dir = FLAGS_metrics_sd_dir;
      std::string job = config->cluster().job_id().empty() ? config->name() : config->cluster().job_id();
      for (const std::string& f : options.forwarded)
        if (f.rfind("--job_id=", 0) == 0) job = f.substr(9);
      for (char& ch : job)
        if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '-' && ch != '_' && ch != '.') ch = '_';
      options.metrics_sd_prefix = job;
    }
    LOG(INFO) << "[launch] /metrics on " << FLAGS_metrics_host << ": "
              << (FLAGS_metrics_port == 0 ? std::string("a free port per process (each logs its URL)")
                                          : "servers from port " + std::to_string(FLAGS_metrics_port) +
                                                ", workers from " +
                                                std::to_string(FLAGS_metrics_port + options.num_servers))
              << (options.metrics_sd_dir.empty() ? "" : "; file_sd targets in " + options.metrics_sd_dir);
  } else if (!FLAGS_metrics_sd_dir.empty()) {
    LOG(ERROR) << "[launch] --metrics_sd_dir needs --metrics_port (0: a free port per process)";
    return 2;
  }
  const std::vector<std::string> forwarded = options.forwarded;
  if (!FLAGS_resume_from.empty()) options.forwarded.push_back("--resume_from=" + FLAGS_resume_from);
  const auto job_start = std::chrono::steady_clock::now();
  const auto total_timeout = options.timeout;
  for (int attempt = 0;; ++attempt) {
    int code;
    {
      tether::Launcher launcher(options);
      code = launcher.Run();
    }
    // Only a failure is restarted: not success, bad flags, a timeout, a
    // stop signal or a diverged loss.
    if (code != 1 || attempt >= FLAGS_max_restarts) {
      if (code == 0 && attempt > 0)
        std::printf("tether-launch: job finished after %d restart(s) from checkpoints\n", attempt);
      return code;
    }
    auto ckpt = tether::ResolveCheckpoint(config->checkpoint().dir());
    if (!ckpt.ok()) {
      LOG(ERROR) << "[launch] the job failed and cannot be restarted: " << ckpt.status().message();
      return code;
    }
    auto manifest = tether::ReadManifest(*ckpt);
    if (!manifest.ok()) {
      LOG(ERROR) << "[launch] the job failed and cannot be restarted: " << manifest.status().message();
      return code;
    }
    if (manifest->final()) {
      LOG(ERROR) << "[launch] the job failed after its final checkpoint (" << *ckpt << "): nothing to restart";
      return code;
    }
    const uint64_t generation = config->cluster().generation() + static_cast<uint64_t>(attempt) + 1;
    const double age_s =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count() -
        manifest->written_unix_s();
    LOG(WARNING) << "[launch] the job failed; restart " << attempt + 1 << " of " << FLAGS_max_restarts << " from "
                 << *ckpt << " (clock " << manifest->clock() << ", written " << age_s
                 << " s ago: the training since then is lost and redone), as generation " << generation;
    std::fprintf(stderr, "[launch] restart %d of %d from %s (clock %lld; %.1f s of training since it is redone)\n",
                 attempt + 1, FLAGS_max_restarts, ckpt->c_str(), static_cast<long long>(manifest->clock()), age_s);
    options.forwarded = forwarded;
    options.forwarded.push_back("--resume_from=" + *ckpt);
    options.forwarded.push_back("--generation=" + std::to_string(generation));
    const auto left = total_timeout - std::chrono::duration_cast<std::chrono::seconds>(
                                          std::chrono::steady_clock::now() - job_start);
    if (left <= std::chrono::seconds(0)) {
      LOG(ERROR) << "[launch] no time left (--timeout_s) to restart the job";
      return 124;
    }
    options.timeout = left;
  }
}
