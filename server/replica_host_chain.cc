// ReplicaHost's part in chains of more than one replica (cluster.replicas
// ≥ 2, server/replica_host.h): when the primary is gone, the first replica
// of the chain that is left claims the shard; a later one joins that claim.
#include <algorithm>
#include <cstring>

#include <glog/logging.h>

#include "core/net/transport.h"
#include "server/replica_host.h"

namespace tether {

Status ReplicaHost::ClaimOrFollow(Clock::time_point gone_at) {
  const int timeout_ms = std::max(1000, config_.cluster().liveness_timeout_ms());
  for (const std::string& before : chain_) {
    if (before == advertised_) break;
    if (stop_.load()) return Status::OK();
    const Probe probe = Answers(before, timeout_ms);
    if (probe == Probe::kAnswers) {
      // Its copy holds every committed entry and claims the shard; this
      // copy may hold entries beyond them that the claimant lacks, so it is
      // dropped and the shard's state copied again from the claimant.
      LOG(WARNING) << log_prefix_ << "shard " << shard_ << "'s primary at " << primary_endpoint_ << " is gone; "
                   << applied_ << " entries applied here; the replica before this one in its chain (at " << before
                   << ") answers and claims the shard: this process joins it as a learner";
      rejoin_ = before;
      return Status::OK();
    }
    if (probe == Probe::kRefused)
      LOG(WARNING) << log_prefix_ << "shard " << shard_ << "'s replica at " << before
                   << " (before this one in its chain) refused the connection " << kRefusedConnectsForDead
                   << " times: no process listens there";
    else
      LOG(WARNING) << log_prefix_ << "shard " << shard_ << "'s replica at " << before
                   << " (before this one in its chain) did not answer within " << timeout_ms << " ms";
  }
  return ClaimAndServe(gone_at);
}

ReplicaHost::Probe ReplicaHost::Answers(const std::string& endpoint, int timeout_ms) {
  SocketOptions o;
  o.curve = curve_;
  o.monitor_events = ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_CONNECTED | ZMQ_EVENT_CONNECT_RETRIED;
  const std::string identity = "probe-" + std::to_string(process_) + "-" + std::to_string(shard_) + "-" +
                               std::to_string(copy_->incarnation()) + "-" + std::to_string(connections_++);
  o.monitor_endpoint = "inproc://tether-replica-monitor-" + identity;
  zmq::socket_t monitor;
  try {
    monitor = zmq::socket_t(ctx_, zmq::socket_type::pair);
    monitor.set(zmq::sockopt::linger, 0);
    monitor.connect(o.monitor_endpoint);
  } catch (const zmq::error_t& e) {
    LOG(WARNING) << log_prefix_ << "cannot watch a connection to " << endpoint << ": " << e.what();
    return Probe::kSilent;
  }
  StatusOr<zmq::socket_t> dealer = ConnectDealer(ctx_, endpoint, identity, o);
  if (!dealer.ok()) return Probe::kSilent;
  bool answered = false;
  int refused = 0;  // in a row: a connect that succeeds starts again
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  while (!answered && refused < kRefusedConnectsForDead && !stop_.load() && Clock::now() < deadline) {
    zmq::pollitem_t item{monitor.handle(), 0, ZMQ_POLLIN, 0};
    try {
      zmq::poll(&item, 1, std::chrono::milliseconds(100));
      zmq::message_t head, address;
      while (monitor.recv(head, zmq::recv_flags::dontwait)) {
        if (head.more()) (void)monitor.recv(address, zmq::recv_flags::dontwait);
        uint16_t event = 0;
        if (head.size() >= 2) std::memcpy(&event, head.data(), 2);
        answered = answered || event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED;
        if (event == ZMQ_EVENT_CONNECTED) refused = 0;
        if (event == ZMQ_EVENT_CONNECT_RETRIED) ++refused;
      }
    } catch (const zmq::error_t& e) {
      if (e.num() != EINTR) break;
    }
  }
  (void)zmq_socket_monitor(dealer->handle(), nullptr, 0);
  dealer->set(zmq::sockopt::linger, 0);
  dealer->close();
  if (answered) return Probe::kAnswers;
  return refused >= kRefusedConnectsForDead ? Probe::kRefused : Probe::kSilent;
}

}  // namespace tether
