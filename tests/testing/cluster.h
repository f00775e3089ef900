// In-process server shards for the tests that drive WorkerClients (or raw
// ZeroMQ peers) against real ServerShards: ShardThread is one shard, bound
// and serving on a thread of its own; InProcessCluster is every shard of one
// job. The transport is real (tcp://127.0.0.1 on a free port unless a test
// names another endpoint); only the processes are threads of the test.
//
// Owns: each ShardThread owns its ServerShard (with the shard's ZeroMQ
// context and socket) and the one std::thread that runs ServerShard::Run().
// InProcessCluster owns its ShardThreads; the WorkerClients it connects
// belong to the caller.
//
// Threads: one per shard, started by the constructor right after Bind and
// running Run() until it returns by itself (every worker said BYE, an
// ABORT, a timeout of the job's config) or is stopped.
//
// Teardown, bounded and reaped: Stop() asks the shard to leave
// (ServerShard::Stop: Run() returns at its next poll, within 100 ms) and
// joins its thread. WaitForExit(ms) first waits up to `ms` for Run() to
// return by itself, then stops and joins all the same. The destructors
// Stop(): no shard thread outlives its object, whatever a test asserted or
// where it returned. Destroy the WorkerClients first or not: a client whose
// shard is gone fails its requests within its own request timeout.
//
// Failures (a bind that fails, a client that cannot connect) are reported
// as non-fatal gtest failures where they happen; the test goes on with what
// it has (an empty endpoint, a null client), as each test asserts next.
//
// Thread-safety: construct, Stop, WaitForExit and destroy from one thread
// (the test's). The shard's counters (stats(), key-list and average
// statistics) are the shard thread's: read them exactly once the shard
// stopped (Stop, WaitForExit), or while it runs only after a reply that
// follows the event counted, as the tests that poll a counter do.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/status.h"
#include "server/server.h"
#include "worker/client/client.h"

namespace tether::testing {

/// A small job for the in-process tests: `servers` shards and `workers`
/// workers that wait up to `timeout_ms` for the first HELLO and for any
/// message (cluster.startup_timeout_ms, idle_timeout_ms), `features` input
/// features, `labels` labels, a model of `hidden` units (the default type
/// unless the caller sets one), trained by plain SGD at `learning_rate`.
JobConfig SgdJob(int servers, int workers, int64_t features, int64_t labels, int hidden, float learning_rate,
                 int timeout_ms);

/// How one shard is started: its endpoint (port 0: a free one, read back
/// with endpoint()) and, where set, the key-list cache budget it is given
/// before Bind (ServerShard::set_key_list_cache_bytes) and the listener of
/// its inputs (ServerShard::SetInputListener, called on the shard's
/// thread).
struct ShardOptions {
  std::string endpoint = "tcp://127.0.0.1:0";
  std::optional<uint64_t> key_list_cache_bytes;
  std::function<void(const std::string& identity, const Message& m)> input_listener;
  /// The ZeroMQ context (an inproc:// endpoint's peers share it); null:
  /// the shard's own. Must outlive the shard.
  zmq::context_t* context = nullptr;
};

class ShardThread {
 public:
  /// Shard `shard` of `config` (config as ServerShard takes it), bound to
  /// options.endpoint and serving.
  ShardThread(const JobConfig& config, int shard, const ShardOptions& options = {});
  ~ShardThread();
  ShardThread(const ShardThread&) = delete;
  ShardThread& operator=(const ShardThread&) = delete;

  /// Waits up to `timeout_ms` for Run() to return by itself, then stops the
  /// shard and joins its thread. Returns Run()'s status, or
  /// DeadlineExceeded when it had not returned in time.
  Status WaitForExit(int timeout_ms);
  /// Stops the shard and joins its thread; idempotent.
  void Stop();

  /// The endpoint bound, with its real port.
  const std::string& endpoint() const { return server_.endpoint(); }
  ServerShard& shard() { return server_; }
  const ServerShard& shard() const { return server_; }
  const ServerStats& stats() const { return server_.stats(); }

 private:
  ServerShard server_;
  std::mutex mu_;
  std::condition_variable exited_cv_;
  bool exited_ = false;  // guarded by mu_
  Status result_;        // Run()'s status, written before exited_
  std::thread thread_;
};

/// cluster.num_servers shards of one job, each a ShardThread on a free
/// 127.0.0.1 port, and clients connected to all of them.
class InProcessCluster {
 public:
  /// `config` as tether-server takes it; with `validate` the test also
  /// checks it passes ValidateServerConfig (a non-fatal failure otherwise).
  explicit InProcessCluster(const JobConfig& config, bool validate = false);
  ~InProcessCluster() { Stop(); }
  InProcessCluster(const InProcessCluster&) = delete;
  InProcessCluster& operator=(const InProcessCluster&) = delete;

  /// Stops every shard and joins its thread; idempotent.
  void Stop();

  /// The options of worker `rank` of this job (ClientOptionsFor), with a
  /// request timeout of 10 s.
  ClientOptions Options(int rank) const;
  /// A client of worker `rank` with Options(rank) and the cache capacity
  /// given (0: unbounded); null (and a non-fatal failure) when it cannot
  /// connect.
  std::unique_ptr<WorkerClient> Connect(int rank, uint64_t cache_capacity_bytes = 0) const;

  ServerShard& server(int s) { return shards_[s]->shard(); }
  const std::vector<std::string>& endpoints() const { return endpoints_; }
  int size() const { return static_cast<int>(shards_.size()); }

 private:
  JobConfig config_;
  std::vector<std::unique_ptr<ShardThread>> shards_;
  std::vector<std::string> endpoints_;
};

/// WorkerClient::Connect(options); null (and a non-fatal failure naming the
/// status) when it fails.
std::unique_ptr<WorkerClient> ConnectClient(const ClientOptions& options);

/// For a client the shards should refuse at HELLO: the status of
/// WorkerClient::Connect(options) with a request timeout of 5 s (OK where it
/// connected after all; that client is dropped at once).
Status HelloRefusal(ClientOptions options);

}  // namespace tether::testing
