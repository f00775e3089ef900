// MetricsEndpoint: a small HTTP server (cpp-httplib, Debian's
// libcpp-httplib-dev) that answers GET /metrics with the Prometheus text
// format (telemetry/prometheus.h) for `tether-server` and `tether-worker`
// (--metrics_port; docs/OPERATIONS.md lists every metric).
//
// What it serves: GET /metrics → 200 with render()'s text and Content-Type
// kPrometheusContentType; GET / → 200 with a line pointing at /metrics;
// anything else → 404. Read-only: no request changes the process.
//
// Threads and cost: the server runs on its own thread with a pool of two
// request threads (a scraper keeping its connection alive holds one, so a
// second scraper or a curl is not queued behind it). render() runs on a
// request thread, per scrape, never on the training thread: it must be
// thread-safe and should only copy a published snapshot (PublishedSnapshot,
// telemetry/prometheus.h) and format it, so the training loop pays one
// uncontended mutex and a struct copy per publish, nothing per scrape.
//
// Ownership and thread-safety: the endpoint owns its thread and socket;
// destruction stops it (waits for a request in progress to finish) and
// closes the port. port(), url() and scrapes() are thread-safe.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "core/status.h"

namespace httplib {
class Server;
}  // namespace httplib

namespace tether {

class MetricsEndpoint {
 public:
  using Render = std::function<std::string()>;

  /// Binds `host` (an IPv4 or IPv6 address, or a host name; "0.0.0.0" for
  /// every interface) on `port` (0: a free port, read back with port()) and
  /// serves until destroyed. The socket is bound with SO_REUSEADDR only (not
  /// SO_REUSEPORT, cpp-httplib's default), so a port already taken by
  /// another process is an error instead of a silently shared port.
  /// Errors: InvalidArgument (port outside [0, 65535], empty host),
  /// IOError naming host:port when the bind fails (taken, no such address).
  static StatusOr<std::unique_ptr<MetricsEndpoint>> Start(const std::string& host, int port, Render render);
  ~MetricsEndpoint();
  MetricsEndpoint(const MetricsEndpoint&) = delete;
  MetricsEndpoint& operator=(const MetricsEndpoint&) = delete;

  /// The bound port (the real one when 0 was asked for).
  int port() const { return port_; }
  /// http://HOST:PORT/metrics (an IPv6 host in brackets).
  std::string url() const;
  /// /metrics requests answered so far.
  uint64_t scrapes() const { return scrapes_.load(); }

 private:
  MetricsEndpoint() = default;

  std::string host_;
  int port_ = 0;
  Render render_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable done_cv_;
  bool listening_done_ = false;  // the accept loop has returned (guarded by mu_)
  std::atomic<uint64_t> scrapes_{0};
};

}  // namespace tether
