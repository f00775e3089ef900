// tether-server: one parameter-server shard.
//
// Exit codes: 0 every worker finished (BYE); 1 the job failed (a worker sent
// ABORT, a worker was removed for silence and never came back, a timeout,
// a bind error); 2 bad config or flags; 128 + N on stop signal N (130
// SIGINT, 143 SIGTERM): the shard stops within its poll interval (100 ms)
// whatever its workers are doing, since the job did not finish.
//
// With --metrics_port the shard serves /metrics (tools/metrics_flags.h) and
// keeps serving its final values --metrics_linger_s seconds after Run()
// returns, then exits with the code above (a stop signal during the linger
// ends it at once, without changing the code).
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <atomic>
#include <csignal>
#include <cstring>

#include "core/config.h"
#include "core/file_util.h"
#include "core/metrics_log.h"
#include "server/server.h"
#include "server/shard_metrics.h"
#include "tools/common_flags.h"
#include "tools/metrics_flags.h"

DEFINE_int32(shard, 0, "this server's shard index in [0, num_servers)");
DEFINE_string(listen, "tcp://127.0.0.1:0", "ZeroMQ endpoint to bind; port 0 picks a free port");
DEFINE_string(port_file, "", "if set, the bound endpoint is written here (atomically) once listening");
DEFINE_string(resume_from, "",
              "the checkpoint to load rows from, as this host sees it (default: the path worker 0 resumes "
              "from, sent at HELLO)");

namespace {
// Set once by the stop signal handler (lock-free atomics are
// async-signal-safe); Run() looks at the shard's stop flag every poll.
std::atomic<int> g_signal{0};
std::atomic<tether::ServerShard*> g_server{nullptr};
void RequestStop(int sig) {
  if (g_signal.exchange(sig) != 0) return;
  if (tether::ServerShard* s = g_server.load()) s->Stop();
}
// The exit code of a Run() that returned `st` (logs why it is not 0).
int ExitCode(const tether::Status& st);
}  // namespace

int main(int argc, char** argv) {
  tether::ParseFlagsOrDie(
      &argc, &argv,
      {"tether-server --config=JOB.pbtxt --shard=I [--listen=tcp://HOST:PORT] [--port_file=F]\n"
       "One parameter-server shard of a job; reads the config's cluster and consistency sections."});
  auto config = tether::LoadConfigFromFlags("server " + std::to_string(FLAGS_shard), tether::ConfigScope::kServer);
  if (!config.ok()) {
    LOG(ERROR) << "[server " << FLAGS_shard << "] " << config.status().message();
    return 2;
  }
  if (FLAGS_shard < 0 || FLAGS_shard >= config->cluster().num_servers()) {
    LOG(ERROR) << "[server] flag --shard=" << FLAGS_shard << " outside [0, " << config->cluster().num_servers()
               << ") (cluster.num_servers)";
    return 2;
  }
  tether::ServerShard server(*config, FLAGS_shard);
  server.set_resume_from(FLAGS_resume_from);
  std::unique_ptr<tether::MetricsLog> metrics_log;
  if (!config->train().metrics_dir().empty()) {
    auto log = tether::MetricsLog::Open(config->train().metrics_dir(), "server", FLAGS_shard);
    if (!log.ok()) {
      LOG(ERROR) << "[server " << FLAGS_shard << "] " << log.status().message();
      return 2;
    }
    metrics_log = std::move(*log);
    tether::LogShardClocks(&server, metrics_log.get());
  }
  tether::PublishedSnapshot<tether::ShardMetricsSnapshot> published;
  std::unique_ptr<tether::MetricsEndpoint> endpoint;
  {
    // Null when --metrics_port is -1 (the flags are still checked).
    auto ep = tether::StartMetricsEndpointFromFlags(
        "[server " + std::to_string(FLAGS_shard) + "] ", {server.job_id(), "server", "shard", FLAGS_shard},
        [&published, job = server.job_id(), shard = FLAGS_shard] {
          return tether::RenderShardMetrics(published.Get(), job, shard);
        });
    if (!ep.ok()) {
      LOG(ERROR) << "[server " << FLAGS_shard << "] " << ep.status().message();
      return 2;
    }
    endpoint = std::move(*ep);
    if (endpoint != nullptr) tether::PublishShardMetrics(&server, &published);
  }
  g_server.store(&server);
  std::signal(SIGTERM, RequestStop);
  std::signal(SIGINT, RequestStop);
  tether::Status st = server.Bind(FLAGS_listen);
  if (st.ok() && !FLAGS_port_file.empty()) st = tether::WriteFileAtomically(FLAGS_port_file, server.endpoint() + "\n");
  bool ran = false;
  if (st.ok() && g_signal.load() == 0) {
    ran = true;
    st = server.Run();
  }
  if (st.ok() && metrics_log != nullptr) st = metrics_log->Flush();
  g_server.store(nullptr);
  const int code = ExitCode(st);
  // A signal that stopped the job ends the process at once; one during the
  // linger only cuts the linger short. A shard that never ran (bind error)
  // has nothing to show.
  if (ran && g_signal.load() == 0)
    tether::LingerForScrapes("[server " + std::to_string(FLAGS_shard) + "] ", endpoint.get(), g_signal);
  return code;
}

namespace {
int ExitCode(const tether::Status& st) {
  if (const int sig = g_signal.load(); sig != 0) {
    LOG(WARNING) << "[server " << FLAGS_shard << "] stopped by signal " << sig << " (" << strsignal(sig)
                 << ") before the job finished: exit " << 128 + sig
                 << (st.ok() ? "" : " (" + st.message() + ")");
    return 128 + sig;
  }
  if (!st.ok()) {
    // The shard's own errors already carry its "[server N] " prefix.
    const std::string prefix = "[server " + std::to_string(FLAGS_shard) + "] ";
    LOG(ERROR) << (st.message().rfind(prefix, 0) == 0 ? "" : prefix) << st.message();
    return 1;
  }
  return 0;
}
}  // namespace
