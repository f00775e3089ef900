#include "telemetry/metrics_endpoint.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "core/peer_limits.h"
#include "telemetry/prometheus.h"

namespace tether {

namespace {

constexpr char kListener[] = "metrics";
using SteadyClock = std::chrono::steady_clock;

// One client connection, from MHD's STARTED notice to its CLOSED one.
struct Conn {
  int fd = -1;
  std::string address;
  SteadyClock::time_point start;
  bool budgeted = false;   // took a descriptor from the process's budget
  bool answered = false;   // the handler saw a complete request head
  bool cut_off = false;    // the watchdog ended it (lifetime)
};

std::string AddressText(const struct sockaddr* sa) {
  char buf[INET6_ADDRSTRLEN] = {0};
  if (sa == nullptr) return "?";
  if (sa->sa_family == AF_INET)
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, buf, sizeof(buf));
  else if (sa->sa_family == AF_INET6)
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, buf, sizeof(buf));
  return buf[0] != '\0' ? buf : "?";
}

// The listening socket, bound here rather than by MHD so that a taken port
// is an error (SO_REUSEADDR only) and a host name resolves as elsewhere.
StatusOr<int> Listen(const std::string& host, int port, int backlog) {
  const std::string shown = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  const std::string where = port == 0 ? host + " on a free port" : shown + ":" + std::to_string(port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res) != 0 || res == nullptr)
    return Status::IOError("metrics endpoint: cannot bind " + where + " (no such address)");
  int fd = -1;
  for (addrinfo* ai = res; ai != nullptr && fd < 0; ai = ai->ai_next) {
    fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) continue;
    int yes = 1, no = 0;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    if (ai->ai_family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &no, sizeof(no));
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, backlog) != 0) {
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(res);
  if (fd < 0)
    return Status::IOError("metrics endpoint: cannot bind " + where +
                           (port == 0 ? " (no such address?)" : " (port taken, or no such address)"));
  return fd;
}

}  // namespace

struct MetricsEndpoint::Impl {
  EndpointLimits limits;
  PrometheusLabels labels;
  Render render;
  MHD_Daemon* daemon = nullptr;
  int listen_fd = -1;
  std::atomic<uint64_t> scrapes{0};

  // Guards conns, per_address and stop; MHD's event thread and the watchdog.
  mutable std::mutex mu;
  std::map<MHD_Connection*, Conn*> conns;
  std::map<std::string, int> per_address;
  bool stop = false;
  std::condition_variable stop_cv;
  std::thread watchdog;

  static MHD_Result Accept(void* cls, const struct sockaddr* addr, socklen_t) {
    auto* self = static_cast<Impl*>(cls);
    const std::string address = AddressText(addr);
    std::lock_guard<std::mutex> lock(self->mu);
    const char* reason = nullptr;
    if (static_cast<int>(self->conns.size()) >= self->limits.max_connections) reason = "connections_per_port";
    else if (self->per_address[address] >= self->limits.max_connections_per_address) reason = "connections_per_address";
    else if (!ConnectionBudget::Process().TryAcquire()) reason = "process_descriptors";
    if (reason == nullptr) return MHD_YES;
    CountPeerDrop(kListener, reason);
    return MHD_NO;
  }

  static void Notify(void* cls, MHD_Connection* c, void** socket_context, enum MHD_ConnectionNotificationCode code) {
    auto* self = static_cast<Impl*>(cls);
    std::lock_guard<std::mutex> lock(self->mu);
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
      auto* conn = new Conn();
      const MHD_ConnectionInfo* fd = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
      const MHD_ConnectionInfo* addr = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
      conn->fd = fd != nullptr ? fd->connect_fd : -1;
      conn->address = AddressText(addr != nullptr ? addr->client_addr : nullptr);
      conn->start = SteadyClock::now();
      conn->budgeted = true;  // Accept took it
      *socket_context = conn;
      self->conns[c] = conn;
      ++self->per_address[conn->address];
      return;
    }
    auto* conn = static_cast<Conn*>(*socket_context);
    if (conn == nullptr) return;
    // MHD calls this before it closes the descriptor: from here on the
    // watchdog no longer knows the connection.
    self->conns.erase(c);
    if (--self->per_address[conn->address] <= 0) self->per_address.erase(conn->address);
    if (conn->budgeted) ConnectionBudget::Process().Release();
    if (conn->cut_off) CountPeerDrop(kListener, "time");
    else if (!conn->answered) CountPeerDrop(kListener, "no_request");  // idle, garbage or a head past the limit
    delete conn;
    *socket_context = nullptr;
  }

  static MHD_Result Refuse(MHD_Connection* c, unsigned status, const std::string& body, const char* reason,
                           bool allow) {
    CountPeerDrop(kListener, reason);
    MHD_Response* r = MHD_create_response_from_buffer(body.size(), const_cast<char*>(body.data()), MHD_RESPMEM_MUST_COPY);
    if (r == nullptr) return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
    if (allow) MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
    const MHD_Result ok = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ok;
  }

  static MHD_Result Handle(void* cls, MHD_Connection* c, const char* url, const char* method, const char*,
                           const char*, size_t*, void** request_context) {
    auto* self = static_cast<Impl*>(cls);
    if (*request_context != nullptr) return MHD_NO;  // a second call: a body we refused to read
    *request_context = self;
    {
      std::lock_guard<std::mutex> lock(self->mu);
      auto it = self->conns.find(c);
      if (it != self->conns.end()) it->second->answered = true;
    }
    const std::string m = method;
    if (m != MHD_HTTP_METHOD_GET && m != MHD_HTTP_METHOD_HEAD)
      return Refuse(c, MHD_HTTP_METHOD_NOT_ALLOWED, "method " + m + " not allowed: GET /metrics\n", "method", true);
    if (MHD_get_connection_values(c, MHD_HEADER_KIND, nullptr, nullptr) > self->limits.max_headers)
      return Refuse(c, MHD_HTTP_REQUEST_HEADER_FIELDS_TOO_LARGE,
                    "more than " + std::to_string(self->limits.max_headers) + " header lines\n", "headers", false);
    if (std::strcmp(url, "/metrics") != 0)
      return Refuse(c, MHD_HTTP_NOT_FOUND, "Tether serves GET /metrics only (Prometheus text format 0.0.4)\n", "path",
                    false);
    self->scrapes.fetch_add(1);
    const std::string page = self->render() + PeerLimitsPage(self->labels);
    MHD_Response* r = MHD_create_response_from_buffer(page.size(), const_cast<char*>(page.data()), MHD_RESPMEM_MUST_COPY);
    if (r == nullptr) return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, kPrometheusContentType);
    const MHD_Result ok = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ok;
  }

  // The peer-limit families every page ends with.
  static std::string PeerLimitsPage(const PrometheusLabels& labels) {
    ExpositionWriter w;
    w.Family("tether_peers_dropped_total", ExpositionWriter::Type::kCounter,
             "Peers dropped at a bound of a listening socket (docs/SECURITY.md), by listener and bound.");
    for (const auto& [listener, reason, n] : PeerDrops()) {
      PrometheusLabels l = labels;
      l.emplace_back("listener", listener);
      l.emplace_back("reason", reason);
      w.Sample("tether_peers_dropped_total", l, static_cast<double>(n));
    }
    w.Gauge("tether_peer_connections", "Connections of peers open now, all listening sockets of the process.", labels,
            static_cast<double>(ConnectionBudget::Process().in_use()));
    return w.text();
  }

  // Ends connections past their lifetime: shutdown(2) makes MHD's next read
  // fail, and MHD closes the connection itself.
  void Watch() {
    std::unique_lock<std::mutex> lock(mu);
    while (!stop) {
      stop_cv.wait_for(lock, std::chrono::milliseconds(100));
      const auto now = SteadyClock::now();
      for (auto& [c, conn] : conns) {
        if (conn->cut_off || conn->fd < 0 ||
            now - conn->start < std::chrono::milliseconds(limits.connection_lifetime_ms))
          continue;
        conn->cut_off = true;
        shutdown(conn->fd, SHUT_RDWR);
      }
    }
  }
};

StatusOr<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::Start(const std::string& host, int port, Render render,
                                                                  const EndpointLimits& limits,
                                                                  const PrometheusLabels& labels) {
  if (host.empty()) return Status::InvalidArgument("metrics endpoint: empty host");
  if (port < 0 || port > 65535)
    return Status::InvalidArgument("metrics endpoint: port " + std::to_string(port) + " outside [0, 65535]");
  if (limits.max_connections < 1 || limits.max_connections_per_address < 1 || limits.max_head_bytes < 1024 ||
      limits.max_headers < 1 || limits.idle_timeout_s < 1 || limits.connection_lifetime_ms < 1)
    return Status::InvalidArgument("metrics endpoint: a limit below its minimum (connections and headers ≥ 1, head "
                                   "≥ 1024 bytes, times ≥ 1)");
  std::unique_ptr<MetricsEndpoint> ep(new MetricsEndpoint());
  ep->host_ = host;
  ep->impl_ = std::make_unique<Impl>();
  Impl* impl = ep->impl_.get();
  impl->limits = limits;
  impl->labels = labels;
  impl->render = std::move(render);
  TETHER_ASSIGN_OR_RETURN(impl->listen_fd, Listen(host, port, limits.max_connections));
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  getsockname(impl->listen_fd, reinterpret_cast<sockaddr*>(&bound), &len);
  ep->port_ = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                                : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  // MHD's memory pool per connection holds the request head and the
  // response's headers; twice the head limit leaves room for both.
  impl->daemon = MHD_start_daemon(
      MHD_USE_AUTO_INTERNAL_THREAD, 0, &Impl::Accept, impl, &Impl::Handle, impl, MHD_OPTION_LISTEN_SOCKET,
      impl->listen_fd, MHD_OPTION_CONNECTION_LIMIT, static_cast<unsigned>(2 * limits.max_connections),
      MHD_OPTION_CONNECTION_MEMORY_LIMIT, static_cast<size_t>(2 * limits.max_head_bytes),
      MHD_OPTION_CONNECTION_TIMEOUT, static_cast<unsigned>(limits.idle_timeout_s), MHD_OPTION_NOTIFY_CONNECTION,
      &Impl::Notify, impl, MHD_OPTION_END);
  if (impl->daemon == nullptr) {
    close(impl->listen_fd);
    return Status::IOError("metrics endpoint: cannot start the HTTP server on port " + std::to_string(ep->port_));
  }
  impl->watchdog = std::thread([impl] { impl->Watch(); });
  return ep;
}

MetricsEndpoint::~MetricsEndpoint() {
  if (impl_ == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stop = true;
  }
  impl_->stop_cv.notify_all();
  if (impl_->watchdog.joinable()) impl_->watchdog.join();
  // Closes every connection, whatever its client does, joins the event
  // thread and closes the listening socket (MHD closes a socket given by
  // MHD_OPTION_LISTEN_SOCKET itself).
  if (impl_->daemon != nullptr) MHD_stop_daemon(impl_->daemon);
}

std::string MetricsEndpoint::url() const {
  const bool v6 = host_.find(':') != std::string::npos;
  return "http://" + (v6 ? "[" + host_ + "]" : host_) + ":" + std::to_string(port_) + "/metrics";
}

uint64_t MetricsEndpoint::scrapes() const { return impl_->scrapes.load(); }

int MetricsEndpoint::open_connections() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return static_cast<int>(impl_->conns.size());
}

}  // namespace tether
