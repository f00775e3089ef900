#include "cli/metrics_flags.h"

#include <gflags/gflags.h>
#include <glog/logging.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <thread>
#include <utility>

#include "core/file_util.h"
#include "telemetry/sd_file.h"

DEFINE_int32(metrics_port, -1,
             "serve /metrics (Prometheus text format) on this TCP port; 0: a free port (logged, and written to "
             "--metrics_port_file); -1: no endpoint. tether-launch: the base port (server i gets BASE+i, worker "
             "r BASE+num_servers+r; 0: every process a free port)");
DEFINE_string(metrics_host, "127.0.0.1",
              "address the /metrics endpoint binds (0.0.0.0 or :: for every interface, so a Prometheus on "
              "another host can scrape it; the page is read-only)");
DEFINE_string(metrics_port_file, "", "if set, \"HOST:PORT\" of the /metrics endpoint is written here once serving");
DEFINE_string(metrics_sd_file, "",
              "if set, a Prometheus file_sd target file ([{\"targets\": [\"HOST:PORT\"], \"labels\": {...}}]) "
              "for this process is written here once serving, and withdrawn at exit (removed; through a link, "
              "the link's target emptied to [] and the link kept)");
DEFINE_int32(metrics_linger_s, 15,
             "after training ends, keep serving the final values this many seconds so a scrape does not miss "
             "a short job (15: one scrape at Prometheus's common 15 s interval); 0: exit at once; a stop "
             "signal cuts it short");

namespace tether {

StatusOr<std::unique_ptr<MetricsEndpoint>> StartMetricsEndpointFromFlags(const std::string& who,
                                                                         const MetricsTarget& target,
                                                                         MetricsEndpoint::Render render,
                                                                         const std::vector<NamedInput>& inputs) {
  if (FLAGS_metrics_port < -1 || FLAGS_metrics_port > 65535)
    return Status::InvalidArgument("flag --metrics_port=" + std::to_string(FLAGS_metrics_port) +
                                   " outside [-1, 65535] (-1: no endpoint, 0: a free port)");
  if (FLAGS_metrics_linger_s < 0)
    return Status::InvalidArgument("flag --metrics_linger_s=" + std::to_string(FLAGS_metrics_linger_s) +
                                   " is negative (0: exit at once)");
  if (FLAGS_metrics_port < 0) {
    for (const char* flag : {"metrics_port_file", "metrics_sd_file"})
      if (!gflags::GetCommandLineFlagInfoOrDie(flag).is_default)
        return Status::InvalidArgument(std::string("flag --") + flag + " needs --metrics_port (0: a free port)");
    return std::unique_ptr<MetricsEndpoint>();
  }
  // Before the endpoint binds: a path that cannot take the file is refused
  // at start, never found once the process serves.
  if (!FLAGS_metrics_sd_file.empty()) TETHER_RETURN_IF_ERROR(CheckSdFile(FLAGS_metrics_sd_file, inputs));
  const PrometheusLabels labels = {
      {"tether_job", target.job}, {"role", target.role}, {target.index_name, std::to_string(target.index)}};
  TETHER_ASSIGN_OR_RETURN(auto ep, MetricsEndpoint::Start(FLAGS_metrics_host, FLAGS_metrics_port, std::move(render),
                                                          EndpointLimits{}, labels));
  const bool v6 = FLAGS_metrics_host.find(':') != std::string::npos;
  const std::string host_port =
      (v6 ? "[" + FLAGS_metrics_host + "]" : FLAGS_metrics_host) + ":" + std::to_string(ep->port());
  LOG(INFO) << who << "serving Prometheus metrics on " << ep->url() << " (lingering " << FLAGS_metrics_linger_s
            << " s after training)";
  if (!FLAGS_metrics_port_file.empty())
    TETHER_RETURN_IF_ERROR(WriteFileAtomically(FLAGS_metrics_port_file, host_port + "\n"));
  if (!FLAGS_metrics_sd_file.empty()) {
    const nlohmann::json sd = nlohmann::json::array(
        {{{"targets", {host_port}},
          {"labels", {{"tether_job", target.job}, {"role", target.role},
                      {target.index_name, std::to_string(target.index)}}}}});
    TETHER_RETURN_IF_ERROR(WriteSdFile(FLAGS_metrics_sd_file, sd.dump(2) + "\n"));
  }
  return ep;
}

void LingerForScrapes(const std::string& who, const MetricsEndpoint* endpoint, const std::atomic<int>& signal) {
  if (endpoint == nullptr) return;
  if (FLAGS_metrics_linger_s > 0 && signal.load() == 0) {
    LOG(INFO) << who << "training over: serving the final metrics on " << endpoint->url() << " for "
              << FLAGS_metrics_linger_s << " s (--metrics_linger_s; a stop signal ends it)";
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(FLAGS_metrics_linger_s);
    // The stop handlers only set an atomic (async-signal-safe), so it is
    // looked at every 100 ms: a signal ends the linger within that.
    while (signal.load() == 0 && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    LOG(INFO) << who << "metrics endpoint closing after " << endpoint->scrapes() << " scrape(s)";
  }
}

MetricsTargetWithdrawal::MetricsTargetWithdrawal(std::string who, const MetricsEndpoint* endpoint)
    : who_(std::move(who)), path_(endpoint == nullptr ? std::string() : FLAGS_metrics_sd_file) {}

MetricsTargetWithdrawal::~MetricsTargetWithdrawal() {
  if (path_.empty()) return;
  if (Status st = WithdrawSdFile(path_); !st.ok())
    LOG(WARNING) << who_ << "could not withdraw the target: " << st.message();
}

}  // namespace tether
