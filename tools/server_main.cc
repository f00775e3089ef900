// tether-server: one parameter-server shard.
#include <gflags/gflags.h>
#include <glog/logging.h>

#include "core/config.h"
#include "core/file_util.h"
#include "core/metrics_log.h"
#include "server/server.h"
#include "server/shard_metrics.h"
#include "tools/common_flags.h"

DEFINE_int32(shard, 0, "this server's shard index in [0, num_servers)");
DEFINE_string(listen, "tcp://127.0.0.1:0", "ZeroMQ endpoint to bind; port 0 picks a free port");
DEFINE_string(port_file, "", "if set, the bound endpoint is written here (atomically) once listening");
DEFINE_string(resume_from, "",
              "the checkpoint to load rows from, as this host sees it (default: the path worker 0 resumes "
              "from, sent at HELLO)");

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
  tether::Status st = server.Bind(FLAGS_listen);
  if (st.ok() && !FLAGS_port_file.empty()) st = tether::WriteFileAtomically(FLAGS_port_file, server.endpoint() + "\n");
  if (st.ok()) st = server.Run();
  if (st.ok() && metrics_log != nullptr) st = metrics_log->Flush();
  if (!st.ok()) {
    // The shard's own errors already carry its "[server N] " prefix.
    const std::string prefix = "[server " + std::to_string(FLAGS_shard) + "] ";
    LOG(ERROR) << (st.message().rfind(prefix, 0) == 0 ? "" : prefix) << st.message();
    return 1;
  }
  return 0;
}
