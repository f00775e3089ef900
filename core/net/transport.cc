#include "core/net/transport.h"

namespace tether {

StatusOr<zmq::socket_t> BindRouter(zmq::context_t& ctx, const std::string& endpoint,
                                   const SocketOptions& opts, std::string* bound) {
  try {
    zmq::socket_t s(ctx, zmq::socket_type::router);
    s.set(zmq::sockopt::router_mandatory, 1);
    s.set(zmq::sockopt::sndhwm, opts.send_hwm);
    s.set(zmq::sockopt::rcvhwm, opts.recv_hwm);
    s.set(zmq::sockopt::sndtimeo, opts.send_timeout_ms);
    s.set(zmq::sockopt::linger, 0);
    s.bind(endpoint);
    *bound = s.get(zmq::sockopt::last_endpoint);
    return s;
  } catch (const zmq::error_t& e) {
    return Status::IOError("cannot bind " + endpoint + ": " + e.what());
  }
}

StatusOr<zmq::socket_t> ConnectDealer(zmq::context_t& ctx, const std::string& endpoint,
                                      const std::string& identity, const SocketOptions& opts) {
  try {
    zmq::socket_t s(ctx, zmq::socket_type::dealer);
    s.set(zmq::sockopt::routing_id, identity);
    s.set(zmq::sockopt::sndhwm, opts.send_hwm);
    s.set(zmq::sockopt::rcvhwm, opts.recv_hwm);
    s.set(zmq::sockopt::sndtimeo, opts.send_timeout_ms);
    s.set(zmq::sockopt::linger, 0);
    s.connect(endpoint);
    return s;
  } catch (const zmq::error_t& e) {
    return Status::InvalidArgument("cannot connect to server " + endpoint + ": " + e.what());
  }
}

}  // namespace tether
