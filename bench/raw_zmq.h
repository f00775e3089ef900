// The transport benchmark's baseline (tether-bench transport): the least a
// ZeroMQ program can do to move Tether's payload. One ROUTER per "shard"
// answering from a pre-filled buffer with zero-copy sends, one DEALER per
// shard on the client, no parsing, no lookups, no scatter. It moves exactly
// Tether's payload: keys up, values down for a pull; keys and values up, an
// empty ack down for a push.
//
// Ownership: each object owns its ZeroMQ context and sockets; a RawServer
// owns its thread (joined when destroyed). Thread-safety: a RawClient is
// used from one thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include <zmq.hpp>

#include "core/status.h"

namespace tether {

class RawServer {
 public:
  /// Binds tcp://127.0.0.1 on a free port and starts answering.
  RawServer();
  ~RawServer();
  const std::string& endpoint() const { return endpoint_; }

 private:
  void Loop();

  zmq::context_t ctx_{1};
  zmq::socket_t socket_;
  std::string endpoint_;
  std::vector<char> buffer_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

class RawClient {
 public:
  /// One DEALER per endpoint; `chunk_bytes` > 0 cuts each shard's part into
  /// messages of at most that many bytes of values (0: one per shard).
  RawClient(const std::vector<std::string>& endpoints, int64_t chunk_bytes);

  /// One request of `n` keys (8 bytes each at `keys`) of `dim` floats
  /// (`values`, n × dim, read for a push): n / S keys per shard (the
  /// remainder to shard 0), all messages sent before any reply is awaited
  /// (as Tether's client does); returns once every reply came. Both sides'
  /// queues are unbounded (ZMQ_SNDHWM, ZMQ_RCVHWM 0), since a ROUTER drops
  /// the replies above its high-water mark and small --chunk_bytes send
  /// thousands of messages at once. Errors: DeadlineExceeded when no reply
  /// came for kReplyTimeoutMs, naming how many are missing.
  [[nodiscard]] Status Op(bool push, int64_t n, int64_t dim, const char* keys, const char* values);
  static constexpr int kReplyTimeoutMs = 30000;

 private:
  int64_t chunk_bytes_;
  zmq::context_t ctx_{1};
  std::vector<zmq::socket_t> sockets_;
};

}  // namespace tether
