#include "tests/testing/cluster.h"

#include <gtest/gtest.h>

#include <chrono>
#include <utility>

#include "core/config.h"
#include "worker/trainer.h"

namespace tether::testing {

JobConfig SgdJob(int servers, int workers, int64_t features, int64_t labels, int hidden, float learning_rate,
                 int timeout_ms) {
  JobConfig c;
  c.mutable_cluster()->set_num_servers(servers);
  c.mutable_cluster()->set_num_workers(workers);
  c.mutable_cluster()->set_idle_timeout_ms(timeout_ms);
  c.mutable_cluster()->set_startup_timeout_ms(timeout_ms);
  c.mutable_data()->set_num_features(features);
  c.mutable_data()->set_num_labels(labels);
  c.mutable_model()->set_hidden(hidden);
  c.mutable_optimizer()->set_type(SGD);
  c.mutable_optimizer()->set_learning_rate(learning_rate);
  return c;
}

ShardThread::ShardThread(const JobConfig& config, int shard, const ShardOptions& options) : server_(config, shard, options.context) {
  if (options.key_list_cache_bytes) server_.set_key_list_cache_bytes(*options.key_list_cache_bytes);
  if (options.input_listener) server_.SetInputListener(options.input_listener);
  const Status st = server_.Bind(options.endpoint);
  EXPECT_TRUE(st.ok()) << st.ToString();
  thread_ = std::thread([this] {
    Status result = server_.Run();
    std::lock_guard<std::mutex> lock(mu_);
    result_ = std::move(result);
    exited_ = true;
    exited_cv_.notify_all();
  });
}

ShardThread::~ShardThread() { Stop(); }

Status ShardThread::WaitForExit(int timeout_ms) {
  bool exited;
  {
    std::unique_lock<std::mutex> lock(mu_);
    exited = exited_cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [this] { return exited_; });
  }
  Stop();
  return exited ? result_ : Status::DeadlineExceeded("the shard's Run() did not return");
}

void ShardThread::Stop() {
  server_.Stop();
  if (thread_.joinable()) thread_.join();
}

InProcessCluster::InProcessCluster(const JobConfig& config, bool validate) : config_(config) {
  if (validate) {
    const Status valid = ValidateServerConfig(config);
    EXPECT_TRUE(valid.ok()) << valid.ToString();
  }
  for (int s = 0; s < config.cluster().num_servers(); ++s) {
    shards_.push_back(std::make_unique<ShardThread>(config, s));
    endpoints_.push_back(shards_.back()->endpoint());
  }
}

void InProcessCluster::Stop() {
  for (auto& s : shards_) s->shard().Stop();  // all at once: each returns within its next poll
  for (auto& s : shards_) s->Stop();
}

ClientOptions InProcessCluster::Options(int rank) const {
  ClientOptions o = ClientOptionsFor(config_, rank, endpoints_);
  o.request_timeout_ms = 10000;
  return o;
}

std::unique_ptr<WorkerClient> InProcessCluster::Connect(int rank, uint64_t cache_capacity_bytes) const {
  ClientOptions o = Options(rank);
  o.cache_capacity_bytes = cache_capacity_bytes;
  return ConnectClient(o);
}

std::unique_ptr<WorkerClient> ConnectClient(const ClientOptions& options) {
  auto client = WorkerClient::Connect(options);
  EXPECT_TRUE(client.ok()) << client.status().ToString();
  return client.ok() ? std::move(client).value() : nullptr;
}

Status HelloRefusal(ClientOptions options) {
  options.request_timeout_ms = 5000;
  return WorkerClient::Connect(options).status();
}

}  // namespace tether::testing
