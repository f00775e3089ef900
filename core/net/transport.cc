#include "core/net/transport.h"

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

}  // namespace

StatusOr<zmq::socket_t> BindRouter(zmq::context_t& ctx, const std::string& endpoint,
                                   const SocketOptions& opts, std::string* bound) {
  TETHER_RETURN_IF_ERROR(CheckTcpPort(endpoint));
  try {
    zmq::socket_t s(ctx, zmq::socket_type::router);
    s.set(zmq::sockopt::router_mandatory, 1);
    s.set(zmq::sockopt::sndhwm, opts.send_hwm);
    s.set(zmq::sockopt::rcvhwm, opts.recv_hwm);
    s.set(zmq::sockopt::sndtimeo, opts.send_timeout_ms);
    s.set(zmq::sockopt::linger, 0);
    if (opts.heartbeat_ivl_ms > 0) {
      s.set(zmq::sockopt::heartbeat_ivl, opts.heartbeat_ivl_ms);
      s.set(zmq::sockopt::heartbeat_timeout, opts.heartbeat_timeout_ms);
    }
    s.bind(endpoint);
    *bound = s.get(zmq::sockopt::last_endpoint);
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
    s.set(zmq::sockopt::sndhwm, opts.send_hwm);
    s.set(zmq::sockopt::rcvhwm, opts.recv_hwm);
    s.set(zmq::sockopt::sndtimeo, opts.send_timeout_ms);
    s.set(zmq::sockopt::linger, 0);
    if (opts.heartbeat_ivl_ms > 0) {
      s.set(zmq::sockopt::heartbeat_ivl, opts.heartbeat_ivl_ms);
      s.set(zmq::sockopt::heartbeat_timeout, opts.heartbeat_timeout_ms);
    }
    if (!opts.monitor_endpoint.empty() &&
        zmq_socket_monitor(s.handle(), opts.monitor_endpoint.c_str(),
                           ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_DISCONNECTED) != 0)
      throw zmq::error_t();
    s.connect(endpoint);
    return s;
  } catch (const zmq::error_t& e) {
    return Status::InvalidArgument("cannot connect to server " + endpoint + ": " + e.what());
  }
}

}  // namespace tether
