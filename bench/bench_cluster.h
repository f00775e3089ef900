// The in-process cluster the transport benchmarks measure: server shards
// on threads bound to 127.0.0.1 port 0 and one WorkerClient connected to
// them over loopback TCP, so every request crosses the wire; with
// cluster.replicas = 1, also each shard's copy on a ReplicaHost thread (the
// host of shard s stands in for server process s + 1 mod num_servers), so
// every input also crosses to the copy and back before its reply. Also the
// job config those shards serve.
//
// Ownership: a BenchCluster owns its shards, replica hosts, their threads
// and the client; destroying it says BYE (when not said yet), stops the
// shards and hosts and joins them. Thread-safety: use the client from one thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/status.h"
#include "proto/config.pb.h"
#include "server/replica_host.h"
#include "server/server.h"
#include "worker/client/client.h"

namespace tether {

/// A job of `servers` shards and one worker whose table 0 ("w1") has rows
/// of `dim` floats, for requests of up to `keys` keys. Keys are every third
/// id from 0 (so a shard's part is not one dense block), and the key space
/// is sized to them: the server checks that its shard of every table fits
/// in memory at full size (server/shard_memory.h). ASP with no worker-side
/// cache, so pulls never wait on a bound and every operation crosses the
/// wire.
JobConfig TransportConfig(int servers, int64_t dim, int64_t keys);

/// The client's transport settings a benchmark may change.
struct BenchClientOptions {
  int64_t chunk_bytes = 0;   // > 0: ClientOptions::max_message_bytes
  int max_outstanding = 0;   // > 0: ClientOptions::max_outstanding
};

class BenchCluster {
 public:
  ~BenchCluster();

  /// Binds and starts config.cluster.num_servers shards and, with
  /// cluster.replicas ≥ 1 (needs ≥ 2 shards), one ReplicaHost per shard
  /// bound to 127.0.0.1 port 0, then connects the client (with
  /// security.curve: as a CURVE client). Errors: Bind's, the hosts'
  /// Start, the CURVE keys', Connect's.
  static StatusOr<std::unique_ptr<BenchCluster>> Start(const JobConfig& config, const BenchClientOptions& options);

  WorkerClient& client() { return *client_; }
  /// Says BYE to every shard (once). Errors: Bye's.
  Status Bye();

 private:
  BenchCluster() = default;
  Status StartReplicaHosts(const JobConfig& config, const std::vector<std::string>& endpoints);

  std::vector<std::unique_ptr<ServerShard>> shards_;
  // The hosts' config (the shards' endpoints as cluster.server_addresses);
  // a ReplicaHost keeps a reference to it.
  std::unique_ptr<JobConfig> host_config_;
  std::vector<std::unique_ptr<ReplicaHost>> hosts_;
  std::vector<std::thread> threads_;
  std::unique_ptr<WorkerClient> client_;
  bool said_bye_ = false;
};

}  // namespace tether
