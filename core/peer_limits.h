// What a peer may make a process hold, process-wide: the descriptor budget
// that every listening socket's connections draw from (the soft open-file
// limit less a reserve for data files, checkpoints and logs; core/
// process_limits.h), and the counters of peers dropped at a bound, by
// listener and reason, which every /metrics page shows
// (tether_peers_dropped_total; telemetry/metrics_endpoint.h).
//
// The bounds themselves live with their listeners (core/net/listener_guard.h
// for ZeroMQ sockets, telemetry/metrics_endpoint.h for HTTP, core/net/
// rendezvous.h for the store); docs/SECURITY.md lists them all.
//
// Thread-safety: every function is thread-safe (atomics and one mutex).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

namespace tether {

/// Descriptors kept out of the connection budget: data files read at once,
/// a checkpoint's files, log and metrics files, ZeroMQ's own pipes.
inline constexpr uint64_t kReservedDescriptors = 128;

/// The process's budget of descriptors for peers' connections.
class ConnectionBudget {
 public:
  /// The process's budget: ConnectionDescriptorBudget(CurrentProcessLimits(),
  /// kReservedDescriptors), read when first used.
  static ConnectionBudget& Process();

  explicit ConnectionBudget(uint64_t capacity) : capacity_(capacity) {}
  /// Takes one descriptor; false (nothing taken) when the budget is spent.
  bool TryAcquire();
  /// Gives one back (after a successful TryAcquire).
  void Release();
  uint64_t in_use() const { return in_use_.load(); }
  uint64_t capacity() const { return capacity_; }

 private:
  const uint64_t capacity_;
  std::atomic<uint64_t> in_use_{0};
};

/// Counts one peer dropped at a bound: `listener` names the socket
/// ("server", "rendezvous", "metrics"), `reason` the bound
/// ("connections_per_port", "pre_hello_bytes", "head_bytes", ...).
void CountPeerDrop(const std::string& listener, const std::string& reason);

/// Every (listener, reason, count) counted so far, sorted.
std::vector<std::tuple<std::string, std::string, uint64_t>> PeerDrops();

}  // namespace tether
