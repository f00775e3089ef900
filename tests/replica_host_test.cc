// Replicated shards over real sockets (server/replica_link.h,
// server/replica_host.h): a job whose every shard has a replica copy in the
// next server's place (or, with two replicas, in each of the next two),
// trained by workers on threads. Each copy takes in
// its primary's inputs over 127.0.0.1 and ends bit for bit equal to it, and
// no reply reached a worker before the replica acknowledged what it
// depended on. Under security.curve the same holds, with the host holding
// the servers' key pair, and a worker's key cannot replicate.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <zmq.hpp>

#include "core/net/curve.h"
#include "core/net/transport.h"
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

// Trains `config` with every shard's primary on a ShardThread and every
// copy on a ReplicaHost thread (process p's copies of shards p − 1, ...,
// p − replicas, in that order); joins everything.
ReplicatedJob RunReplicated(const JobConfig& config) {
  const int servers = config.cluster().num_servers();
  ReplicatedJob job;
  job.host_config = config;
  for (int s = 0; s < servers; ++s) {
    job.primaries.push_back(std::make_unique<ShardThread>(config, s));
    job.host_config.mutable_cluster()->add_server_addresses(job.primaries.back()->endpoint());
  }
  for (int p = 0; p < servers; ++p) {
    for (int d = 1; d <= config.cluster().replicas(); ++d) {
      job.hosts.push_back(std::make_unique<ReplicaHost>(job.host_config, p, d));
      EXPECT_TRUE(job.hosts.back()->Start("tcp://127.0.0.1:0", "").ok());
    }
  }
  job.hosts_done.resize(job.hosts.size());
  std::vector<std::thread> threads;
  for (size_t h = 0; h < job.hosts.size(); ++h)
    threads.emplace_back([&job, h] { job.hosts_done[h] = job.hosts[h]->Run(); });
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

JobConfig ReplicatedBibtex(int servers, int replicas = 1) {
  JobConfig c = testing::SmallBibtexJob();
  c.mutable_cluster()->set_num_servers(servers);
  c.mutable_cluster()->set_replicas(replicas);
  return c;
}

// Every host of `job` ended OK with its copy bit for bit equal to its primary.
void ExpectCopiesEqual(const ReplicatedJob& job, const JobConfig& config) {
  for (const Status& w : job.workers) ASSERT_TRUE(w.ok()) << w.ToString();
  testing::ScopedTempDir dir;
  const int servers = config.cluster().num_servers();
  const int replicas = config.cluster().replicas();
  for (int h = 0; h < static_cast<int>(job.hosts.size()); ++h) {
    const int p = h / replicas, d = h % replicas + 1;
    ASSERT_TRUE(job.hosts_done[h].ok()) << job.hosts_done[h].ToString();
    const int shard = job.hosts[h]->shard();
    EXPECT_EQ(shard, (p + servers - d) % servers);
    EXPECT_FALSE(job.hosts[h]->claimed());
    const ServerShard& primary = job.primaries[shard]->shard();
    const ServerShard& copy = job.hosts[h]->copy();
    EXPECT_EQ(DigestShard(copy, config, shard, dir.File("copy" + std::to_string(h))),
              DigestShard(primary, config, shard, dir.File("primary" + std::to_string(p))))
        << "shard " << shard;
    // Every message the primary took in was forwarded and applied (the
    // last ones, taken in as the shard ended, need not be acknowledged).
    ASSERT_NE(primary.replica_link(), nullptr);
    EXPECT_EQ(job.hosts[h]->applied(), primary.replica_link()->log().applied());
    EXPECT_GT(primary.replica_link()->log().commit(), 100u);
    // The chain in order: the copy `d` places after the primary is d-th.
    const std::vector<std::string>& chain = primary.replica_link()->chain_endpoints();
    ASSERT_EQ(chain.size(), static_cast<size_t>(replicas));
    EXPECT_EQ(chain[d - 1], job.hosts[h]->endpoint());
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
}

TEST(ReplicaHostTest, EveryCopyEndsEqualToItsPrimary) {
  JobConfig config = ReplicatedBibtex(3);
  // Checkpoint rounds too: the primaries write them, the copies do not.
  testing::ScopedTempDir ckpt;
  config.mutable_checkpoint()->set_dir(ckpt.path());
  config.mutable_checkpoint()->set_every_clocks(20);
  ExpectCopiesEqual(RunReplicated(config), config);
}

// A chain of three: each shard's two copies end equal to the primary, and
// the primary committed only what both acknowledged.
TEST(ReplicaHostTest, EveryCopyOfAChainOfThreeEndsEqualToItsPrimary) {
  const JobConfig config = ReplicatedBibtex(3, 2);
  ExpectCopiesEqual(RunReplicated(config), config);
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

TEST(ReplicaHostTest, APrimaryStartedWithoutReplicasRefusesNamingTheFlag) {
  // Servers started with different --replicas: the one without refuses the
  // replica (and says so) instead of taking its messages for a worker's.
  JobConfig config = ReplicatedBibtex(2);
  JobConfig unreplicated = config;
  unreplicated.mutable_cluster()->set_replicas(0);
  ShardThread primary(unreplicated, 0);
  JobConfig host_config = config;
  host_config.mutable_cluster()->add_server_addresses(primary.endpoint());
  host_config.mutable_cluster()->add_server_addresses("tcp://127.0.0.1:1");
  ReplicaHost host(host_config, 1);  // holds shard 0
  ASSERT_TRUE(host.Start("tcp://127.0.0.1:0", "").ok());
  const Status st = host.Run();
  EXPECT_EQ(st.code(), Status::Code::kFailedPrecondition) << st.ToString();
  EXPECT_NE(st.message().find("runs without replicas (cluster.replicas=0 here), but server process 1 holds a copy "
                              "of it with cluster.replicas=1 (the copy serves at tcp://127.0.0.1:"),
            std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("): start every server with the same --replicas"), std::string::npos) << st.message();
  // The servers disagree: the host says so, for its own shard to end too.
  EXPECT_EQ(host.config_refusal().rfind("[server 0] shard 0 runs without replicas (cluster.replicas=0 here)", 0), 0u)
      << host.config_refusal();
  EXPECT_EQ(primary.stats().bad_messages, 1u);
  primary.Stop();
}

TEST(ReplicaHostTest, NoAddressForThePrimaryIsRefusedAtStart) {
  JobConfig config = ReplicatedBibtex(2);
  ReplicaHost host(config, 1);
  const Status st = host.Start("tcp://127.0.0.1:0", "");
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(st.message().find("cluster.server_addresses or cluster.rendezvous"), std::string::npos) << st.message();
}

// security.curve: one section for every process, as docs/SECURITY.md sets
// it up: the servers' key pair and the workers' pair, in a directory of the
// test.
class ReplicaHostCurveTest : public ::testing::Test {
 protected:
  JobConfig WithCurve(JobConfig c) {
    server_ = WritePair("server");
    worker_ = WritePair("worker");
    CurveConfig* k = c.mutable_security()->mutable_curve();
    k->set_server_secret_key_file(dir_.File("server.key"));
    k->set_server_public_key_file(dir_.File("server.pub"));
    k->set_client_secret_key_file(dir_.File("worker.key"));
    k->add_authorized_keys(dir_.File("worker.pub"));
    return c;
  }
  CurveKeyPair WritePair(const std::string& name) {
    auto keys = NewCurveKeyPair();
    EXPECT_TRUE(keys.ok()) << keys.status().ToString();
    EXPECT_TRUE(WriteCurveKeyFiles(dir_.path(), name, *keys).ok());
    return *keys;
  }
  // A DEALER to `endpoint` holding `mine`, that says REPLICA_HELLO as the
  // replica of shard 0 (process 1 of a two-server job).
  zmq::socket_t SayReplicaHello(zmq::context_t& ctx, const std::string& endpoint, const CurveKeyPair& mine,
                                const std::string& identity) {
    SocketOptions o;
    o.curve.secret_key = mine.secret_key;
    o.curve.public_key = mine.public_key;
    o.curve.server_public_key = server_.public_key;
    auto dealer = ConnectDealer(ctx, endpoint, identity, o);
    EXPECT_TRUE(dealer.ok()) << dealer.status().ToString();
    Message hello;
    hello.header.set_type(REPLICA_HELLO);
    ReplicaHelloBody* b = hello.header.mutable_replica_hello();
    b->set_shard(0);
    b->set_process(1);
    b->set_endpoint("tcp://127.0.0.1:9");
    b->set_incarnation(7);
    EXPECT_TRUE(SendMessage(*dealer, &hello, nullptr, "shard 0").ok());
    return std::move(*dealer);
  }
  testing::ScopedTempDir dir_;
  CurveKeyPair server_, worker_;
};

// The next message on `dealer` within `timeout_ms`; false when none came.
bool NextMessage(zmq::socket_t& dealer, int timeout_ms, Message* m) {
  zmq::pollitem_t item{dealer.handle(), 0, ZMQ_POLLIN, 0};
  if (zmq::poll(&item, 1, std::chrono::milliseconds(timeout_ms)) <= 0) return false;
  const Status st = RecvMessage(dealer, m, nullptr);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return st.ok();
}

TEST_F(ReplicaHostCurveTest, HostsWithTheServersKeysKeepCopiesEqualToTheirPrimaries) {
  const JobConfig config = WithCurve(ReplicatedBibtex(2));
  ReplicatedJob job = RunReplicated(config);
  ExpectCopiesEqual(job, config);
  for (const auto& primary : job.primaries) EXPECT_EQ(primary->shard().handshakes_refused(), 0u);
}

TEST_F(ReplicaHostCurveTest, AWorkerKeySayingReplicaHelloIsRefusedNamingWhy) {
  JobConfig config = WithCurve(ReplicatedBibtex(2));
  config.mutable_cluster()->set_startup_timeout_ms(10000);
  ShardThread primary(config, 0);
  zmq::context_t ctx(1);
  zmq::socket_t intruder = SayReplicaHello(ctx, primary.endpoint(), worker_, "intruder");
  Message answer;
  ASSERT_TRUE(NextMessage(intruder, 5000, &answer));
  EXPECT_EQ(answer.header.type(), REPLICATE_ACK);
  EXPECT_TRUE(answer.header.replicate_ack().refused());
  EXPECT_NE(answer.header.replicate_ack().reason().find("REPLICA_HELLO from a connection whose CURVE key " +
                                                        worker_.public_key + " is not the servers' key"),
            std::string::npos)
      << answer.header.replicate_ack().reason();
  // The refusal changed nothing: a host with the servers' pair is still
  // taken as the replica (the primary probes it; no refusal comes).
  zmq::socket_t host = SayReplicaHello(ctx, primary.endpoint(), server_, "replica-1-0-7");
  ASSERT_TRUE(NextMessage(host, 5000, &answer));
  EXPECT_EQ(answer.header.type(), HEARTBEAT) << TypeName(answer.header.type());
  intruder.set(zmq::sockopt::linger, 0);
  host.set(zmq::sockopt::linger, 0);
  primary.Stop();
}

TEST_F(ReplicaHostCurveTest, AHostWhosePairIsNotTheServersEndsNamingTheKeys) {
  JobConfig config = WithCurve(ReplicatedBibtex(2));
  config.mutable_cluster()->set_startup_timeout_ms(20000);
  ShardThread primary(config, 0);
  // The worker's secret key with the servers' public key: a pair that
  // does not match, which fails every handshake.
  JobConfig host_config = config;
  host_config.mutable_security()->mutable_curve()->set_server_secret_key_file(dir_.File("worker.key"));
  host_config.mutable_cluster()->add_server_addresses(primary.endpoint());
  host_config.mutable_cluster()->add_server_addresses(primary.endpoint());
  ReplicaHost host(host_config, 1);
  ASSERT_TRUE(host.Start("tcp://127.0.0.1:0", "").ok());
  const auto started = std::chrono::steady_clock::now();
  const Status st = host.Run();
  EXPECT_EQ(st.code(), Status::Code::kFailedPrecondition) << st.ToString();
  EXPECT_NE(st.message().find("the servers must share one key pair"), std::string::npos) << st.message();
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(15));
  primary.Stop();
}

}  // namespace
}  // namespace tether
