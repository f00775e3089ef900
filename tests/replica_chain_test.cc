// The copies of a shard with two replicas (server/replica_host.h,
// cluster.replicas = 2) when its primary goes, over 127.0.0.1 with a primary
// this test plays (a ROUTER that forwards an entry naming the chain): the
// first copy of the chain claims the shard; the second finds the first
// answering and leaves the claim to it (rejoin() names it); with the first
// gone too (its port refuses), the second claims at once; with the first
// stopped (its port accepts, nothing answers), after the liveness timeout.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <zmq.hpp>

#include "core/net/message.h"
#include "core/net/transport.h"
#include "server/replica_host.h"
#include "server/shard_input.h"
#include "tests/testing/log_capture.h"
#include "tests/testing/poll.h"
#include "tests/testing/recorded_job.h"
#include "tests/testing/silent_listener.h"

namespace tether {
namespace {

using testing::PollUntil;

// A host of shard 0's copy running on a thread of its own.
struct RunningHost {
  RunningHost(const JobConfig& config, int process, int distance) : host(config, process, distance) {
    started = host.Start("tcp://127.0.0.1:0", "");
    if (started.ok()) thread = std::thread([this] { done = host.Run(); });
  }
  ~RunningHost() { Join(); }
  void Join() {
    host.Stop();
    if (thread.joinable()) thread.join();
  }
  ReplicaHost host;
  Status started, done;
  std::thread thread;
};

class ReplicaChainTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_ = testing::SmallBibtexJob();
    config_.mutable_cluster()->set_num_servers(3);
    config_.mutable_cluster()->set_replicas(2);
    config_.mutable_cluster()->set_liveness_timeout_ms(1000);
    SocketOptions o;
    std::string bound;
    auto router = BindRouter(ctx_, "tcp://127.0.0.1:0", o, &bound);
    ASSERT_TRUE(router.ok()) << router.status().ToString();
    primary_ = std::move(*router);
    primary_.set(zmq::sockopt::router_mandatory, 1);
    primary_.set(zmq::sockopt::linger, 0);
    config_.mutable_cluster()->add_server_addresses(bound);
    for (int s = 1; s < 3; ++s) config_.mutable_cluster()->add_server_addresses("tcp://127.0.0.1:1");
  }

  // Reads REPLICA_HELLOs until `n` processes introduced themselves:
  // process → its connection's identity and serving endpoint.
  void AwaitHellos(size_t n) {
    ASSERT_TRUE(PollUntil(10000, [&] {
      Message m;
      std::string identity;
      while (RecvMessage(primary_, &m, &identity).ok())
        if (m.header.type() == REPLICA_HELLO)
          hellos_[m.header.replica_hello().process()] = {identity, m.header.replica_hello().endpoint()};
      return hellos_.size() >= n;
    }));
  }

  // Entry 1 (a mark that changes nothing), naming the chain `chain`, to
  // every process that introduced itself.
  void SendEntry(const std::vector<std::string>& chain) {
    Message mark;
    mark.header.set_type(SHARD_DECISION);
    mark.header.mutable_shard_decision()->set_remove_rank(-1);
    const std::string payload = EncodeShardInput("", mark);
    for (const auto& [process, peer] : hellos_) {
      Message m;
      m.header.set_type(REPLICATE);
      m.header.set_shard_generation(1);
      for (const std::string& ep : chain) m.header.add_chain_endpoints(ep);
      ReplicateBody* b = m.header.mutable_replicate();
      b->set_shard(0);
      b->set_seq(1);
      b->set_payload_bytes(payload.size());
      const size_t padded = (payload.size() + 7) / 8 * 8;
      m.header.set_num_keys(padded / 8);
      m.keys.rebuild(padded);
      std::fill(static_cast<char*>(m.keys.data()), static_cast<char*>(m.keys.data()) + padded, 0);
      std::copy(payload.begin(), payload.end(), static_cast<char*>(m.keys.data()));
      const std::string to = peer.first;
      ASSERT_TRUE(SendMessage(primary_, &m, &to, "replica").ok());
    }
  }

  JobConfig config_;
  zmq::context_t ctx_{1};
  zmq::socket_t primary_;
  std::map<int, std::pair<std::string, std::string>> hellos_;
};

TEST_F(ReplicaChainTest, TheFirstCopyClaimsAndTheSecondLeavesTheClaimToIt) {
  RunningHost first(config_, 1, 1), second(config_, 2, 2);
  ASSERT_TRUE(first.started.ok()) << first.started.ToString();
  ASSERT_TRUE(second.started.ok()) << second.started.ToString();
  EXPECT_EQ(second.host.shard(), 0);
  AwaitHellos(2);
  SendEntry({first.host.endpoint(), second.host.endpoint()});
  ASSERT_TRUE(PollUntil(10000, [&] { return first.host.applied() == 1 && second.host.applied() == 1; }));
  primary_.close();  // the primary's process died
  ASSERT_TRUE(PollUntil(10000, [&] { return first.host.claimed(); }));
  ASSERT_TRUE(PollUntil(10000, [&] { return !second.thread.joinable() || !second.host.rejoin().empty(); }));
  second.Join();
  EXPECT_TRUE(second.done.ok()) << second.done.ToString();
  EXPECT_EQ(second.host.rejoin(), first.host.endpoint());
  EXPECT_FALSE(second.host.claimed());
  EXPECT_EQ(second.host.applied(), 1u);
}

// The first copy died with the primary (its port refuses connections): the
// second claims at once, not after cluster.liveness_timeout_ms.
TEST_F(ReplicaChainTest, WithTheFirstCopyGoneTooTheSecondClaimsAtOnce) {
  config_.mutable_cluster()->set_liveness_timeout_ms(5000);
  testing::LogCapture log;
  auto first = std::make_unique<RunningHost>(config_, 1, 1);
  RunningHost second(config_, 2, 2);
  ASSERT_TRUE(first->started.ok()) << first->started.ToString();
  AwaitHellos(2);
  SendEntry({first->host.endpoint(), second.host.endpoint()});
  ASSERT_TRUE(PollUntil(10000, [&] { return second.host.applied() == 1; }));
  first.reset();  // its process died first: its port is closed
  primary_.close();
  ASSERT_TRUE(PollUntil(10000, [&] { return second.host.claimed(); }));
  EXPECT_TRUE(second.host.rejoin().empty());
  EXPECT_EQ(second.host.applied(), 1u);
  // A refused connection is a dead process: passed over on its refusals,
  // never waited for up to the 5 s timeout.
  EXPECT_EQ(log.Matching({"(before this one in its chain) refused the connection", "no process listens there"}).size(),
            1u);
  EXPECT_TRUE(log.Matching({"did not answer within"}).empty()) << log.Matching({"did not answer within"})[0];
}

// The copy that claims the shard logs as the process it is, serving the
// shard it claimed: process 2's lines for shard 0 say "[server 2, shard 0]",
// never "[server 0]", the tag of shard 0's own (dead) process.
TEST_F(ReplicaChainTest, AClaimingCopyLogsAsItsOwnProcessServingTheShard) {
  testing::LogCapture log;
  auto first = std::make_unique<RunningHost>(config_, 1, 1);
  RunningHost second(config_, 2, 2);
  ASSERT_TRUE(second.started.ok()) << second.started.ToString();
  AwaitHellos(2);
  SendEntry({first->host.endpoint(), second.host.endpoint()});
  ASSERT_TRUE(PollUntil(10000, [&] { return second.host.applied() == 1; }));
  first.reset();
  primary_.close();
  ASSERT_TRUE(PollUntil(10000, [&] { return second.host.claimed(); }));
  ASSERT_TRUE(PollUntil(5000, [&] { return !log.Matching({"claimed shard 0 (generation "}).empty(); }));
  const std::vector<std::string> claims = log.Matching({"claimed shard 0 (generation "});
  ASSERT_EQ(claims.size(), 1u);
  EXPECT_EQ(claims[0].rfind("[server 2, shard 0] claimed shard 0 (generation ", 0), 0u) << claims[0];
  EXPECT_EQ(log.Matching({"[server 2, copy of shard 0] listening on "}).size(), 1u);
  EXPECT_TRUE(log.Matching({"[server 0] "}).empty()) << log.Matching({"[server 0] "})[0];
}

// The first copy's process is stopped: its kernel accepts the connection and
// no handshake follows. The second waits cluster.liveness_timeout_ms for it,
// then claims.
TEST_F(ReplicaChainTest, AStoppedFirstCopyIsWaitedForUpToTheLivenessTimeout) {
  testing::LogCapture log;
  testing::SilentListener stopped;
  ASSERT_FALSE(stopped.endpoint().empty());
  RunningHost second(config_, 2, 2);
  ASSERT_TRUE(second.started.ok()) << second.started.ToString();
  AwaitHellos(1);
  SendEntry({stopped.endpoint(), second.host.endpoint()});
  ASSERT_TRUE(PollUntil(10000, [&] { return second.host.applied() == 1; }));
  primary_.close();
  ASSERT_TRUE(PollUntil(10000, [&] { return second.host.claimed(); }));
  EXPECT_TRUE(second.host.rejoin().empty());
  // Its probe of the first copy ended at its deadline, the liveness
  // timeout, with no answer and no refusal.
  EXPECT_EQ(log.Matching({"(before this one in its chain) did not answer within 1000 ms"}).size(), 1u);
  EXPECT_TRUE(log.Matching({"refused the connection"}).empty());
}

}  // namespace
}  // namespace tether
