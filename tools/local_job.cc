#include "tools/local_job.h"

#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <zmq.hpp>

#include "core/config.h"
#include "telemetry/metrics_log.h"
#include "core/table_spec.h"
#include "server/server.h"
#include "server/shard_metrics.h"
#include "worker/model_registry.h"

namespace tether {

std::string LocalShardEndpoint(int shard) { return "inproc://tether-shard-" + std::to_string(shard); }

namespace {

// The shards' tables as one TrainedModel; the shards must have stopped.
TrainedModel GatherTrainedModel(const JobConfig& config, const std::vector<const ServerShard*>& shards) {
  TrainedModel m;
  m.config = config;
  m.job_id = JobId(config);
  m.generation = config.cluster().generation();
  if (shards.empty()) return m;
  for (uint32_t id = 0; id < shards[0]->num_tables(); ++id) {
    TrainedTable t;
    t.spec = shards[0]->table(id).spec();
    if (IsRowTable(t.spec)) {
      const uint32_t dim = t.spec.dim();
      std::vector<std::pair<uint64_t, const float*>> rows;
      for (const ServerShard* s : shards)
        s->table(id).ForEachRow([&rows](uint64_t key, const float* w) { rows.emplace_back(key, w); });
      std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
      t.keys.reserve(rows.size());
      t.values.resize(rows.size() * dim);
      for (size_t i = 0; i < rows.size(); ++i) {
        t.keys.push_back(rows[i].first);
        std::copy_n(rows[i].second, dim, t.values.data() + i * dim);
      }
    } else {
      t.values.resize(t.spec.size());
      for (const ServerShard* s : shards) {
        const ServerTable& st = s->table(id);
        st.PullDense(t.values.data() + st.dense_begin());
      }
    }
    m.tables.push_back(std::move(t));
  }
  return m;
}

}  // namespace

StatusOr<TrainReport> RunLocalJob(const JobConfig& config, const LocalJobOptions& options) {
  const int num_servers = config.cluster().num_servers();
  const int num_workers = config.cluster().num_workers();
  // The model's checks before any shard binds (each worker runs them too).
  TETHER_RETURN_IF_ERROR(ValidateModelConfig(config));
  if (config.security().has_curve())
    LOG(INFO) << "[local] security.curve is not used: this one-process job's traffic never leaves the process "
                 "(inproc://), so there is nothing to encrypt or authenticate";
  // Declared first so it is destroyed last, on every return path, after the
  // shards and clients have closed their sockets (zmq_ctx_term waits for them).
  zmq::context_t ctx(1);
  // One socket per shard and one per (worker, shard): past ZeroMQ's default
  // of 1,023 sockets per context (about 500 workers on 2 shards) connects
  // would fail with "Too many open files".
  ctx.set(zmq::ctxopt::max_sockets, num_servers + num_workers * num_servers + 64);

  struct ShardSlot {
    std::unique_ptr<ServerShard> shard;
    std::unique_ptr<MetricsLog> log;
    Status status;
    std::thread thread;
  };
  std::vector<ShardSlot> shards(num_servers);
  for (int i = 0; i < num_servers; ++i) {
    ShardSlot& s = shards[i];
    s.shard = std::make_unique<ServerShard>(config, i, &ctx);
    if (!config.train().metrics_dir().empty()) {
      auto log = MetricsLog::Open(config.train().metrics_dir(), "server", i);
      if (!log.ok()) return log.status().WithPrefix("server " + std::to_string(i));
      s.log = std::move(*log);
      LogShardClocks(s.shard.get(), s.log.get());
    }
    // inproc needs the bind before any connect sees the endpoint: bind here,
    // on this thread, before a single worker starts.
    Status st = s.shard->Bind(LocalShardEndpoint(i));
    if (!st.ok()) return st.WithPrefix("server " + std::to_string(i));
  }
  std::mutex mu;
  std::condition_variable cv;
  int shards_running = num_servers;
  for (ShardSlot& s : shards) {
    s.thread = std::thread([&s, &mu, &cv, &shards_running] {
      s.status = s.shard->Run();
      if (s.status.ok() && s.log != nullptr) s.status = s.log->Flush();
      std::lock_guard<std::mutex> lock(mu);
      --shards_running;
      cv.notify_all();
    });
  }

  std::vector<std::string> endpoints;
  for (int i = 0; i < num_servers; ++i) endpoints.push_back(LocalShardEndpoint(i));
  std::vector<std::optional<StatusOr<TrainReport>>> results(num_workers);
  std::vector<std::thread> workers;
  const std::atomic<bool>* stop = options.stop;
  // The first failure in time ends the job: the other workers' waits give
  // up (ClientOptions::abort) instead of waiting out request_timeout_ms for
  // a peer that is gone, and the shards stop. It is the error returned.
  std::atomic<bool> abort{false};
  Status first_failure;
  for (int r = 0; r < num_workers; ++r) {
    workers.emplace_back([&, r] {
      TrainerOptions to;
      to.rank = r;
      to.servers = endpoints;
      to.zmq_context = &ctx;
      if (r == 0) to.metrics_out = options.metrics_out;
      to.resume_from = options.resume_from;
      to.stop_requested = [stop] { return stop != nullptr && stop->load(); };
      to.abort = &abort;
      StatusOr<TrainReport> report = RunWorker(config, to);
      if (!report.ok()) {
        std::lock_guard<std::mutex> lock(mu);
        if (!abort.load()) {
          LOG(ERROR) << "[in-process job] worker " << r << " failed, ending the job: " << report.status().message();
          first_failure = report.status().WithPrefix("worker " + std::to_string(r));
          abort.store(true);
          // Nothing would ever BYE for this worker: stop the shards now
          // rather than after cluster.worker_timeout_ms.
          for (ShardSlot& s : shards) s.shard->Stop();
        }
      }
      results[r] = std::move(report);
    });
  }
  for (auto& t : workers) t.join();

  {
    std::unique_lock<std::mutex> lock(mu);
    if (!cv.wait_for(lock, std::chrono::milliseconds(options.shard_exit_timeout_ms),
                     [&] { return shards_running == 0; })) {
      LOG(ERROR) << "[in-process job] " << shards_running << " shard(s) still running " << options.shard_exit_timeout_ms
                 << " ms after the last worker finished; stopping them";
      for (ShardSlot& s : shards) s.shard->Stop();
    }
  }
  for (ShardSlot& s : shards) s.thread.join();

  if (!first_failure.ok()) return first_failure;
  for (int i = 0; i < num_servers; ++i) {
    const Status& st = shards[i].status;
    if (!st.ok()) return st.WithPrefix("server " + std::to_string(i));
  }
  TrainReport report = std::move(**results[0]);
  if (options.model_out != nullptr && !report.left_early) {
    std::vector<const ServerShard*> stopped;
    for (const ShardSlot& s : shards) stopped.push_back(s.shard.get());
    *options.model_out = GatherTrainedModel(config, stopped);
  }
  // Any worker's divergence is the job's (C24): the first epoch it showed.
  for (int r = 1; r < static_cast<int>(results.size()); ++r) {
    if (results[r] && results[r]->ok() && (*results[r])->diverged &&
        (!report.diverged || (*results[r])->diverged_at_epoch < report.diverged_at_epoch)) {
      report.diverged = true;
      report.diverged_at_epoch = (*results[r])->diverged_at_epoch;
    }
  }
  return report;
}

}  // namespace tether
