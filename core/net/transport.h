// ZeroMQ socket set-up for Tether: the one place that turns zmq::error_t into
// Status and sets the options that keep updates from being dropped.
//
// Servers bind one ROUTER socket; each worker connects one DEALER socket per
// shard. Sockets are not thread-safe: each is used by the thread that made it.
#pragma once

#include <string>

#include <zmq.hpp>

#include "core/status.h"

namespace tether {

struct SocketOptions {
  int send_hwm = 1000;         // messages queued per peer before a send blocks
  int recv_hwm = 1000;
  int send_timeout_ms = 60000; // a blocked send fails after this (never drops)
  // ZMTP heartbeats (libzmq ≥ 4.2): a PING every heartbeat_ivl_ms on each
  // connection; a connection with no traffic for heartbeat_timeout_ms after
  // it is closed (a vanished host). 0: none. Answered by ZeroMQ's I/O
  // thread, so a busy peer event loop still answers them. On a ROUTER they
  // apply to every accepted connection.
  int heartbeat_ivl_ms = 0;
  int heartbeat_timeout_ms = 0;
  // DEALER only. When set, connection events (ZMQ_EVENT_HANDSHAKE_SUCCEEDED:
  // a ZMTP peer answered, not merely a TCP connect, which a stopped
  // process's kernel still accepts; ZMQ_EVENT_DISCONNECTED) are published
  // on this inproc:// endpoint (zmq_socket_monitor) from before the
  // connect, so none is missed.
  std::string monitor_endpoint;
};

/// Binds a ROUTER socket to `endpoint` ("tcp://127.0.0.1:0" picks a free
/// port) and writes the endpoint actually bound to `*bound`. ROUTER_MANDATORY
/// is set so that a reply to a vanished peer is an error, not a silent drop.
/// Errors: IOError naming the endpoint.
StatusOr<zmq::socket_t> BindRouter(zmq::context_t& ctx, const std::string& endpoint,
                                   const SocketOptions& opts, std::string* bound);

/// Connects a DEALER socket with routing identity `identity` to `endpoint`.
/// Errors: InvalidArgument for a malformed endpoint, naming it.
StatusOr<zmq::socket_t> ConnectDealer(zmq::context_t& ctx, const std::string& endpoint,
                                      const std::string& identity, const SocketOptions& opts);

}  // namespace tether
