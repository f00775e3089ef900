// A replica joining a shard with a large table (10^6 rows of 64 floats)
// under a short cluster.liveness_timeout_ms, over 127.0.0.1: the primary's
// loop spends longer than half that timeout building and sending the
// joiner's state, which is no stall of its own. Nobody takes the live
// primary for stopped: it logs no "did not run for" (its replica check
// and its workers' silence check), holds no reply for a stall, drops no
// replica, and its copy claims nothing; the joiner catches up and is
// appended to the chain.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/partition.h"
#include "server/replica_host.h"
#include "tests/testing/cluster.h"
#include "tests/testing/log_capture.h"
#include "tests/testing/poll.h"

namespace tether {
namespace {

using testing::PollUntil;

constexpr uint32_t kW1 = 0;
constexpr uint64_t kRows = 1000000;  // shard 0's rows
constexpr int kDim = 64;
constexpr int kLivenessMs = 400;

// A host on a thread of its own: a placed replica, or a joining process.
struct HostThread {
  template <typename... Args>
  explicit HostThread(Args&&... args) : host(std::forward<Args>(args)...) {
    started = host.Start("tcp://127.0.0.1:0", "");
    if (started.ok())
      thread = std::thread([this] {
        done = host.Run();
        ended.store(true);
      });
  }
  ~HostThread() {
    host.Stop();
    if (thread.joinable()) thread.join();
  }
  ReplicaHost host;
  Status started, done;
  std::atomic<bool> ended{false};  // done is set
  std::thread thread;
};

// The first `n` keys that shard 0 of 3 holds, sorted.
std::vector<uint64_t> ShardZeroKeys(uint64_t n) {
  std::vector<uint64_t> keys;
  for (uint64_t k = 0; keys.size() < n; ++k)
    if (ShardForKey(k, 3) == 0) keys.push_back(k);
  return keys;
}

// The milliseconds the primary's join line names: "... as of entry N (M ms); ...".
int64_t JoinMs(const std::string& line) {
  const size_t ms = line.find(" ms); ");
  const size_t open = line.rfind('(', ms);
  if (ms == std::string::npos || open == std::string::npos) return -1;
  return std::atoll(line.substr(open + 1, ms - open - 1).c_str());
}

TEST(ReplicaRejoinLivenessTest, APrimarySendingALargeStateIsNotTakenForStopped) {
  JobConfig config = testing::SgdJob(3, 1, 4 * kRows, 10, kDim, 0.1f, 120000);
  config.mutable_cluster()->set_replicas(2);
  config.mutable_cluster()->set_liveness_timeout_ms(kLivenessMs);
  // Idle replicas acknowledge well within it.
  config.mutable_cluster()->set_heartbeat_interval_ms(kLivenessMs / 4);
  // Shard 0's chain is processes 1 and 2; only process 2's copy comes, so
  // the chain is one replica short once the start-up timeout dropped 1.
  config.mutable_cluster()->set_startup_timeout_ms(3000);
  testing::InProcessCluster cluster(config);
  JobConfig hosts_config = config;
  for (const std::string& e : cluster.endpoints()) hosts_config.mutable_cluster()->add_server_addresses(e);
  HostThread copy(hosts_config, 2, 2);
  ASSERT_TRUE(copy.started.ok()) << copy.started.ToString();
  ClientOptions options = cluster.Options(0);
  options.request_timeout_ms = 120000;
  std::unique_ptr<WorkerClient> worker = testing::ConnectClient(options);
  ASSERT_NE(worker, nullptr);
  // Shard 0 gets kRows rows, in pulls of 10^4 rows (2.56 MB): each a short
  // turn of the primary's loop and of its copy's.
  const std::vector<uint64_t> keys = ShardZeroKeys(kRows);
  constexpr uint64_t kPart = 10000;
  std::vector<float> rows(kPart * kDim);
  for (uint64_t i = 0; i < kRows; i += kPart) {
    const std::vector<uint64_t> part(keys.begin() + i, keys.begin() + i + kPart);
    ASSERT_TRUE(worker->PullRows(kW1, part, rows.data()).Wait().ok());
  }
  // The worker keeps pulling from every shard while it waits: every pull
  // is answered.
  int pulls = 0;
  std::vector<uint64_t> some(1000);
  for (uint64_t k = 0; k < some.size(); ++k) some[k] = k;
  const auto pull = [&] {
    EXPECT_TRUE(worker->PullRows(kW1, some, rows.data()).Wait().ok());
    ++pulls;
  };
  ASSERT_TRUE(PollUntil(30000, [&] {
    pull();
    return copy.host.member();
  }, 20));

  // From here on nothing may be taken for a stall.
  testing::LogCapture log;
  HostThread joiner(hosts_config, ReplicaHost::Join{0, ""});
  ASSERT_TRUE(joiner.started.ok()) << joiner.started.ToString();
  const int pulls_before = pulls;
  const bool caught_up = PollUntil(240000, [&] {
    pull();
    return joiner.host.member() || joiner.ended.load();
  }, 20);
  ASSERT_TRUE(caught_up) << "the joining process never caught up";
  const auto joins = log.Matching({"a replica joins shard 0 from", "sent it the shard's"});
  ASSERT_EQ(joins.size(), 1u);
  // The premise: the loop was busy past half the liveness timeout.
  EXPECT_GT(JoinMs(joins[0]), kLivenessMs / 2) << joins[0];
  EXPECT_GT(pulls, pulls_before);
  EXPECT_TRUE(log.Matching({"did not run for"}).empty()) << log.Matching({"did not run for"})[0];
  EXPECT_TRUE(log.Matching({"waits to hear from its replicas"}).empty());
  EXPECT_TRUE(log.Matching({"goes on without its replica"}).empty());
  EXPECT_TRUE(log.Matching({"claiming the shard"}).empty());
  EXPECT_EQ(log.Matching({"the replica that joined shard 0", "caught up"}).size(), 1u);
  EXPECT_FALSE(copy.host.claimed());
  EXPECT_FALSE(joiner.host.claimed());
  const ReplicaLink* link = cluster.server(0).replica_link();
  ASSERT_NE(link, nullptr);
  worker.reset();
  cluster.Stop();
  EXPECT_EQ(link->chain_endpoints(), (std::vector<std::string>{copy.host.endpoint(), joiner.host.endpoint()}));
  EXPECT_GT(link->forgiven_busy_ms(), kLivenessMs / 2);
}

}  // namespace
}  // namespace tether
