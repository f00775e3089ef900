#include "bench/bench_cluster.h"

#include <glog/logging.h>

#include <algorithm>
#include <string>

#include "core/net/curve.h"
#include "worker/trainer.h"
#include "worker/client/job_session.h"

namespace tether {

JobConfig TransportConfig(int servers, int64_t dim, int64_t keys) {
  JobConfig c;
  c.set_name("tether-bench-transport");
  c.mutable_cluster()->set_num_servers(servers);
  c.mutable_cluster()->set_num_workers(1);
  c.mutable_cluster()->set_idle_timeout_ms(3600 * 1000);
  c.mutable_cluster()->set_worker_timeout_ms(3600 * 1000);
  c.mutable_data()->set_index_base(0);
  c.mutable_data()->set_num_features(3 * std::max<int64_t>(1, keys));
  c.mutable_data()->set_num_labels(1);
  c.mutable_data()->set_train_file("unused");
  c.mutable_model()->set_hidden(static_cast<int32_t>(dim));  // table 0 ("w1") has rows of `dim` floats
  c.mutable_optimizer()->set_type(SGD);
  c.mutable_optimizer()->set_learning_rate(1e-6f);
  c.mutable_consistency()->set_model(ASP);
  c.mutable_consistency()->set_staleness(-1);
  c.mutable_consistency()->set_cache(false);
  return c;
}

BenchCluster::~BenchCluster() {
  if (client_ != nullptr && !said_bye_) (void)JobSession(client_.get()).Bye();
  client_.reset();
  for (auto& sh : shards_) sh->Stop();
  for (auto& h : hosts_) h->Stop();
  for (auto& t : threads_) t.join();
}

Status BenchCluster::Bye() {
  said_bye_ = true;
  return JobSession(client_.get()).Bye();
}

Status BenchCluster::StartReplicaHosts(const JobConfig& config, const std::vector<std::string>& endpoints) {
  if (config.cluster().num_servers() < 2)
    return Status::InvalidArgument("cluster.replicas needs at least 2 servers, got " +
                                   std::to_string(config.cluster().num_servers()));
  host_config_ = std::make_unique<JobConfig>(config);
  for (const std::string& e : endpoints) host_config_->mutable_cluster()->add_server_addresses(e);
  for (int p = 0; p < config.cluster().num_servers(); ++p) {
    hosts_.push_back(std::make_unique<ReplicaHost>(*host_config_, p));
    TETHER_RETURN_IF_ERROR(hosts_.back()->Start("tcp://127.0.0.1:0", ""));
  }
  for (auto& h : hosts_) {
    ReplicaHost* p = h.get();
    threads_.emplace_back([p] {
      Status st = p->Run();
      if (!st.ok()) LOG(ERROR) << "replica of shard " << p->shard() << ": " << st.message();
    });
  }
  return Status::OK();
}

StatusOr<std::unique_ptr<BenchCluster>> BenchCluster::Start(const JobConfig& config,
                                                            const BenchClientOptions& options) {
  std::unique_ptr<BenchCluster> c(new BenchCluster);
  ClientOptions copts = ClientOptionsFor(config, 0, {});
  if (options.chunk_bytes > 0) copts.max_message_bytes = static_cast<uint64_t>(options.chunk_bytes);
  if (options.max_outstanding > 0) copts.max_outstanding = options.max_outstanding;
  if (config.security().has_curve()) {
    TETHER_ASSIGN_OR_RETURN(copts.curve, CurveClientOptions(config.security().curve()));
  }
  for (int s = 0; s < config.cluster().num_servers(); ++s) {
    c->shards_.push_back(std::make_unique<ServerShard>(config, s));
    TETHER_RETURN_IF_ERROR(c->shards_.back()->Bind("tcp://127.0.0.1:0"));
    copts.servers.push_back(c->shards_.back()->endpoint());
  }
  if (config.cluster().replicas() > 0) TETHER_RETURN_IF_ERROR(c->StartReplicaHosts(config, copts.servers));
  for (auto& sh : c->shards_) {
    ServerShard* p = sh.get();
    c->threads_.emplace_back([p] {
      Status st = p->Run();
      if (!st.ok()) LOG(ERROR) << st.message();
    });
  }
  TETHER_ASSIGN_OR_RETURN(c->client_, WorkerClient::Connect(copts));
  return c;
}

}  // namespace tether
