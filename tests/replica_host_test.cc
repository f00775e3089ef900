// Replicated shards over real sockets (server/replica_link.h,
// server/replica_host.h): a job whose every shard has a replica copy in the
// next server's place, trained by workers on threads. Each copy takes in
// its primary's inputs over 127.0.0.1 and ends bit for bit equal to it, and
// no reply reached a worker before the replica acknowledged what it
// depended on.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "server/replica_host.h"
#include "tests/testing/cluster.h"
#include "tests/testing/recorded_job.h"
#include "tests/testing/temp_dir.h"
#include "worker/trainer.h"

namespace tether {
namespace {

using testing::DigestShard;
using testing::ShardThread;

struct ReplicatedJob {
  std::vector<std::unique_ptr<ShardThread>> primaries;
  std::vector<std::unique_ptr<ReplicaHost>> hosts;
  std::vector<Status> hosts_done;
  std::vector<Status> workers;
  JobConfig host_config;
};

// Trains `config` (replicas = 1) with every shard's primary on a ShardThread
// and every copy on a ReplicaHost thread; joins everything.
ReplicatedJob RunReplicated(const JobConfig& config) {
  const int servers = config.cluster().num_servers();
  ReplicatedJob job;
  job.host_config = config;
  for (int s = 0; s < servers; ++s) {
    job.primaries.push_back(std::make_unique<ShardThread>(config, s));
    job.host_config.mutable_cluster()->add_server_addresses(job.primaries.back()->endpoint());
  }
  for (int p = 0; p < servers; ++p) {
    job.hosts.push_back(std::make_unique<ReplicaHost>(job.host_config, p));
    EXPECT_TRUE(job.hosts.back()->Start("tcp://127.0.0.1:0", "").ok());
  }
  job.hosts_done.resize(servers);
  std::vector<std::thread> threads;
  for (int p = 0; p < servers; ++p) threads.emplace_back([&job, p] { job.hosts_done[p] = job.hosts[p]->Run(); });
  job.workers.resize(config.cluster().num_workers());
  std::vector<std::thread> workers;
  for (int w = 0; w < config.cluster().num_workers(); ++w) {
    workers.emplace_back([&job, &config, w] {
      TrainerOptions o;
      o.rank = w;
      for (int s = 0; s < config.cluster().num_servers(); ++s)
        o.servers.push_back(job.host_config.cluster().server_addresses(s));
      job.workers[w] = RunWorker(config, o).status();
    });
  }
  for (auto& t : workers) t.join();
  for (auto& s : job.primaries) EXPECT_TRUE(s->WaitForExit(30000).ok());
  for (auto& t : threads) t.join();
  return job;
}

JobConfig ReplicatedBibtex(int servers) {
  JobConfig c = testing::SmallBibtexJob();
  c.mutable_cluster()->set_num_servers(servers);
  c.mutable_cluster()->set_replicas(1);
  return c;
}

TEST(ReplicaHostTest, EveryCopyEndsEqualToItsPrimary) {
  JobConfig config = ReplicatedBibtex(3);
  // Checkpoint rounds too: the primaries write them, the copies do not.
  testing::ScopedTempDir ckpt;
  config.mutable_checkpoint()->set_dir(ckpt.path());
  config.mutable_checkpoint()->set_every_clocks(20);
  ReplicatedJob job = RunReplicated(config);
  for (const Status& w : job.workers) ASSERT_TRUE(w.ok()) << w.ToString();
  const std::string dir = ::testing::TempDir() + "/replica_host_test";
  for (int p = 0; p < 3; ++p) {
    ASSERT_TRUE(job.hosts_done[p].ok()) << job.hosts_done[p].ToString();
    const int shard = job.hosts[p]->shard();
    EXPECT_EQ(shard, (p + 2) % 3);
    EXPECT_FALSE(job.hosts[p]->claimed());
    const ServerShard& primary = job.primaries[shard]->shard();
    const ServerShard& copy = job.hosts[p]->copy();
    EXPECT_EQ(DigestShard(copy, config, shard, dir + "/copy" + std::to_string(p)),
              DigestShard(primary, config, shard, dir + "/primary" + std::to_string(p)))
        << "shard " << shard;
    // Every message the primary took in was forwarded and applied (the
    // last ones, taken in as the shard ended, need not be acknowledged).
    ASSERT_NE(primary.replica_link(), nullptr);
    EXPECT_EQ(job.hosts[p]->applied(), primary.replica_link()->log().applied());
    EXPECT_GT(primary.replica_link()->log().commit(), 100u);
    EXPECT_EQ(primary.replica_link()->chain_endpoints(), std::vector<std::string>{job.hosts[p]->endpoint()});
    // The copy sent nothing: what it would have sent, the primary sent.
    EXPECT_GT(copy.replies_muted(), 0u);
    EXPECT_EQ(copy.stats().pushes, primary.stats().pushes);
    EXPECT_EQ(copy.stats().pulls, primary.stats().pulls);
    EXPECT_EQ(copy.stats().bytes_in, primary.stats().bytes_in);
    EXPECT_EQ(copy.stats().bad_messages, primary.stats().bad_messages);
    EXPECT_EQ(copy.stats().rows_pushed, primary.stats().rows_pushed);
    // The reply cache too: what the copy recorded muted, the primary sent.
    EXPECT_GT(testing::ExpectSameReplyCache(primary, copy), 100u);
  }
  std::filesystem::remove_all(dir);
}

TEST(ReplicaHostTest, ARefusedReplicaEndsNamingWhy) {
  // A host whose primary holds another shard (a config with the addresses in
  // the wrong order) is refused at REPLICA_HELLO and ends with the reason.
  JobConfig config = ReplicatedBibtex(2);
  config.mutable_cluster()->set_startup_timeout_ms(5000);
  ShardThread primary(config, 0);
  JobConfig wrong = config;
  wrong.mutable_cluster()->add_server_addresses(primary.endpoint());
  wrong.mutable_cluster()->add_server_addresses(primary.endpoint());
  ReplicaHost host(wrong, 0);  // holds shard 1, whose address names shard 0's primary
  ASSERT_TRUE(host.Start("tcp://127.0.0.1:0", "").ok());
  const Status st = host.Run();
  EXPECT_EQ(st.code(), Status::Code::kFailedPrecondition) << st.ToString();
  EXPECT_NE(st.message().find("refused by the primary"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("whose replica is process 1, not process 0 for shard 1"), std::string::npos)
      << st.message();
  primary.Stop();
}

TEST(ReplicaHostTest, NoAddressForThePrimaryIsRefusedAtStart) {
  JobConfig config = ReplicatedBibtex(2);
  ReplicaHost host(config, 1);
  const Status st = host.Start("tcp://127.0.0.1:0", "");
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(st.message().find("cluster.server_addresses or cluster.rendezvous"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace tether
