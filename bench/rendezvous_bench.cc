#include "bench/rendezvous_bench.h"

#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <vector>

#include "core/net/rendezvous.h"

namespace tether {
namespace {

int64_t MonotonicNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

// One process of a round: waits for the release (EOF on `go`), then
// publishes (i < s) or looks every server up, writes when it was done to
// `done`, and exits (0: its part succeeded).
[[noreturn]] void RoundProcess(const std::string& backend, const std::string& spec, const std::string& job, int i,
                               int s, int go, int done) {
  char c;
  if (read(go, &c, 1) < 0) _exit(3);  // EOF: released
  int rc = 0;
  if (backend != "none") {
    auto r = Rendezvous::Open(spec);
    if (!r.ok()) _exit(4);
    if (i < s) {
      rc = PublishServer(r->get(), job, 0, i, "tcp://10.0.0." + std::to_string(i) + ":5000", 30000).ok() ? 0 : 5;
    } else {
      auto got = LookupServers(r->get(), job, 0, s, 30000, nullptr);
      rc = got.ok() && static_cast<int>(got->size()) == s ? 0 : 6;
    }
  }
  const int64_t t = MonotonicNs();
  if (write(done, &t, sizeof(t)) != static_cast<ssize_t>(sizeof(t))) _exit(7);
  _exit(rc);
}

// One round: N forked processes wait on `go`, then servers publish and
// workers look every server up ("none": they only exit). Returns the time
// from release to the last process done, in ms (-1: a process failed).
double RendezvousRound(const std::string& backend, const std::string& spec, int n, int s, int rep) {
  int go[2], done[2];
  if (pipe(go) != 0 || pipe(done) != 0) return -1;
  std::vector<pid_t> kids;
  const std::string job = "bench-" + std::to_string(getpid()) + "-" + std::to_string(n) + "-" + std::to_string(rep);
  for (int i = 0; i < n; ++i) {
    const pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
      close(go[1]);
      close(done[0]);
      RoundProcess(backend, spec, job, i, s, go[0], done[1]);
    }
    kids.push_back(pid);
  }
  close(go[0]);
  close(done[1]);
  const int64_t start = MonotonicNs();
  close(go[1]);  // release every process at once
  int64_t last = start;
  int64_t t = 0;
  while (read(done[0], &t, sizeof(t)) == static_cast<ssize_t>(sizeof(t))) last = std::max(last, t);
  close(done[0]);
  bool ok = true;
  for (pid_t k : kids) {
    int st = 0;
    waitpid(k, &st, 0);
    ok = ok && WIFEXITED(st) && WEXITSTATUS(st) == 0;
  }
  return ok ? static_cast<double>(last - start) / 1e6 : -1;
}

// The store in a process of its own, forked before this process makes any
// ZeroMQ context (a context must not cross a fork); it writes its endpoint
// to `port_pipe`. Its endpoint, or "" when it did not start; *pid: the
// process (SIGTERM ends it).
std::string ForkStore(int port_pipe[2], pid_t* pid) {
  *pid = fork();
  if (*pid == 0) {
    close(port_pipe[0]);
    RendezvousStore store;
    if (!store.Start("tcp://127.0.0.1:0").ok()) _exit(1);
    char buf[128] = {0};
    std::snprintf(buf, sizeof(buf), "%s", store.endpoint().c_str());
    if (write(port_pipe[1], buf, sizeof(buf)) != static_cast<ssize_t>(sizeof(buf))) _exit(1);
    close(port_pipe[1]);
    pause();  // until SIGTERM
    _exit(0);
  }
  close(port_pipe[1]);
  char buf[128] = {0};
  if (*pid < 0 || read(port_pipe[0], buf, sizeof(buf)) != static_cast<ssize_t>(sizeof(buf))) return "";
  close(port_pipe[0]);
  return buf;
}

// The table's rows for N processes: the baseline, then each backend.
// False when a process failed (said on stderr; the other rows still run).
bool MeasureCount(const RendezvousBenchOptions& options, const std::string& dir, const std::string& store_spec,
                  int n) {
  bool all_ok = true;
  const int s = std::max(1, n / 8);
  double baseline = 0;
  for (const std::string backend : {"none", "file", "store"}) {
    std::vector<double> ms;
    for (int rep = 0; rep < options.reps; ++rep) {
      const std::string spec = backend == "store" ? store_spec : "file:" + dir + "/" + std::to_string(rep);
      const double t = RendezvousRound(backend, spec, n, s, rep);
      if (t < 0) {
        std::fprintf(stderr, "tether-bench rendezvous: a process failed (%s, N = %d)\n", backend.c_str(), n);
        all_ok = false;
        break;
      }
      ms.push_back(t);
    }
    if (ms.empty()) continue;
    std::sort(ms.begin(), ms.end());
    const double median = ms[ms.size() / 2];
    if (backend == "none") baseline = median;
    std::printf("| %s | %d | %d | %d | %.1f | %.1f | %s |\n",
                backend == "none" ? "none (baseline)" : backend == "file" ? "file:DIR" : "store tcp://", n, s, n - s,
                median, ms.front(),
                backend == "none" ? "—" : (std::to_string(static_cast<int>(std::lround(median - baseline)))).c_str());
  }
  return all_ok;
}

}  // namespace

int RunRendezvousBench(const RendezvousBenchOptions& options) {
  std::vector<int> counts;
  std::stringstream ss(options.procs);
  for (std::string item; std::getline(ss, item, ',');) {
    const int n = std::atoi(item.c_str());
    if (n < 2) {
      std::fprintf(stderr, "tether-bench rendezvous: --rdzv_procs: '%s' is not a count ≥ 2\n", item.c_str());
      return 2;
    }
    counts.push_back(n);
  }
  if (options.reps < 1) {
    std::fprintf(stderr, "tether-bench rendezvous: --rdzv_reps must be ≥ 1\n");
    return 2;
  }
  const char* tmpdir = std::getenv("TMPDIR");
  std::string parent = !options.dir.empty() ? options.dir : (tmpdir != nullptr && *tmpdir ? tmpdir : "/tmp");
  std::string dir = parent + "/tether-bench-rdzv.XXXXXX";
  if (mkdtemp(dir.data()) == nullptr) {
    std::fprintf(stderr, "tether-bench rendezvous: cannot create a directory under %s: %s\n", parent.c_str(),
                 std::strerror(errno));
    return 1;
  }
  int port_pipe[2];
  if (pipe(port_pipe) != 0) return 1;
  pid_t store_pid = -1;
  const std::string store_spec = ForkStore(port_pipe, &store_pid);
  if (store_spec.empty()) {
    std::fprintf(stderr, "tether-bench rendezvous: the store did not start\n");
    return 1;
  }
  std::printf("Rendezvous: N processes released at once; S = max(1, N/8) publish one endpoint each, the other\n"
              "N - S look all S up. Time: release to the last process done (median of %d). Baseline: the same\n"
              "processes doing no rendezvous. Directory: %s (local disk). Store: %s, its own process.\n\n",
              options.reps, dir.c_str(), store_spec.c_str());
  std::printf("| backend | N | servers | workers | ms (median) | ms (min) | ms over baseline |\n"
              "|---|---:|---:|---:|---:|---:|---:|\n");
  int status = 0;
  for (int n : counts)
    if (!MeasureCount(options, dir, store_spec, n)) status = 1;
  kill(store_pid, SIGTERM);
  waitpid(store_pid, nullptr, 0);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return status;
}

}  // namespace tether
