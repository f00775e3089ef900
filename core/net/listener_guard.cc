#include "core/net/listener_guard.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <glog/logging.h>

#include <cerrno>
#include <cstring>

#include "core/peer_limits.h"

namespace tether {
namespace {

// Whether `fd` is still the connection `endpoint` accepted: a TCP socket on
// the listener's port, or a unix socket for ipc://. (The monitor's events
// come after the fact; a descriptor closed meanwhile may name another file.)
bool StillAccepted(int fd, const std::string& endpoint) {
  sockaddr_storage a{};
  socklen_t len = sizeof(a);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) return false;
  if (endpoint.rfind("ipc://", 0) == 0) return a.ss_family == AF_UNIX;
  const size_t colon = endpoint.rfind(':');
  if (colon == std::string::npos) return false;
  const int port = std::atoi(endpoint.c_str() + colon + 1);
  if (a.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&a)->sin_port) == port;
  if (a.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&a)->sin6_port) == port;
  return false;
}

}  // namespace

const char* ListenerGuard::DropReason(int event, int value) {
  // ZeroMQ (4.3) reports a handshake that timed out (ZMQ_HANDSHAKE_IVL) as
  // a failure without detail whose value is EAGAIN, and a peer that is not
  // ZMTP or speaks another mechanism as a protocol failure. A frame above
  // ZMQ_MAXMSGSIZE ends the connection with no event of its own: it shows
  // only as a disconnection.
  if (event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL && (value == EAGAIN || value == ETIMEDOUT))
    return "handshake_timeout";
  if (event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL || event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL)
    return "handshake";
  if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) return "authentication";  // seen when the owner asks for it
  return nullptr;
}

StatusOr<std::unique_ptr<ListenerGuard>> ListenerGuard::Create(zmq::context_t& ctx, std::string listener, Limits limits,
                                                               int extra_events, SocketOptions* opts,
                                                               std::string log_prefix) {
  static std::atomic<uint64_t> serial{0};
  opts->monitor_endpoint = "inproc://tether-listener-guard-" + std::to_string(serial.fetch_add(1)) + "-" +
                           std::to_string(reinterpret_cast<uintptr_t>(&ctx));
  opts->monitor_events = ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED | kCountedEvents | extra_events;
  try {
    zmq::socket_t monitor(ctx, zmq::socket_type::pair);
    monitor.set(zmq::sockopt::linger, 0);
    monitor.set(zmq::sockopt::rcvhwm, 0);  // never lose an ACCEPTED or a DISCONNECTED
    monitor.connect(opts->monitor_endpoint);
    return std::unique_ptr<ListenerGuard>(
        new ListenerGuard(std::move(monitor), std::move(listener), limits, extra_events, std::move(log_prefix)));
  } catch (const zmq::error_t& e) {
    return Status::IOError(listener + ": cannot watch the connections of its socket: " + e.what());
  }
}

ListenerGuard::~ListenerGuard() {
  for (size_t i = 0; i < open_.size(); ++i) ConnectionBudget::Process().Release();
}

void ListenerGuard::Accepted(int fd, const std::string& endpoint) {
  const char* reason = nullptr;
  if (static_cast<int>(open_.size()) >= limits_.max_connections) reason = "connections_per_port";
  else if (!ConnectionBudget::Process().TryAcquire()) reason = "process_descriptors";
  if (reason == nullptr) {
    open_.insert(fd);
    return;
  }
  ++cut_;
  CountPeerDrop(listener_, reason);
  if (StillAccepted(fd, endpoint)) shutdown(fd, SHUT_RDWR);
  // The 1st, 10th, 100th ... cut are logged: a flood must not flood the log.
  uint64_t p = 1;
  while (p < cut_) p *= 10;
  if (p == cut_)
    LOG(WARNING) << log_prefix_ << listener_ << " " << endpoint << ": cut a connection past "
                 << (std::strcmp(reason, "connections_per_port") == 0
                         ? "its cap of " + std::to_string(limits_.max_connections) + " connections"
                         : "the process's descriptor budget (" + std::to_string(ConnectionBudget::Process().capacity()) +
                               " connections for the open-file limit)")
                 << " (" << cut_ << " so far)";
}

void ListenerGuard::Gone(int fd) {
  if (open_.erase(fd) > 0) ConnectionBudget::Process().Release();
}

std::vector<ListenerGuard::Event> ListenerGuard::Poll() {
  std::vector<Event> out;
  while (true) {
    zmq::message_t head, address;
    try {
      if (!monitor_.recv(head, zmq::recv_flags::dontwait)) break;
      if (head.more()) (void)monitor_.recv(address, zmq::recv_flags::dontwait);
    } catch (const zmq::error_t& e) {
      if (e.num() == EINTR) continue;
      break;
    }
    if (head.size() < 6) continue;
    uint16_t event = 0;
    int32_t value = 0;
    std::memcpy(&event, head.data(), 2);
    std::memcpy(&value, static_cast<const char*>(head.data()) + 2, 4);
    const std::string endpoint = address.to_string();
    if (event == ZMQ_EVENT_ACCEPTED) {
      Accepted(value, endpoint);
      continue;
    }
    if (event == ZMQ_EVENT_DISCONNECTED) {
      Gone(value);
      continue;
    }
    if (const char* reason = DropReason(event, value); reason != nullptr) CountPeerDrop(listener_, reason);
    if ((event & extra_events_) != 0) out.push_back(Event{event, value, endpoint});
  }
  return out;
}

}  // namespace tether
