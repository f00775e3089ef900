// tether-server: one parameter-server shard.
//
// Exit codes: 0 every worker finished (BYE); 1 the job failed (a worker sent
// ABORT, a worker was removed for silence and never came back, a timeout,
// a bind error); 2 bad config or flags; 128 + N on stop signal N (130
// SIGINT, 143 SIGTERM): the shard stops within its poll interval (100 ms)
// whatever its workers are doing, since the job did not finish.
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <atomic>
#include <csignal>
#include <cstring>

#include "core/config.h"
#include "core/file_util.h"
#include "core/metrics_log.h"
#include "core/net/transport.h"
#include "server/server.h"
#include "server/shard_metrics.h"
#include "tools/common_flags.h"

DEFINE_int32(shard, 0, "this server's shard index in [0, num_servers)");
DEFINE_string(listen, "tcp://127.0.0.1:0",
              "ZeroMQ endpoint to bind; port 0 picks a free port. IPv6 (tcp://[::1]:0), host names "
              "(tcp://myhost:0) and wildcards (tcp://*:0, tcp://0.0.0.0:0: every interface) work");
DEFINE_string(port_file, "",
              "if set, the endpoint peers connect to (the bound one, or for a wildcard bind the advertised "
              "one, see --advertise_host) is written here (atomically) once listening");
DEFINE_string(advertise_host, "",
              "for a wildcard --listen: the host (name or address) workers connect to, written to --port_file "
              "and published to --rendezvous; default: this machine's hostname");
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
  g_server.store(&server);
  std::signal(SIGTERM, RequestStop);
  std::signal(SIGINT, RequestStop);
  tether::Status st = server.Bind(FLAGS_listen);
  // What peers connect to: the bound endpoint, or for a wildcard bind
  // (which names no host a peer can reach) the advertised host's.
  std::string reachable;
  if (st.ok()) {
    reachable = tether::AdvertisedEndpoint(server.endpoint(), FLAGS_advertise_host);
    if (reachable != server.endpoint())
      LOG(INFO) << "[server " << FLAGS_shard << "] bound " << server.endpoint()
                << " (every interface); workers are told to connect to " << reachable
                << (FLAGS_advertise_host.empty() ? " (this machine's hostname; set --advertise_host to change it)"
                                                 : " (--advertise_host)");
  }
  if (st.ok() && !FLAGS_port_file.empty()) st = tether::WriteFileAtomically(FLAGS_port_file, reachable + "\n");
  if (st.ok() && g_signal.load() == 0) st = server.Run();
  if (st.ok() && metrics_log != nullptr) st = metrics_log->Flush();
  g_server.store(nullptr);
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
