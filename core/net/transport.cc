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

bool IsInproc(const std::string& endpoint) { return endpoint.rfind("inproc://", 0) == 0; }

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
    if (opts.curve.enabled() && !IsInproc(endpoint)) {
      s.set(zmq::sockopt::zap_domain, kCurveZapDomain);
      s.set(zmq::sockopt::curve_server, 1);
      s.set(zmq::sockopt::curve_secretkey, opts.curve.secret_key);
    }
    if (!opts.monitor_endpoint.empty() &&
        zmq_socket_monitor(s.handle(), opts.monitor_endpoint.c_str(), opts.monitor_events) != 0)
      throw zmq::error_t();
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

}  // namespace tether
