#include "telemetry/metrics_endpoint.h"

#include <sys/socket.h>

#include <httplib.h>

#include "telemetry/prometheus.h"

namespace tether {

StatusOr<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::Start(const std::string& host, int port,
                                                                  Render render) {
  if (host.empty()) return Status::InvalidArgument("metrics endpoint: empty host");
  if (port < 0 || port > 65535)
    return Status::InvalidArgument("metrics endpoint: port " + std::to_string(port) + " outside [0, 65535]");
  std::unique_ptr<MetricsEndpoint> ep(new MetricsEndpoint());
  ep->host_ = host;
  ep->render_ = std::move(render);
  ep->server_ = std::make_unique<httplib::Server>();
  httplib::Server& s = *ep->server_;
  s.new_task_queue = [] { return new httplib::ThreadPool(2); };
  s.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  s.set_keep_alive_timeout(2);
  s.set_read_timeout(5);
  s.set_write_timeout(5);
  MetricsEndpoint* self = ep.get();
  s.Get("/metrics", [self](const httplib::Request&, httplib::Response& res) {
    self->scrapes_.fetch_add(1);
    res.set_content(self->render_(), kPrometheusContentType);
  });
  s.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("Tether metrics: see /metrics (Prometheus text format 0.0.4)\n", "text/plain; charset=utf-8");
  });
  if (port == 0) {
    ep->port_ = s.bind_to_any_port(host);
    if (ep->port_ <= 0)
      return Status::IOError("metrics endpoint: cannot bind " + host + " on a free port (no such address?)");
  } else {
    const std::string shown = host.find(':') != std::string::npos ? "[" + host + "]" : host;
    if (!s.bind_to_port(host, port))
      return Status::IOError("metrics endpoint: cannot bind " + shown + ":" + std::to_string(port) +
                             " (port taken, or no such address)");
    ep->port_ = port;
  }
  // Bound already: connections made before the accept loop starts wait in
  // the listen backlog.
  ep->thread_ = std::thread([self] {
    self->server_->listen_after_bind();
    std::lock_guard<std::mutex> lock(self->mu_);
    self->listening_done_ = true;
    self->done_cv_.notify_all();
  });
  return ep;
}

MetricsEndpoint::~MetricsEndpoint() {
  if (!thread_.joinable()) return;
  // stop() does nothing until the accept loop runs (cpp-httplib 0.11), so a
  // stop right after Start() is repeated until the loop has ended.
  std::unique_lock<std::mutex> lock(mu_);
  while (!listening_done_) {
    server_->stop();
    done_cv_.wait_for(lock, std::chrono::milliseconds(10));
  }
  lock.unlock();
  thread_.join();
}

std::string MetricsEndpoint::url() const {
  const bool v6 = host_.find(':') != std::string::npos;
  return "http://" + (v6 ? "[" + host_ + "]" : host_) + ":" + std::to_string(port_) + "/metrics";
}

}  // namespace tether
