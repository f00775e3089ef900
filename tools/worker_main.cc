// tether-worker: one trainer of the job.
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <atomic>
#include <csignal>
#include <sstream>

#include "tools/common_flags.h"
#include "worker/trainer.h"

DEFINE_int32(rank, 0, "this worker's rank in [0, num_workers)");
DEFINE_string(server_addresses, "",
              "comma-separated server endpoints in shard order (tcp://HOST:PORT,...); "
              "default: cluster.server_addresses from the config");
DEFINE_string(metrics_out, "", "rank 0: write the final metrics JSON here");

namespace {
// SIGTERM/SIGINT ask the worker to leave gracefully: it finishes the current
// minibatch, says BYE (the servers stop counting it at once) and exits 0.
std::atomic<bool> g_stop{false};
void RequestStop(int) { g_stop.store(true); }
}  // namespace

int main(int argc, char** argv) {
  tether::ParseFlagsOrDie(&argc, &argv,
                          "tether-worker --config=JOB.pbtxt --rank=R --server_addresses=tcp://H:P,... "
                          "[--metrics_out=FILE]");
  const std::string who = "[worker " + std::to_string(FLAGS_rank) + "] ";
  auto config = tether::LoadConfigFromFlags("worker " + std::to_string(FLAGS_rank));
  if (!config.ok()) {
    LOG(ERROR) << who << config.status().message();
    return 2;
  }
  if (FLAGS_rank < 0 || FLAGS_rank >= config->cluster().num_workers()) {
    LOG(ERROR) << who << "flag --rank=" << FLAGS_rank << " outside [0, " << config->cluster().num_workers()
               << ") (cluster.num_workers)";
    return 2;
  }
  tether::TrainerOptions options;
  options.rank = FLAGS_rank;
  options.metrics_out = FLAGS_metrics_out;
  if (!FLAGS_server_addresses.empty()) {
    std::stringstream ss(FLAGS_server_addresses);
    std::string ep;
    while (std::getline(ss, ep, ',')) options.servers.push_back(ep);
  } else {
    options.servers.assign(config->cluster().server_addresses().begin(), config->cluster().server_addresses().end());
  }
  if (static_cast<int>(options.servers.size()) != config->cluster().num_servers()) {
    LOG(ERROR) << who << "flag --server_addresses has " << options.servers.size()
               << " endpoint(s) but cluster.num_servers is " << config->cluster().num_servers();
    return 2;
  }
  std::signal(SIGTERM, RequestStop);
  std::signal(SIGINT, RequestStop);
  options.stop_requested = [] { return g_stop.load(); };
  auto report = tether::RunWorker(*config, options);
  if (!report.ok()) {
    LOG(ERROR) << who << report.status().message();
    return 1;
  }
  if (report->left_early) LOG(WARNING) << who << "left the job before the end of training (stop requested)";
  return 0;
}
