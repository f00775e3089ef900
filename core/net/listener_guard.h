// ListenerGuard: the connection caps of a listening ZeroMQ socket. ZeroMQ
// has no limit on the connections a socket accepts, and each holds a
// descriptor; past the process's open-file limit, accept(2) fails, and so
// does opening a checkpoint or data file. The guard watches the socket's
// monitor (ZMQ_EVENT_ACCEPTED and _DISCONNECTED carry the connection's
// descriptor) and cuts a connection that would pass
//   - the listener's own cap (Limits::max_connections), or
//   - the process's descriptor budget (ConnectionBudget, core/peer_limits.h:
//     the open-file limit less what data, checkpoints and logs keep),
// with shutdown(2) of its descriptor, which ZeroMQ then closes like a
// peer's close. Each cut counts in tether_peers_dropped_total{listener,
// reason="connections_per_port"|"process_descriptors"}. A connection whose
// handshake does not complete within SocketOptions::handshake_timeout_ms is
// closed by ZeroMQ itself (ZMQ_HANDSHAKE_IVL; counted as
// reason="handshake_timeout"), and so is one that fails the handshake
// (garbage, another mechanism: reason="handshake"; a refused CURVE key,
// when the owner asks for ZMQ_EVENT_HANDSHAKE_FAILED_AUTH:
// reason="authentication"). A frame above ZMQ_MAXMSGSIZE also ends its
// connection, but ZeroMQ gives no event that tells it apart from a close.
//
// The guard owns the monitor's receiving end (a socket has one monitor):
// other events asked for (CURVE handshake failures) are handed to the
// owner by Poll(). Set it up with MonitorOptions() before BindRouter, so
// that no connection is accepted unseen.
//
// Thread-safety: one thread (the socket's), like the socket. A descriptor
// is cut only while it is a TCP socket bound to this listener's port (a
// closed descriptor's number reused elsewhere is left alone).
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <zmq.hpp>

#include "core/net/transport.h"
#include "core/status.h"

namespace tether {

class ListenerGuard {
 public:
  struct Limits {
    int max_connections = 1024;  // open at once on this listener
  };
  /// An event the owner asked for (not ACCEPTED or DISCONNECTED).
  struct Event {
    int event = 0;        // ZMQ_EVENT_*
    int value = 0;        // the event's value (a ZAP status, an errno)
    std::string address;  // the endpoint the event names
  };

  /// A guard for a socket about to be bound in `ctx`: connects the monitor's
  /// receiving end now (inproc allows connecting first) and sets
  /// `*opts`' monitor_endpoint and monitor_events (ACCEPTED, DISCONNECTED and
  /// `extra_events`). `listener` names the socket in counters ("server").
  /// Errors: IOError when the monitor socket cannot be made.
  /// `log_prefix` starts its log lines ("[server 0] ").
  static StatusOr<std::unique_ptr<ListenerGuard>> Create(zmq::context_t& ctx, std::string listener, Limits limits,
                                                         int extra_events, SocketOptions* opts,
                                                         std::string log_prefix = "");
  ~ListenerGuard();
  ListenerGuard(const ListenerGuard&) = delete;
  ListenerGuard& operator=(const ListenerGuard&) = delete;

  /// The monitor's socket, to poll beside the listener.
  void* handle() { return monitor_.handle(); }
  /// Takes every pending event: cuts connections past the caps, and returns
  /// the events of `extra_events`. Never blocks.
  std::vector<Event> Poll();
  /// Connections open now, and cut so far.
  int open_connections() const { return static_cast<int>(open_.size()); }
  uint64_t cut() const { return cut_; }

 private:
  // The handshake failures counted as drops (DropReason), asked for always.
  static constexpr int kCountedEvents = ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL;
  // The tether_peers_dropped_total reason of a monitor event, or nullptr.
  static const char* DropReason(int event, int value);

  ListenerGuard(zmq::socket_t monitor, std::string listener, Limits limits, int extra_events, std::string log_prefix)
      : monitor_(std::move(monitor)),
        listener_(std::move(listener)),
        limits_(limits),
        extra_events_(extra_events),
        log_prefix_(std::move(log_prefix)) {}
  void Accepted(int fd, const std::string& endpoint);
  void Gone(int fd);

  zmq::socket_t monitor_;
  std::string listener_;
  Limits limits_;
  int extra_events_ = 0;  // events handed to the owner by Poll()
  std::string log_prefix_;
  std::set<int> open_;      // descriptors of open connections (each holds one of the budget)
  uint64_t cut_ = 0;
};

}  // namespace tether
