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

/// The ZAP domain of Tether's CURVE servers (ZMQ_ZAP_DOMAIN).
inline constexpr const char kCurveZapDomain[] = "tether";

/// CurveZMQ (RFC 26, libzmq's own CURVE): authentication and encryption of
/// every message on a tcp:// or ipc:// connection. Keys are Z85 text, 40
/// characters (32 bytes; core/net/curve.h reads them from key files). All
/// empty: CURVE off (plain ZMTP). inproc:// connections are never encrypted
/// (they never leave the process).
struct CurveOptions {
  /// This socket's key pair. A ROUTER with a secret key is a CURVE server:
  /// it accepts only CURVE clients, and only those the ZAP handler of its
  /// context admits (core/net/zap_handler.h; start it before BindRouter,
  /// since libzmq admits every client key while no handler is running).
  std::string secret_key;
  std::string public_key;  // DEALER: sent to the server, which checks it
  /// DEALER only: the server's public key. The connection fails unless the
  /// server holds the matching secret key.
  std::string server_public_key;
  bool enabled() const { return !secret_key.empty(); }
};

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
  // When set, connection events (ZMQ_EVENT_HANDSHAKE_SUCCEEDED:
  // a ZMTP peer answered, not merely a TCP connect, which a stopped
  // process's kernel still accepts; ZMQ_EVENT_DISCONNECTED) are published
  // on this inproc:// endpoint (zmq_socket_monitor) from before the
  // connect (or bind), so none is missed.
  std::string monitor_endpoint;
  /// The events published on monitor_endpoint (ZMQ_EVENT_* bits).
  /// RequestChannel adds the handshake failures
  /// (ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | _PROTOCOL | _AUTH) to say why a
  /// CURVE connection was refused.
  int monitor_events = ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_DISCONNECTED;
  /// CURVE keys (see CurveOptions); applied on tcp:// and ipc:// endpoints,
  /// ignored on inproc://. ROUTER: secret_key; DEALER: all three.
  CurveOptions curve;
  /// ZMQ_MAXMSGSIZE: the largest frame this socket takes from a peer; a
  /// peer that sends a larger one is disconnected by ZeroMQ before the frame
  /// is buffered. 0: the default for the socket's role: BindRouter
  /// kListenerFrameBytes + kListenerFrameSlackBytes (core/wire_limits.h; a
  /// server shard sets kShardFrameBytes + kListenerFrameSlackBytes),
  /// ConnectDealer kMaxFrameBytes + kMaxHeaderBytes (a server's reply).
  int64_t max_frame_bytes = 0;
  /// ZMQ_HANDSHAKE_IVL of a listening socket: a connection whose ZMTP (and
  /// CURVE) handshake has not completed by then is closed.
  int handshake_timeout_ms = 5000;
  /// ZMQ_HANDSHAKE_IVL of a connecting socket (ConnectDealer); 0 keeps
  /// ZeroMQ's default (30 s). A worker's sockets to its servers set it (5 s):
  /// the monitor then sees HANDSHAKE_FAILED_NO_DETAIL with errno EAGAIN when
  /// the peer accepted the connection and never answered the greeting, as a
  /// process that does not speak ZMTP does. Replication links keep the
  /// default: a primary streaming a large state to a joining replica may not
  /// answer a new connection's greeting within seconds, and a link closed
  /// for it would be taken for a dead primary.
  int connect_handshake_timeout_ms = 0;
};

/// Binds a ROUTER socket to `endpoint` ("tcp://127.0.0.1:0" picks a free
/// port) and writes the endpoint actually bound to `*bound`. ROUTER_MANDATORY
/// is set so that a reply to a vanished peer is an error, not a silent drop.
/// ZMQ_IPV6 is set where the endpoint needs it, so IPv6 literals
/// ("tcp://[::1]:0", "tcp://[fd00::1]:0") bind, "tcp://*:0" listens on IPv6
/// and IPv4 (IPv4 only where the kernel has no IPv6; reported as
/// "tcp://[::]:PORT"), and IPv4 literals bind and are reported as before. A host
/// NAME ("tcp://localhost:0", "tcp://myhost:5555"), which ZeroMQ would take
/// for a network interface, is resolved here and the socket bound to every
/// address it resolves to, on one port (the first bind picks it), so a peer
/// connecting to the name reaches it whichever address its resolver prefers;
/// `*bound` is then "tcp://NAME:PORT". Errors: IOError naming the endpoint
/// (and the addresses tried for a name).
/// With opts.curve.secret_key set (and not inproc://) the socket is a CURVE
/// server in ZAP domain kCurveZapDomain.
StatusOr<zmq::socket_t> BindRouter(zmq::context_t& ctx, const std::string& endpoint,
                                   const SocketOptions& opts, std::string* bound);

/// Connects a DEALER socket with routing identity `identity` to `endpoint`.
/// IPv6 literals and host names are accepted (ZMQ_IPV6 on: a name with an
/// IPv6 address is reached over IPv6, one with only IPv4 addresses over
/// IPv4). With opts.curve.secret_key set (and not inproc://) it is a CURVE client
/// of the server whose public key is opts.curve.server_public_key.
/// Errors: InvalidArgument for a malformed endpoint or a bad key, naming it.
StatusOr<zmq::socket_t> ConnectDealer(zmq::context_t& ctx, const std::string& endpoint,
                                      const std::string& identity, const SocketOptions& opts);

/// Moves a socket made by ConnectDealer from endpoint `from` to `to` (a
/// server found at another address): disconnects `from` (messages queued
/// for it are dropped: resend what must arrive), sets ZMQ_IPV6 for `to`,
/// connects `to`. Socket options, identity and monitor stay.
/// Errors: InvalidArgument for a malformed `to`, naming it.
[[nodiscard]] Status ReconnectDealer(zmq::socket_t& socket, const std::string& from, const std::string& to);

/// Connects refused in a row (ZMQ_EVENT_CONNECT_RETRIED with no
/// ZMQ_EVENT_CONNECTED between: nothing listens at the endpoint, the kernel
/// answered the connect with a reset) after which the process that was there
/// counts as dead. libzmq retries about every 100 ms, so this takes 0.1–0.3 s;
/// more than one absorbs a listener that is being replaced. A stopped or slow
/// process's kernel still accepts the connection: it is never refused.
constexpr int kRefusedConnectsForDead = 2;

/// Whether a live ZeroMQ peer answers at `endpoint` within `timeout_ms`: a
/// ZMTP handshake completes, or fails in a way only a live peer can fail it
/// (another security mechanism, a refused key). A closed port, a host that
/// does not answer and a stopped process (whose kernel still accepts the
/// TCP connection) are not live. Uses a context of its own; sends nothing.
bool EndpointAnswers(const std::string& endpoint, int timeout_ms);

/// The host part of a tcp:// endpoint, without IPv6 brackets
/// ("tcp://[::1]:5" → "::1", "tcp://h:5" → "h"); "" for other transports.
std::string EndpointHost(const std::string& endpoint);

/// Whether `endpoint` is a tcp:// wildcard bind ("*", "0.0.0.0", "::"),
/// which peers cannot connect to as written.
bool IsWildcardEndpoint(const std::string& endpoint);

/// The endpoint peers should connect to for a socket bound at `bound`: the
/// same, except that a wildcard host is replaced by `advertise_host`, or by
/// this machine's hostname (gethostname) when that is empty. An IPv6
/// `advertise_host` is bracketed. Other transports are returned unchanged.
std::string AdvertisedEndpoint(const std::string& bound, const std::string& advertise_host);

/// Formats HOST and PORT as a tcp:// endpoint, bracketing an IPv6 literal.
std::string TcpEndpoint(const std::string& host, int port);

}  // namespace tether
