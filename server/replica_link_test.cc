// The primary's end of a replicated shard (server/replica_link.h) with its
// ShardOutbox (server/shard_outbox.h), over an inproc ROUTER: what a worker
// is sent waits for the replica's acknowledgement of the entries it
// depends on, in order; a HELLO_REPLY names the replica's endpoint; a
// replica that is gone is dropped and what waited leaves; a refusal makes
// the primary step down; under CURVE only the servers' key may replicate.
#include "server/replica_link.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <vector>

#include "core/net/message.h"
#include "server/shard_outbox.h"
#include "server/shard_state.h"

namespace tether {
namespace {

class ReplicaLinkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_.mutable_cluster()->set_num_servers(2);
    config_.mutable_cluster()->set_replicas(1);
    config_.mutable_cluster()->set_liveness_timeout_ms(1000);
    router_.set(zmq::sockopt::router_mandatory, 1);
    router_.bind("inproc://replica-link-test");
    worker_.set(zmq::sockopt::routing_id, "w0");
    worker_.connect("inproc://replica-link-test");
    link_ = std::make_unique<ReplicaLink>(config_, 0, "[server 0] ");
    link_->set_socket(&router_);
    outbox_.set_socket(&router_);
    outbox_.set_replica_link(link_.get());
  }

  Message Hello(int process) {
    Message m;
    m.header.set_type(REPLICA_HELLO);
    m.header.mutable_replica_hello()->set_shard(0);
    m.header.mutable_replica_hello()->set_process(process);
    m.header.mutable_replica_hello()->set_endpoint("tcp://10.0.0.2:4100");
    return m;
  }
  Message Ack(uint64_t applied, bool refused = false) {
    Message m;
    m.header.set_type(REPLICATE_ACK);
    m.header.mutable_replicate_ack()->set_shard(0);
    m.header.mutable_replicate_ack()->set_applied(applied);
    m.header.mutable_replicate_ack()->set_refused(refused);
    if (refused) m.header.mutable_replicate_ack()->set_reason("[server 1] shard 0 was claimed");
    return m;
  }
  Message Reply(MessageType type, uint64_t id) {
    Message m;
    m.header.set_type(type);
    m.header.set_request_id(id);
    if (type == HELLO_REPLY) m.header.mutable_hello_reply()->set_shard(0);
    return m;
  }
  // The request ids the worker has received, in order.
  std::vector<uint64_t> Received() {
    std::vector<uint64_t> ids;
    Message m;
    while (RecvMessage(worker_, &m, nullptr).ok()) {
      if (m.header.type() == HELLO_REPLY) hello_ = m.header.hello_reply();
      EXPECT_EQ(m.header.shard_generation(), link_->generation());
      ids.push_back(m.header.request_id());
    }
    return ids;
  }

  JobConfig config_;
  zmq::context_t ctx_{1};
  zmq::socket_t router_{ctx_, zmq::socket_type::router};
  zmq::socket_t worker_{ctx_, zmq::socket_type::dealer};
  std::atomic<bool> stopping_{false};
  ServerStats stats_;
  ShardOutbox outbox_{"[server 0] ", 7, &stopping_, &stats_};
  std::unique_ptr<ReplicaLink> link_;
  HelloReplyBody hello_;
};

TEST_F(ReplicaLinkTest, RepliesWaitForTheReplicasAcknowledgementInOrder) {
  const auto now = ReplicaLink::Clock::now();
  Message input = Reply(PUSH, 1);
  link_->Append("w0", input);  // entry 1: no replica yet, nothing committed
  Message r1 = Reply(HELLO_REPLY, 1);
  outbox_.Send("w0", &r1, 0);
  EXPECT_TRUE(Received().empty());
  EXPECT_EQ(outbox_.held(), 1u);
  ASSERT_TRUE(link_->Take("r1", Hello(1), "", now));  // the replica comes; entry 1 forwarded (no route: judged later)
  link_->Append("w0", input);                     // entry 2
  Message r2 = Reply(PUSH_REPLY, 2);
  outbox_.Send("w0", &r2, 0);
  EXPECT_EQ(outbox_.held(), 2u);
  ASSERT_TRUE(link_->Take("r1", Ack(1), "", now));
  outbox_.ReleaseCommitted();
  EXPECT_EQ(Received(), std::vector<uint64_t>{1});
  EXPECT_EQ(hello_.chain_endpoints_size(), 1);
  EXPECT_EQ(hello_.chain_endpoints(0), "tcp://10.0.0.2:4100");
  ASSERT_TRUE(link_->Take("r1", Ack(2), "", now));
  outbox_.ReleaseCommitted();
  EXPECT_EQ(Received(), std::vector<uint64_t>{2});
  // Everything acknowledged: a new reply leaves at once.
  Message r3 = Reply(PUSH_REPLY, 3);
  outbox_.Send("w0", &r3, 0);
  EXPECT_EQ(Received(), std::vector<uint64_t>{3});
  EXPECT_EQ(link_->generation(), 1u);
}

TEST_F(ReplicaLinkTest, AReplicaWhoseConnectionIsGoneIsDroppedAndWhatWaitedLeaves) {
  const auto now = ReplicaLink::Clock::now();
  ASSERT_TRUE(link_->Take("r1", Hello(1), "", now));  // "r1" has no connection: every send to it fails
  Message input = Reply(PUSH, 1);
  link_->Append("w0", input);
  Message r1 = Reply(PUSH_REPLY, 1);
  outbox_.Send("w0", &r1, 0);
  EXPECT_TRUE(Received().empty());
  link_->Tick(now);  // the failed send is judged now
  outbox_.ReleaseCommitted();
  EXPECT_EQ(Received(), std::vector<uint64_t>{1});
  EXPECT_EQ(link_->generation(), 2u);
  EXPECT_TRUE(link_->chain_endpoints().empty());
  EXPECT_TRUE(link_->stepped_down().ok());
}

TEST_F(ReplicaLinkTest, ARefusalMakesThePrimaryStepDownAndNothingLeaves) {
  const auto now = ReplicaLink::Clock::now();
  ASSERT_TRUE(link_->Take("r1", Hello(1), "", now));
  Message input = Reply(PUSH, 1);
  link_->Append("w0", input);
  Message r1 = Reply(PUSH_REPLY, 1);
  outbox_.Send("w0", &r1, 0);
  ASSERT_TRUE(link_->Take("r1", Ack(0, /*refused=*/true), "", now));
  EXPECT_EQ(link_->stepped_down().code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(link_->stepped_down().message().find("shard 0 was claimed"), std::string::npos);
  outbox_.ReleaseCommitted();
  EXPECT_TRUE(Received().empty());
}

TEST_F(ReplicaLinkTest, AReplicaOfAnotherShardOrProcessIsRefused) {
  const auto now = ReplicaLink::Clock::now();
  ASSERT_TRUE(link_->Take("r2", Hello(0), "", now));  // process 0 is the primary itself
  Message input = Reply(PUSH, 1);
  link_->Append("w0", input);
  Message r1 = Reply(PUSH_REPLY, 1);
  outbox_.Send("w0", &r1, 0);
  // Not registered: an acknowledgement from it counts for nothing.
  ASSERT_TRUE(link_->Take("r2", Ack(1), "", now));
  outbox_.ReleaseCommitted();
  EXPECT_TRUE(Received().empty());
  EXPECT_FALSE(link_->Take("w0", Reply(PUSH, 2), "", now)) << "a worker's message is not the link's";
}

TEST_F(ReplicaLinkTest, UnderCurveOnlyTheServersKeyMayReplicate) {
  const auto now = ReplicaLink::Clock::now();
  const std::string servers(40, 'S'), worker(40, 'W');
  link_->set_replica_key(servers);
  // A worker's key saying REPLICA_HELLO is answered with a refusal naming
  // the key, and registers nothing.
  ASSERT_TRUE(link_->Take("w0", Hello(1), worker, now));
  Message no;
  ASSERT_TRUE(RecvMessage(worker_, &no, nullptr).ok());
  EXPECT_EQ(no.header.type(), REPLICATE_ACK);
  EXPECT_TRUE(no.header.replicate_ack().refused());
  EXPECT_NE(no.header.replicate_ack().reason().find("REPLICA_HELLO from a connection whose CURVE key " + worker +
                                                    " is not the servers' key"),
            std::string::npos)
      << no.header.replicate_ack().reason();
  EXPECT_TRUE(link_->chain_endpoints().empty());
  // The servers' key is taken; an acknowledgement under the replica's
  // identity but from another key commits nothing.
  ASSERT_TRUE(link_->Take("r1", Hello(1), servers, now));
  EXPECT_EQ(link_->chain_endpoints(), std::vector<std::string>{"tcp://10.0.0.2:4100"});
  Message input = Reply(PUSH, 1);
  link_->Append("w0", input);
  ASSERT_TRUE(link_->Take("r1", Ack(1), worker, now));
  EXPECT_EQ(link_->log().commit(), 0u);
  ASSERT_TRUE(link_->Take("r1", Ack(1), servers, now));
  EXPECT_EQ(link_->log().commit(), 1u);
}

}  // namespace
}  // namespace tether

namespace tether {
namespace {

// A process joining the shard (REPLICA_HELLO.join) once its replica is
// gone: it is sent the state, follows as the learner without holding any
// reply, counts once it caught up, and every worker is told its endpoint.
class ReplicaJoinTest : public ReplicaLinkTest {
 protected:
  void SetUp() override {
    ReplicaLinkTest::SetUp();
    joiner_.set(zmq::sockopt::routing_id, "j1");
    joiner_.connect("inproc://replica-link-test");
    // In pieces cut across the 4 MiB parts (an empty one among them), as a
    // shard's state comes: the learner gets their concatenation.
    link_->set_state_source([this]() -> StatusOr<std::vector<std::string>> {
      const size_t cut = (4u << 20) + 5;
      return std::vector<std::string>{state_.substr(0, 3), "", state_.substr(3, cut - 3), state_.substr(cut)};
    });
  }
  Message Join() {
    Message m = Hello(-1);
    m.header.mutable_replica_hello()->set_join(true);
    m.header.mutable_replica_hello()->set_state_format(kShardStateFormatVersion);
    m.header.mutable_replica_hello()->set_endpoint("tcp://10.0.0.9:4200");
    return m;
  }
  // What the joiner received: types in order, the state's bytes joined.
  std::vector<MessageType> JoinerReceived(std::string* state = nullptr, std::vector<bool>* member = nullptr) {
    std::vector<MessageType> types;
    Message m;
    while (RecvMessage(joiner_, &m, nullptr).ok()) {
      types.push_back(m.header.type());
      if (m.header.type() == REPLICA_STATE && state != nullptr)
        state->append(static_cast<const char*>(m.keys.data()), m.header.replica_state().part_bytes());
      if (m.header.type() == REPLICATE && member != nullptr) member->push_back(m.header.replicate().member());
    }
    return types;
  }
  // The replica at start, gone: the shard goes on alone (generation 2).
  void LoseTheReplica(ReplicaLink::Clock::time_point now) {
    ASSERT_TRUE(link_->Take("r1", Hello(1), "", now));
    Message input = Reply(PUSH, 1);
    link_->Append("w0", input);
    link_->Tick(now);
    ASSERT_EQ(link_->generation(), 2u);
  }

  zmq::socket_t joiner_{ctx_, zmq::socket_type::dealer};
  std::string state_ = std::string(5u << 20, 'x') + "end";  // two parts
};

TEST_F(ReplicaJoinTest, AJoinerGetsTheStateFollowsAndCountsOnceCaughtUp) {
  const auto now = ReplicaLink::Clock::now();
  LoseTheReplica(now);
  ASSERT_TRUE(link_->Take("j1", Join(), "", now));
  EXPECT_TRUE(link_->learning());
  EXPECT_EQ(link_->generation(), 3u);  // with the learner
  std::string state;
  EXPECT_EQ(JoinerReceived(&state), (std::vector<MessageType>{REPLICA_STATE, REPLICA_STATE}));
  EXPECT_EQ(state, state_);
  // The learner holds no reply back.
  Message input = Reply(PUSH, 2);
  link_->Append("w0", input);  // entry 2
  Message r2 = Reply(PUSH_REPLY, 2);
  outbox_.Send("w0", &r2, 0);
  EXPECT_EQ(Received(), std::vector<uint64_t>{2});
  std::vector<bool> member;
  EXPECT_EQ(JoinerReceived(nullptr, &member), std::vector<MessageType>{REPLICATE});
  EXPECT_EQ(member, std::vector<bool>{false});
  // Caught up: the replica now, told so by an entry of its own (3).
  ASSERT_TRUE(link_->Take("j1", Ack(2), "", now));
  EXPECT_FALSE(link_->learning());
  EXPECT_EQ(link_->generation(), 4u);
  EXPECT_EQ(link_->chain_endpoints(), std::vector<std::string>{"tcp://10.0.0.9:4200"});
  member.clear();
  EXPECT_EQ(JoinerReceived(nullptr, &member), std::vector<MessageType>{REPLICATE});
  EXPECT_EQ(member, std::vector<bool>{true});
  // Replies wait for it now; the first a worker gets names the new chain.
  link_->Append("w0", input);  // entry 4
  Message r3 = Reply(PUSH_REPLY, 3);
  outbox_.Send("w0", &r3, 0);
  EXPECT_TRUE(Received().empty());
  ASSERT_TRUE(link_->Take("j1", Ack(4), "", now));
  outbox_.ReleaseCommitted();
  Message got;
  ASSERT_TRUE(RecvMessage(worker_, &got, nullptr).ok());
  EXPECT_EQ(got.header.request_id(), 3u);
  EXPECT_EQ(std::vector<std::string>(got.header.chain_endpoints().begin(), got.header.chain_endpoints().end()),
            std::vector<std::string>{"tcp://10.0.0.9:4200"});
  Message r4 = Reply(PUSH_REPLY, 4);
  outbox_.Send("w0", &r4, 0);  // nothing waits: leaves at once, without the chain again
  ASSERT_TRUE(RecvMessage(worker_, &got, nullptr).ok());
  EXPECT_EQ(got.header.chain_endpoints_size(), 0);
}

TEST_F(ReplicaJoinTest, AJoinIsRefusedWhileTheReplicaIsThereOrFromAnotherBuild) {
  const auto now = ReplicaLink::Clock::now();
  ASSERT_TRUE(link_->Take("j1", Join(), "", now));  // the replica at start has not come yet
  Message no;
  ASSERT_TRUE(RecvMessage(joiner_, &no, nullptr).ok());
  EXPECT_TRUE(no.header.replicate_ack().refused());
  EXPECT_NE(no.header.replicate_ack().reason().find("waits for its replica (server process 1)"), std::string::npos)
      << no.header.replicate_ack().reason();
  LoseTheReplica(now);
  Message other = Join();
  other.header.mutable_replica_hello()->set_state_format(kShardStateFormatVersion + 1);
  ASSERT_TRUE(link_->Take("j1", other, "", now));
  ASSERT_TRUE(RecvMessage(joiner_, &no, nullptr).ok());
  EXPECT_NE(no.header.replicate_ack().reason().find("start it from the same build"), std::string::npos)
      << no.header.replicate_ack().reason();
  EXPECT_FALSE(link_->learning());
  EXPECT_EQ(link_->generation(), 2u);
}

TEST_F(ReplicaJoinTest, ALearnerWhoseConnectionIsGoneIsDroppedAndAnotherMayJoin) {
  const auto now = ReplicaLink::Clock::now();
  LoseTheReplica(now);
  Message join = Join();
  ASSERT_TRUE(link_->Take("gone", join, "", now));  // no connection: the state cannot be sent
  EXPECT_FALSE(link_->learning());
  EXPECT_EQ(link_->generation(), 4u);  // learner taken, then dropped
  ASSERT_TRUE(link_->Take("j1", join, "", now));
  EXPECT_TRUE(link_->learning());
  EXPECT_EQ(link_->generation(), 5u);
}

}  // namespace
}  // namespace tether

namespace tether {
namespace {

// A copy that joined a shard and then claimed it serves it from a slot past
// the server processes; a process that joins it takes another one.
TEST_F(ReplicaJoinTest, AJoinedCopyThatClaimedTakesAJoinerInAnotherSlot) {
  const auto now = ReplicaLink::Clock::now();
  ReplicaLink claimed(config_, 0, "[server 0] ", ReplicaLink::Claimed{2, 5});
  claimed.set_socket(&router_);
  claimed.set_state_source([this]() -> StatusOr<std::vector<std::string>> { return std::vector<std::string>{state_}; });
  ASSERT_TRUE(claimed.Take("j1", Join(), "", now));
  EXPECT_TRUE(claimed.learning());
  EXPECT_EQ(claimed.log().view().learner, 3);
  EXPECT_EQ(claimed.generation(), 6u);
}

}  // namespace
}  // namespace tether
