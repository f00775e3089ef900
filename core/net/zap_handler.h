// ZapHandler: the ZeroMQ Authentication Protocol handler (ZAP, RFC 27) that
// decides which CURVE clients a server socket admits: exactly those whose
// public key is in the list it was started with. Every refusal is logged
// (WARNING, with the client's public key and address: the 1st, 10th,
// 100th ... time for each, as a refused client's ZeroMQ keeps reconnecting)
// and counted.
//
// libzmq asks the handler bound at inproc://zeromq.zap.01 of the socket's own
// context, once per connection, during the CURVE handshake; nothing reaches
// the socket before the handler said yes. While no handler is bound libzmq
// admits every CURVE client, so the handler must be running before the
// server socket binds (Start() returns once it is bound), and it must live
// in the same zmq::context_t as the sockets it guards. A context holds one
// handler at most: a second Start() in it fails (EADDRINUSE).
//
// Ownership and lifetime: the handler owns one thread and three sockets of
// the context. It must outlive the server sockets it guards and go before
// the context is closed (zmq_ctx_term waits for its sockets): once it is
// gone, libzmq's fallback admits every CURVE client of a socket still open
// (traffic stays encrypted, but unauthenticated). Declare it before the
// socket in a class (members are destroyed in reverse order).
// Thread-safety: Start() and the destructor from any one thread; refused()
// and admitted() from any thread.
#pragma once

#include <atomic>
#include <map>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <zmq.hpp>

#include "core/status.h"

namespace tether {

class ZapHandler {
 public:
  /// Binds the handler in `ctx` and starts its thread. `authorized_keys`:
  /// client public keys, Z85 (40 characters each; core/net/curve.h
  /// ReadAuthorizedKeys). `log_prefix` starts every log line ("[server 0] ").
  /// Errors: InvalidArgument for a key that is not Z85; IOError when the
  /// ZAP endpoint cannot be bound (another handler in this context).
  static StatusOr<std::unique_ptr<ZapHandler>> Start(zmq::context_t& ctx, const std::vector<std::string>& authorized_keys,
                                                     const std::string& log_prefix);
  ~ZapHandler();
  ZapHandler(const ZapHandler&) = delete;
  ZapHandler& operator=(const ZapHandler&) = delete;

  /// CURVE handshakes refused (key not listed, or another mechanism asked
  /// the handler) and admitted, since Start.
  uint64_t refused() const { return refused_.load(); }
  uint64_t admitted() const { return admitted_.load(); }

 private:
  ZapHandler(zmq::context_t& ctx, std::set<std::string> keys, std::string log_prefix);
  void Run();
  // Answers one ZAP request (RFC 27 frames).
  void Answer(std::vector<zmq::message_t>& request);

  std::set<std::string> keys_;  // 32-byte binary public keys
  std::string log_prefix_;
  zmq::socket_t rep_;      // bound at inproc://zeromq.zap.01; used by the thread
  zmq::socket_t stop_rx_;  // the thread's end of the stop signal
  zmq::socket_t stop_tx_;  // the owner's end
  std::thread thread_;
  std::atomic<uint64_t> refused_{0}, admitted_{0};
  std::map<std::string, uint64_t> refusals_;  // "address: why" → count; the thread's only
  // (Every refusal is counted; the 1st, 10th, 100th ... of each are logged.)
};

}  // namespace tether
