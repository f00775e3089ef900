#include "core/net/transport.h"

#include <arpa/inet.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "core/wire_limits.h"

namespace tether {

namespace {

// ZeroMQ takes a TCP port modulo 2^16 ("tcp://h:99999" binds port 34463):
// a port outside [0, 65535] is refused here instead, naming it.
Status CheckTcpPort(const std::string& endpoint) {
  if (endpoint.rfind("tcp://", 0) != 0) return Status::OK();
  const size_t colon = endpoint.rfind(':');
  if (colon == std::string::npos || colon < 6) return Status::OK();
  const std::string port = endpoint.substr(colon + 1);
  if (port.empty() || port == "*" || port.find_first_not_of("0123456789") != std::string::npos) return Status::OK();
  if (port.size() > 5 || std::stoul(port) > 65535)
    return Status::InvalidArgument("endpoint " + endpoint + ": port " + port + " outside [0, 65535]");
  return Status::OK();
}

// "tcp://HOST:PORT" → {HOST as written (brackets kept), PORT}; false when
// the endpoint is not of that shape.
bool SplitTcp(const std::string& endpoint, std::string* host, std::string* port) {
  if (endpoint.rfind("tcp://", 0) != 0) return false;
  const size_t colon = endpoint.rfind(':');
  if (colon == std::string::npos || colon < 6) return false;
  *host = endpoint.substr(6, colon - 6);
  *port = endpoint.substr(colon + 1);
  return !host->empty();
}

bool IsIpLiteral(const std::string& host) {
  in_addr a4{};
  in6_addr a6{};
  std::string h = host;
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  return inet_pton(AF_INET, h.c_str(), &a4) == 1 || inet_pton(AF_INET6, h.c_str(), &a6) == 1;
}

// The numeric addresses `name` resolves to, in the resolver's order, without
// repeats. Errors: IOError naming the name.
StatusOr<std::vector<std::string>> ResolveHost(const std::string& name) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (const int rc = getaddrinfo(name.c_str(), nullptr, &hints, &res); rc != 0)
    return Status::IOError("cannot resolve host " + name + ": " + gai_strerror(rc));
  std::vector<std::string> out;
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    char buf[INET6_ADDRSTRLEN] = {0};
    const void* addr = ai->ai_family == AF_INET6
                           ? static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(ai->ai_addr)->sin6_addr)
                           : static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(ai->ai_addr)->sin_addr);
    if ((ai->ai_family != AF_INET && ai->ai_family != AF_INET6) ||
        inet_ntop(ai->ai_family, addr, buf, sizeof(buf)) == nullptr)
      continue;
    if (std::find(out.begin(), out.end(), buf) == out.end()) out.push_back(buf);
  }
  freeaddrinfo(res);
  if (out.empty()) return Status::IOError("host " + name + " resolves to no IPv4 or IPv6 address");
  return out;
}

bool IsIpv4Literal(const std::string& host) {
  in_addr a4{};
  return inet_pton(AF_INET, host.c_str(), &a4) == 1;
}

// ZMQ_IPV6 for `endpoint`: on for IPv6 literals, "*" (then IPv6 and IPv4)
// and, to connect, host names (one with an IPv6 address is reached over
// IPv6, one with IPv4 only through a v4-mapped address); off for IPv4
// literals, which then bind and report as plain IPv4 ("tcp://127.0.0.1:P",
// not "tcp://[::ffff:127.0.0.1]:P"), and for ipc:// and inproc://.
bool WantsIpv6(const std::string& endpoint) {
  std::string host, port;
  if (!SplitTcp(endpoint, &host, &port)) return false;
  return !IsIpv4Literal(host);
}

int PortOf(const std::string& endpoint) {
  const size_t colon = endpoint.rfind(':');
  return colon == std::string::npos ? -1 : std::atoi(endpoint.c_str() + colon + 1);
}
bool IsInproc(const std::string& endpoint) { return endpoint.rfind("inproc://", 0) == 0; }

}  // namespace

std::string TcpEndpoint(const std::string& host, int port) {
  const bool v6 = host.find(':') != std::string::npos && host.front() != '[';
  return "tcp://" + (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

std::string EndpointHost(const std::string& endpoint) {
  std::string host, port;
  if (!SplitTcp(endpoint, &host, &port)) return "";
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  return host;
}

bool IsWildcardEndpoint(const std::string& endpoint) {
  const std::string host = EndpointHost(endpoint);
  return host == "*" || host == "0.0.0.0" || host == "::";
}

std::string AdvertisedEndpoint(const std::string& bound, const std::string& advertise_host) {
  if (!IsWildcardEndpoint(bound)) return bound;
  std::string host = advertise_host;
  if (host.empty()) {
    char name[256] = {0};
    if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return bound;
    host = name;
  }
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  return TcpEndpoint(host, PortOf(bound));
}

StatusOr<zmq::socket_t> BindRouter(zmq::context_t& ctx, const std::string& endpoint,
                                   const SocketOptions& opts, std::string* bound) {
  TETHER_RETURN_IF_ERROR(CheckTcpPort(endpoint));
  // A host name (not an address, not "*", not a network interface, which
  // ZeroMQ binds itself) is resolved here: ZeroMQ never looks names up for a
  // bind and would report "No such device".
  std::string host, port;
  std::vector<std::string> addresses;
  if (SplitTcp(endpoint, &host, &port) && host != "*" && !IsIpLiteral(host) &&
      if_nametoindex(host.c_str()) == 0) {
    TETHER_ASSIGN_OR_RETURN(addresses, ResolveHost(host));
  }
  try {
    zmq::socket_t s(ctx, zmq::socket_type::router);
    s.set(zmq::sockopt::router_mandatory, 1);
    // Per listener (ZeroMQ copies a socket's options when it binds): every
    // frame of every accepted connection, during the handshake too.
    s.set(zmq::sockopt::maxmsgsize, opts.max_frame_bytes > 0
                                        ? opts.max_frame_bytes
                                        : static_cast<int64_t>(kListenerFrameBytes + kListenerFrameSlackBytes));
    s.set(zmq::sockopt::handshake_ivl, opts.handshake_timeout_ms);
    s.set(zmq::sockopt::sndhwm, opts.send_hwm);
    s.set(zmq::sockopt::rcvhwm, opts.recv_hwm);
    s.set(zmq::sockopt::sndtimeo, opts.send_timeout_ms);
    s.set(zmq::sockopt::linger, 0);
    if (opts.heartbeat_ivl_ms > 0) {
      s.set(zmq::sockopt::heartbeat_ivl, opts.heartbeat_ivl_ms);
      s.set(zmq::sockopt::heartbeat_timeout, opts.heartbeat_timeout_ms);
    }
    if (opts.curve.enabled() && !IsInproc(endpoint)) {
      s.set(zmq::sockopt::zap_domain, kCurveZapDomain);
      s.set(zmq::sockopt::curve_server, 1);
      s.set(zmq::sockopt::curve_secretkey, opts.curve.secret_key);
    }
    if (!opts.monitor_endpoint.empty() &&
        zmq_socket_monitor(s.handle(), opts.monitor_endpoint.c_str(), opts.monitor_events) != 0)
      throw zmq::error_t();
    if (addresses.empty()) {
      // An interface name ("eth0") binds its IPv4 address, as before.
      s.set(zmq::sockopt::ipv6, WantsIpv6(endpoint) && (host == "*" || IsIpLiteral(host)) ? 1 : 0);
      s.bind(endpoint);
      *bound = s.get(zmq::sockopt::last_endpoint);
      return s;
    }
    // One port for every address of the name: the first bind picks it (port
    // 0), the others take the same, so any of them reaches this socket.
    int bound_port = -1;
    std::string tried;
    for (const std::string& addr : addresses) {
      const std::string ep = TcpEndpoint(addr, bound_port >= 0 ? bound_port : std::atoi(port.c_str()));
      try {
        s.set(zmq::sockopt::ipv6, WantsIpv6(ep) ? 1 : 0);
        s.bind(ep);
        if (bound_port < 0) bound_port = PortOf(s.get(zmq::sockopt::last_endpoint));
      } catch (const zmq::error_t& e) {
        tried += (tried.empty() ? "" : "; ") + ep + ": " + e.what();
        if (bound_port >= 0)
          LOG(WARNING) << "bind " << endpoint << ": " << host << " also resolves to " << addr
                       << ", which cannot be bound on port " << bound_port << " (" << e.what()
                       << "); peers that resolve the name to it cannot connect";
      }
    }
    if (bound_port < 0) return Status::IOError("cannot bind " + endpoint + " (" + tried + ")");
    *bound = TcpEndpoint(host, bound_port);
    return s;
  } catch (const zmq::error_t& e) {
    return Status::IOError("cannot bind " + endpoint + ": " + e.what());
  }
}

StatusOr<zmq::socket_t> ConnectDealer(zmq::context_t& ctx, const std::string& endpoint,
                                      const std::string& identity, const SocketOptions& opts) {
  TETHER_RETURN_IF_ERROR(CheckTcpPort(endpoint));
  try {
    zmq::socket_t s(ctx, zmq::socket_type::dealer);
    s.set(zmq::sockopt::routing_id, identity);
    // A reply's frames are at most kMaxFrameBytes: whatever answers at the
    // endpoint (a rendezvous entry may be false) cannot make this process
    // buffer more.
    s.set(zmq::sockopt::maxmsgsize, opts.max_frame_bytes > 0
                                        ? opts.max_frame_bytes
                                        : static_cast<int64_t>(kMaxFrameBytes + kMaxHeaderBytes));
    s.set(zmq::sockopt::sndhwm, opts.send_hwm);
    s.set(zmq::sockopt::rcvhwm, opts.recv_hwm);
    s.set(zmq::sockopt::sndtimeo, opts.send_timeout_ms);
    s.set(zmq::sockopt::linger, 0);
    s.set(zmq::sockopt::ipv6, WantsIpv6(endpoint) ? 1 : 0);
    // A peer that accepts the connection and never completes the greeting
    // (not a ZMTP peer: a web server on a wrong port) is closed within this,
    // where the caller asks for it, not ZeroMQ's default 30 s.
    if (opts.connect_handshake_timeout_ms > 0)
      s.set(zmq::sockopt::handshake_ivl, opts.connect_handshake_timeout_ms);
    if (opts.heartbeat_ivl_ms > 0) {
      s.set(zmq::sockopt::heartbeat_ivl, opts.heartbeat_ivl_ms);
      s.set(zmq::sockopt::heartbeat_timeout, opts.heartbeat_timeout_ms);
    }
    if (opts.curve.enabled() && !IsInproc(endpoint)) {
      try {
        s.set(zmq::sockopt::curve_serverkey, opts.curve.server_public_key);
        s.set(zmq::sockopt::curve_publickey, opts.curve.public_key);
        s.set(zmq::sockopt::curve_secretkey, opts.curve.secret_key);
      } catch (const zmq::error_t& e) {
        return Status::InvalidArgument("cannot connect to server " + endpoint +
                                       ": a CURVE key is not 40 characters of Z85: " + e.what());
      }
    }
    if (!opts.monitor_endpoint.empty() &&
        zmq_socket_monitor(s.handle(), opts.monitor_endpoint.c_str(), opts.monitor_events) != 0)
      throw zmq::error_t();
    s.connect(endpoint);
    return s;
  } catch (const zmq::error_t& e) {
    return Status::InvalidArgument("cannot connect to server " + endpoint + ": " + e.what());
  }
}

Status ReconnectDealer(zmq::socket_t& socket, const std::string& from, const std::string& to) {
  try {
    socket.disconnect(from);
  } catch (const zmq::error_t&) {
    // Not connected there (ENOENT): nothing to undo.
  }
  try {
    socket.set(zmq::sockopt::ipv6, WantsIpv6(to) ? 1 : 0);
    socket.connect(to);
  } catch (const zmq::error_t& e) {
    return Status::InvalidArgument("cannot connect to server " + to + ": " + e.what());
  }
  return Status::OK();
}

bool EndpointAnswers(const std::string& endpoint, int timeout_ms) {
  try {
    zmq::context_t ctx;
    SocketOptions opts;
    opts.monitor_endpoint = "inproc://tether-probe";
    opts.monitor_events = ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                          ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |
                          ZMQ_EVENT_CONNECT_RETRIED;
    zmq::socket_t monitor(ctx, zmq::socket_type::pair);
    monitor.set(zmq::sockopt::linger, 0);
    monitor.connect(opts.monitor_endpoint);
    StatusOr<zmq::socket_t> probe = ConnectDealer(ctx, endpoint, "tether-probe", opts);
    if (!probe.ok()) return false;
    zmq::pollitem_t items[] = {{monitor.handle(), 0, ZMQ_POLLIN, 0}};
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (std::chrono::steady_clock::now() < deadline) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (zmq::poll(items, 1, std::max(left, std::chrono::milliseconds(1))) <= 0) continue;
      zmq::message_t event, address;
      if (!monitor.recv(event, zmq::recv_flags::dontwait)) continue;
      if (event.more()) (void)monitor.recv(address, zmq::recv_flags::dontwait);
      uint16_t id = 0;
      if (event.size() >= 2) std::memcpy(&id, event.data(), 2);
      // A NO_DETAIL failure is also what a plain TCP server that closes the
      // connection gives: only the others prove a ZeroMQ peer.
      if (id == ZMQ_EVENT_HANDSHAKE_SUCCEEDED || id == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL ||
          id == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)
        return true;
      if (id == ZMQ_EVENT_CONNECT_RETRIED) return false;  // refused: nothing listens there
    }
  } catch (const zmq::error_t&) {
  }
  return false;
}

}  // namespace tether
