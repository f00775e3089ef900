// A process joining a running replicated shard (server/replica_host.h
// Join, tether-server --join_as_replica) over real sockets: shard 0's
// replica leaves mid-training, a new host joins the shard, is sent its
// whole state, follows it and, once it caught up, holds replies back as a
// replica does. At the end its copy is bit for bit the primary's, as a
// replica that followed from the start would be.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/config.h"
#include "core/net/rendezvous.h"
#include "server/replica_host.h"
#include "tests/testing/cluster.h"
#include "tests/testing/poll.h"
#include "tests/testing/recorded_job.h"
#include "tests/testing/temp_dir.h"
#include "worker/trainer.h"

namespace tether {
namespace {

using testing::PollUntil;

// A host joining shard `shard` on a thread of its own.
struct Joiner {
  Joiner(const JobConfig& config, int shard) : host(config, ReplicaHost::Join{shard, ""}) {
    started = host.Start("tcp://127.0.0.1:0", "");
    if (started.ok())
      thread = std::thread([this] {
        done = host.Run();
        ended.store(true);
      });
  }
  ~Joiner() {
    host.Stop();
    if (thread.joinable()) thread.join();
  }
  ReplicaHost host;
  Status started, done;
  std::atomic<bool> ended{false};  // done is set
  std::thread thread;
};

// Shards 0 .. n-1 of `config` on threads of their own; their addresses are
// appended to `addressed`'s cluster.server_addresses, in shard order.
std::vector<std::unique_ptr<testing::ShardThread>> StartPrimaries(const JobConfig& config, int n,
                                                                  JobConfig* addressed) {
  std::vector<std::unique_ptr<testing::ShardThread>> primaries;
  for (int s = 0; s < n; ++s) {
    primaries.push_back(std::make_unique<testing::ShardThread>(config, s));
    addressed->mutable_cluster()->add_server_addresses(primaries.back()->endpoint());
  }
  return primaries;
}

TEST(ReplicaJoinTest, AJoinedReplicaEndsEqualToItsPrimary) {
  JobConfig config = testing::SmallBibtexJob();
  config.mutable_cluster()->set_replicas(1);
  config.mutable_train()->set_epochs(2);
  JobConfig hosts_config = config;
  const auto primaries = StartPrimaries(config, 2, &hosts_config);
  // Process 0 holds shard 1's copy for the whole job; process 1's copy of
  // shard 0 leaves mid-training and a new process joins shard 0.
  ReplicaHost keeps(hosts_config, 0);
  auto leaves = std::make_unique<ReplicaHost>(hosts_config, 1);
  ASSERT_TRUE(keeps.Start("tcp://127.0.0.1:0", "").ok());
  ASSERT_TRUE(leaves->Start("tcp://127.0.0.1:0", "").ok());
  Status keeps_done, leaves_done;
  std::thread keeps_thread([&] { keeps_done = keeps.Run(); });
  std::thread leaves_thread([&] { leaves_done = leaves->Run(); });

  // Worker 0 waits at clock 10 until the new replica caught up; worker 1
  // trains on within the staleness bound meanwhile.
  std::atomic<bool> reached{false}, release{false};
  std::vector<Status> workers(2);
  std::vector<std::thread> worker_threads;
  for (int w = 0; w < 2; ++w) {
    worker_threads.emplace_back([&, w] {
      TrainerOptions o;
      o.rank = w;
      for (int s = 0; s < 2; ++s) o.servers.push_back(hosts_config.cluster().server_addresses(s));
      if (w == 0)
        o.on_progress = [&](const WorkerProgress& p) {
          if (p.clock != 10 || reached.exchange(true)) return;
          PollUntil(60000, [&] { return release.load(); });
        };
      workers[w] = RunWorker(config, o).status();
    });
  }
  ASSERT_TRUE(PollUntil(60000, [&] { return reached.load(); }));
  leaves->Stop();
  leaves_thread.join();
  EXPECT_TRUE(leaves_done.ok()) << leaves_done.ToString();
  leaves.reset();  // its connection closes: shard 0 goes on without it
  // Refused while the primary has not yet noticed; accepted once it has.
  std::unique_ptr<Joiner> joiner;
  const bool joined = PollUntil(20000, [&] {
    if (joiner != nullptr && joiner->host.member()) return true;
    if (joiner == nullptr || (joiner->thread.joinable() && !joiner->done.ok())) {
      joiner.reset();
      joiner = std::make_unique<Joiner>(hosts_config, 0);
      EXPECT_TRUE(joiner->started.ok()) << joiner->started.ToString();
    }
    return false;
  });
  release.store(true);
  for (auto& t : worker_threads) t.join();
  for (const Status& w : workers) EXPECT_TRUE(w.ok()) << w.ToString();
  for (auto& p : primaries) EXPECT_TRUE(p->WaitForExit(30000).ok());
  keeps_thread.join();
  ASSERT_TRUE(joined) << "the joining process never caught up";
  joiner->thread.join();
  ASSERT_TRUE(joiner->done.ok()) << joiner->done.ToString();
  EXPECT_FALSE(joiner->host.claimed());
  const ServerShard& primary = primaries[0]->shard();
  ASSERT_NE(primary.replica_link(), nullptr);
  EXPECT_EQ(joiner->host.applied(), primary.replica_link()->log().applied());
  EXPECT_EQ(primary.replica_link()->chain_endpoints(), std::vector<std::string>{joiner->host.endpoint()});
  EXPECT_EQ(primary.replica_link()->generation(), 4u);  // dropped, learner, appended
  testing::ScopedTempDir dir;
  testing::ExpectSameShardState(primary, joiner->host.copy(), config, 0, dir.path());
}

// A joining process that read a shard's rendezvous entry before the shard
// moved (a failover publishes the claiming copy there a moment later) reads
// it again while unanswered and joins the shard where it is now.
TEST(ReplicaJoinTest, AJoinerFollowsTheShardsMoveInTheRendezvous) {
  testing::ScopedTempDir rdzv_dir;
  JobConfig config = testing::SmallBibtexJob();
  config.mutable_cluster()->set_replicas(1);
  config.mutable_cluster()->set_rendezvous("file:" + rdzv_dir.path());
  testing::ShardThread primary(config, 0);
  // Its replica says hello and leaves: the shard goes on without one.
  JobConfig addressed = config;
  addressed.mutable_cluster()->add_server_addresses(primary.endpoint());
  addressed.mutable_cluster()->add_server_addresses(primary.endpoint());
  auto leaves = std::make_unique<ReplicaHost>(addressed, 1);
  ASSERT_TRUE(leaves->Start("tcp://127.0.0.1:0", "").ok());
  std::thread leaves_thread([&] { (void)leaves->Run(); });
  ASSERT_TRUE(PollUntil(20000, [&] { return leaves->connected(); }));
  auto rdzv = Rendezvous::Open(config.cluster().rendezvous());
  ASSERT_TRUE(rdzv.ok()) << rdzv.status().ToString();
  const std::string job = JobId(config);
  const auto entry = [&](int shard) { return RendezvousKey{job, config.cluster().generation(), ServerEntryName(shard)}; };
  ASSERT_TRUE((*rdzv)->Set(entry(0), "tcp://127.0.0.1:9", 1000).ok());  // where nothing answers
  ASSERT_TRUE((*rdzv)->Set(entry(1), "tcp://127.0.0.1:9", 1000).ok());
  leaves->Stop();
  leaves_thread.join();
  leaves.reset();
  std::unique_ptr<Joiner> joiner;
  bool moved = false;
  const bool joined = PollUntil(20000, [&] {
    if (joiner != nullptr && joiner->host.member()) return true;
    if (joiner == nullptr || (joiner->thread.joinable() && !joiner->done.ok())) {
      // Refused while the primary had not yet noticed its replica left.
      joiner.reset();
      EXPECT_TRUE((*rdzv)->Set(entry(0), "tcp://127.0.0.1:9", 1000).ok());
      moved = false;
      joiner = std::make_unique<Joiner>(config, 0);
    }
    if (!moved) moved = (*rdzv)->Set(entry(0), primary.endpoint(), 1000).ok();  // the shard "moves"
    return false;
  });
  ASSERT_TRUE(joined) << "the joining process never caught up";
  primary.Stop();
  EXPECT_TRUE(primary.WaitForExit(30000).ok());
}

// A joining process without a shard asks every shard in turn; when every
// one refuses for now (here each primary still waits for its own replica),
// it asks them all again every 500 ms, and past its
// cluster.startup_timeout_ms it ends naming each refusal, not only the last
// one's.
TEST(ReplicaJoinTest, AJoinerEveryShardRefusesNamesEachRefusal) {
  JobConfig config = testing::SmallBibtexJob();
  config.mutable_cluster()->set_replicas(1);
  JobConfig hosts_config = config;
  const auto primaries = StartPrimaries(config, 2, &hosts_config);
  hosts_config.mutable_cluster()->set_startup_timeout_ms(1200);
  ReplicaHost joiner(hosts_config, ReplicaHost::Join{-1, ""});
  ASSERT_TRUE(joiner.Start("tcp://127.0.0.1:0", "").ok());
  const Status st = joiner.Run();
  EXPECT_EQ(st.code(), Status::Code::kFailedPrecondition) << st.ToString();
  EXPECT_NE(st.message().find("no shard took this process as its replica (asked every 500 ms for "
                              "cluster.startup_timeout_ms=1200 ms; the last answers: "),
            std::string::npos)
      << st.message();
  EXPECT_GE(joiner.asked_again(), 2);
  EXPECT_FALSE(joiner.nothing_to_join());
  for (const char* why :
       {"shard 0 waits for its replica (server process 1)", "shard 1 waits for its replica (server process 0)"})
    EXPECT_NE(st.message().find(why), std::string::npos) << st.message();
  for (auto& p : primaries) p->Stop();
}

// A joining process without a shard that comes the moment shard 1's
// replica died, before shard 1's primary dropped it (the connections are
// probed every 100 ms), is refused for now there, not told the chain is
// full: it asks every shard again 500 ms later and joins shard 1, where
// shard 0 has all its replicas.
TEST(ReplicaJoinTest, AJoinerForAReplicaThatJustDiedJoinsItsShard) {
  JobConfig config = testing::SmallBibtexJob();
  config.mutable_cluster()->set_replicas(1);
  JobConfig hosts_config = config;
  const auto primaries = StartPrimaries(config, 2, &hosts_config);
  // Process 1 holds shard 0's copy, process 0 shard 1's.
  ReplicaHost keeps(hosts_config, 1);
  auto dies = std::make_unique<ReplicaHost>(hosts_config, 0);
  ASSERT_TRUE(keeps.Start("tcp://127.0.0.1:0", "").ok());
  ASSERT_TRUE(dies->Start("tcp://127.0.0.1:0", "").ok());
  Status keeps_done, dies_done;
  std::thread keeps_thread([&] { keeps_done = keeps.Run(); });
  std::thread dies_thread([&] { dies_done = dies->Run(); });
  ASSERT_TRUE(PollUntil(20000, [&] { return keeps.connected() && dies->connected(); }));
  dies->Stop();
  dies_thread.join();
  dies.reset();  // its connection closes
  auto joiner = std::make_unique<Joiner>(hosts_config, -1);
  ASSERT_TRUE(joiner->started.ok()) << joiner->started.ToString();
  ASSERT_TRUE(PollUntil(30000, [&] { return joiner->host.member() || joiner->ended.load(); }));
  EXPECT_TRUE(joiner->host.member()) << joiner->done.ToString();
  EXPECT_FALSE(joiner->host.nothing_to_join());
  EXPECT_EQ(joiner->host.shard(), 1);
  joiner.reset();  // stopped before its primary, which it would claim
  keeps.Stop();
  keeps_thread.join();
  for (auto& p : primaries) p->Stop();
  EXPECT_TRUE(dies_done.ok()) << dies_done.ToString();
  EXPECT_TRUE(keeps_done.ok()) << keeps_done.ToString();
}

// A joining process given a shard that takes no joining process now (its
// primary waits for its replica to introduce itself) asks it again every
// 500 ms; once the replica came, the shard has all its replicas, and the
// joining process ends with nothing_to_join() (tether-server exits
// kExitNothingToJoin, which tether-launch does not count as a failure).
TEST(ReplicaJoinTest, AJoinerAsksAgainUntilTheChainIsFull) {
  JobConfig config = testing::SmallBibtexJob();
  config.mutable_cluster()->set_replicas(1);
  JobConfig hosts_config = config;
  const auto primaries = StartPrimaries(config, 2, &hosts_config);
  Joiner joiner(hosts_config, 0);
  ASSERT_TRUE(joiner.started.ok()) << joiner.started.ToString();
  ASSERT_TRUE(PollUntil(20000, [&] { return joiner.host.asked_again() >= 2; }));
  EXPECT_FALSE(joiner.ended.load());
  EXPECT_FALSE(joiner.host.nothing_to_join());
  // Shard 0's own replica (process 1's copy) introduces itself.
  ReplicaHost replica(hosts_config, 1);
  ASSERT_TRUE(replica.Start("tcp://127.0.0.1:0", "").ok());
  Status replica_done;
  std::thread replica_thread([&] { replica_done = replica.Run(); });
  ASSERT_TRUE(PollUntil(20000, [&] { return joiner.ended.load(); }));
  EXPECT_TRUE(joiner.host.nothing_to_join());
  EXPECT_EQ(joiner.done.code(), Status::Code::kFailedPrecondition) << joiner.done.ToString();
  EXPECT_NE(joiner.done.message().find("shard 0 has all its replicas (cluster.replicas=1: "), std::string::npos)
      << joiner.done.message();
  replica.Stop();
  replica_thread.join();
  EXPECT_TRUE(replica_done.ok()) << replica_done.ToString();
  for (auto& p : primaries) p->Stop();
}

}  // namespace
}  // namespace tether
