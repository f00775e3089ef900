// MetricsEndpoint: the HTTP side of /metrics for `tether-server` and
// `tether-worker` (--metrics_port; docs/METRICS.md lists every metric),
// served by GNU libmicrohttpd (Debian's libmicrohttpd-dev) from one event
// thread: no thread per client, so a slow client holds no thread.
//
// What it serves: GET (or HEAD) /metrics → 200 with render()'s text, the
// Prometheus text format (telemetry/prometheus.h), followed by the
// process's peer-limit families (tether_peers_dropped_total,
// tether_connections_open; core/peer_limits.h). Anything else is refused
// before any request body is read: another method → 405 (Allow: GET, HEAD),
// another path → 404, too many headers → 431. The answer is always the whole
// page (Range is ignored: no 206, no multipart). Read-only: no request
// changes the process.
//
// Bounds (EndpointLimits; a client past one is dropped and counted in
// tether_peers_dropped_total{listener="metrics",reason=...}, the process
// goes on):
//   connections      32 open at once, 8 from one address; each also takes
//                    a descriptor from the process's ConnectionBudget
//   request head     8 KiB (request line and headers; MHD answers 431 or
//                    414 past it), at most 64 header lines
//   time             5 s without a byte from the client, 10 s in all per
//                    connection (a scraper's takes milliseconds)
//   body             none is read: a request with one gets 405 and the
//                    connection is closed
// render() runs on the endpoint's thread, per scrape, never on the training
// thread: it must be thread-safe and should only copy a published snapshot
// (PublishedSnapshot, telemetry/prometheus.h).
//
// Ownership and thread-safety: the endpoint owns its event thread, its
// watchdog thread and its socket; destruction stops both within about
// 250 ms, whatever clients do, and closes the port. port(), url() and
// scrapes() are thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "core/status.h"
#include "telemetry/prometheus.h"

namespace tether {

struct EndpointLimits {
  int max_connections = 32;
  int max_connections_per_address = 8;
  size_t max_head_bytes = 8 << 10;
  int max_headers = 64;
  int idle_timeout_s = 5;
  int connection_lifetime_ms = 10000;
};

class MetricsEndpoint {
 public:
  using Render = std::function<std::string()>;

  /// Binds `host` (an IPv4 or IPv6 address, or a host name; "0.0.0.0" for
  /// every interface) on `port` (0: a free port, read back with port()) and
  /// serves until destroyed. The socket is bound with SO_REUSEADDR only (not
  /// SO_REUSEPORT), so a port already taken by another process is an error
  /// instead of a silently shared port.
  /// Errors: InvalidArgument (port outside [0, 65535], empty host, a limit
  /// below 1), IOError naming host:port when the bind fails (taken, no such
  /// address) or the server cannot start.
  /// `labels` (tether_job, role, shard or rank) go on the peer-limit
  /// families the endpoint adds to the page.
  static StatusOr<std::unique_ptr<MetricsEndpoint>> Start(const std::string& host, int port, Render render,
                                                          const EndpointLimits& limits = EndpointLimits{},
                                                          const PrometheusLabels& labels = {});
  ~MetricsEndpoint();
  MetricsEndpoint(const MetricsEndpoint&) = delete;
  MetricsEndpoint& operator=(const MetricsEndpoint&) = delete;

  /// The bound port (the real one when 0 was asked for).
  int port() const { return port_; }
  /// http://HOST:PORT/metrics (an IPv6 host in brackets).
  std::string url() const;
  /// /metrics requests answered so far.
  uint64_t scrapes() const;
  /// Connections open now.
  int open_connections() const;

  struct Impl;

 private:
  MetricsEndpoint() = default;
  std::string host_;
  int port_ = 0;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tether
