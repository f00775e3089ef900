#include "local/local_job.h"

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
#include "worker/models/model_registry.h"

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
  // The clock every worker completed, as a checkpoint records it: the
  // smallest of the workers' last clocks (they have all left by now).
  const ClockTracker& clocks = shards[0]->clocks();
  for (int r = 0; r < clocks.num_workers(); ++r)
    m.clock = r == 0 ? clocks.clock(r) : std::min(m.clock, clocks.clock(r));
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

// The job's shards, each run on a thread of its own. Declared after the
// ZeroMQ context it binds in, so it is destroyed first.
class LocalShards {
 public:
  ~LocalShards() {
    for (Slot& s : slots_)
      if (s.thread.joinable()) s.thread.join();
  }

  // Makes shard 0..S-1 of `config` and binds each to its inproc endpoint:
  // inproc needs the bind before any connect sees the endpoint, so this
  // runs on the calling thread before a single worker starts. Errors: the
  // metrics log's (none may be one of `inputs`) and Bind's, prefixed
  // "server S: ".
  Status Bind(const JobConfig& config, const std::vector<NamedInput>& inputs, zmq::context_t* ctx) {
    slots_ = std::vector<Slot>(config.cluster().num_servers());
    for (int i = 0; i < static_cast<int>(slots_.size()); ++i) {
      Slot& s = slots_[i];
      s.shard = std::make_unique<ServerShard>(config, i, ctx);
      if (!config.train().metrics_dir().empty()) {
        auto log = MetricsLog::Open(config.train().metrics_dir(), "server", i, inputs);
        if (!log.ok()) return log.status().WithPrefix("server " + std::to_string(i));
        s.log = std::move(*log);
        LogShardClocks(s.shard.get(), s.log.get());
      }
      Status st = s.shard->Bind(LocalShardEndpoint(i));
      if (!st.ok()) return st.WithPrefix("server " + std::to_string(i));
    }
    return Status::OK();
  }

  void Start() {
    running_ = static_cast<int>(slots_.size());
    for (Slot& s : slots_) {
      s.thread = std::thread([this, &s] {
        s.status = s.shard->Run();
        if (s.status.ok() && s.log != nullptr) s.status = s.log->Flush();
        std::lock_guard<std::mutex> lock(mu_);
        --running_;
        exited_.notify_all();
      });
    }
  }

  // Thread-safe: ServerShard::Stop may be called from any thread.
  void StopAll() {
    for (Slot& s : slots_) s.shard->Stop();
  }

  // Once every worker is done: the shards exit when every worker has said
  // BYE; those still running after `timeout_ms` are stopped. Joins them.
  void Join(int timeout_ms) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (!exited_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return running_ == 0; })) {
        LOG(ERROR) << "[in-process job] " << running_ << " shard(s) still running " << timeout_ms
                   << " ms after the last worker finished; stopping them";
        StopAll();
      }
    }
    for (Slot& s : slots_) s.thread.join();
  }

  // After Join: the first shard's error, prefixed "server S: ".
  Status FirstError() const {
    for (size_t i = 0; i < slots_.size(); ++i)
      if (!slots_[i].status.ok()) return slots_[i].status.WithPrefix("server " + std::to_string(i));
    return Status::OK();
  }

  std::vector<const ServerShard*> shards() const {
    std::vector<const ServerShard*> out;
    for (const Slot& s : slots_) out.push_back(s.shard.get());
    return out;
  }

 private:
  struct Slot {
    std::unique_ptr<ServerShard> shard;
    std::unique_ptr<MetricsLog> log;
    Status status;
    std::thread thread;
  };
  std::vector<Slot> slots_;
  std::mutex mu_;
  std::condition_variable exited_;
  int running_ = 0;  // guarded by mu_
};

// Every worker of the job, each on a thread of its own; returns once all
// are done. The first failure in time ends the job: the other workers'
// waits give up (ClientOptions::abort) instead of waiting out
// request_timeout_ms for a peer that is gone, and the shards stop. It is
// the error in *first_failure.
std::vector<std::optional<StatusOr<TrainReport>>> RunWorkers(const JobConfig& config, const LocalJobOptions& options,
                                                             zmq::context_t* ctx, LocalShards* shards,
                                                             Status* first_failure) {
  const int num_workers = config.cluster().num_workers();
  std::vector<std::string> endpoints;
  for (int i = 0; i < config.cluster().num_servers(); ++i) endpoints.push_back(LocalShardEndpoint(i));
  std::vector<std::optional<StatusOr<TrainReport>>> results(num_workers);
  std::vector<std::thread> workers;
  const std::atomic<bool>* stop = options.stop;
  std::atomic<bool> abort{false};
  std::mutex mu;
  for (int r = 0; r < num_workers; ++r) {
    workers.emplace_back([&, r] {
      TrainerOptions to;
      to.rank = r;
      to.servers = endpoints;
      to.zmq_context = ctx;
      if (r == 0) to.metrics_out = options.metrics_out;
      to.resume_from = options.resume_from;
      to.inputs = options.inputs;
      to.stop_requested = [stop] { return stop != nullptr && stop->load(); };
      to.abort = &abort;
      bool refused = false;
      to.input_refused = &refused;
      StatusOr<TrainReport> report = RunWorker(config, to);
      if (!report.ok()) {
        std::lock_guard<std::mutex> lock(mu);
        if (!abort.load()) {
          // The error itself is the job's, returned and logged once by the
          // caller (tether-worker --in_process), not here as well.
          LOG(WARNING) << "[in-process job] worker " << r << " failed: stopping the shards and the other workers";
          *first_failure = report.status().WithPrefix("worker " + std::to_string(r));
          if (refused && options.input_refused != nullptr) *options.input_refused = true;
          abort.store(true);
          // Nothing would ever BYE for this worker: stop the shards now
          // rather than after cluster.worker_timeout_ms.
          shards->StopAll();
        }
      }
      results[r] = std::move(report);
    });
  }
  for (auto& t : workers) t.join();
  return results;
}

// Any worker's divergence is the job's (C24): the first epoch it showed.
void MergeDivergence(const std::vector<std::optional<StatusOr<TrainReport>>>& results, TrainReport* report) {
  for (int r = 1; r < static_cast<int>(results.size()); ++r) {
    if (results[r] && results[r]->ok() && (*results[r])->diverged &&
        (!report->diverged || (*results[r])->diverged_at_epoch < report->diverged_at_epoch)) {
      report->diverged = true;
      report->diverged_at_epoch = (*results[r])->diverged_at_epoch;
    }
  }
}

}  // namespace

StatusOr<TrainReport> RunLocalJob(const JobConfig& config, const LocalJobOptions& options) {
  // The model's checks before any shard binds (each worker runs them too).
  TETHER_RETURN_IF_ERROR(ValidateModelConfig(config));
  TETHER_RETURN_IF_ERROR(ValidateInProcessJob(config));
  if (config.security().has_curve())
    LOG(INFO) << "[local] security.curve is not used: this one-process job's traffic never leaves the process "
                 "(inproc://), so there is nothing to encrypt or authenticate";
  // Declared first so it is destroyed last, on every return path, after the
  // shards and clients have closed their sockets (zmq_ctx_term waits for them).
  zmq::context_t ctx(1);
  // One socket per shard and one per (worker, shard): past ZeroMQ's default
  // of 1,023 sockets per context (about 500 workers on 2 shards) connects
  // would fail with "Too many open files".
  const int num_servers = config.cluster().num_servers();
  ctx.set(zmq::ctxopt::max_sockets, num_servers + config.cluster().num_workers() * num_servers + 64);
  LocalShards shards;
  TETHER_RETURN_IF_ERROR(shards.Bind(config, options.inputs, &ctx));
  shards.Start();
  Status first_failure;
  auto results = RunWorkers(config, options, &ctx, &shards, &first_failure);
  shards.Join(options.shard_exit_timeout_ms);

  if (!first_failure.ok()) return first_failure;
  TETHER_RETURN_IF_ERROR(shards.FirstError());
  TrainReport report = std::move(**results[0]);
  if (options.model_out != nullptr && !report.left_early)
    *options.model_out = GatherTrainedModel(config, shards.shards());
  MergeDivergence(results, &report);
  return report;
}

}  // namespace tether
