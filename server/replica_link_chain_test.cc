// The primary's end of a shard with two replicas (server/replica_link.h,
// cluster.replicas = 2): each replica is sent every entry, a reply waits
// until both acknowledged it, every entry names the chain's endpoints in
// order, and a replica that is gone leaves the chain while the other one
// keeps it going; a process joining a chain left with one replica becomes
// its second once caught up, and a chain with both refuses a joiner unless
// one of them may be gone.
#include "server/replica_link.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <vector>

#include "core/net/message.h"
#include "server/shard_outbox.h"
#include "server/shard_state.h"
#include "tests/testing/poll.h"

namespace tether {
namespace {

constexpr char kEndpoint1[] = "tcp://10.0.0.2:4100";
constexpr char kEndpoint2[] = "tcp://10.0.0.3:4100";

class ReplicaLinkChainTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_.mutable_cluster()->set_num_servers(4);
    config_.mutable_cluster()->set_replicas(2);
    config_.mutable_cluster()->set_liveness_timeout_ms(1000);
    router_.set(zmq::sockopt::router_mandatory, 1);
    router_.bind("inproc://replica-link-chain-test");
    for (auto [socket, id] : {std::pair{&worker_, "w0"}, {&r1_, "r1"}, {&r2_, "r2"}}) {
      socket->set(zmq::sockopt::routing_id, id);
      socket->set(zmq::sockopt::linger, 0);
      socket->connect("inproc://replica-link-chain-test");
    }
    link_ = std::make_unique<ReplicaLink>(config_, 0, "[server 0] ");
    link_->set_socket(&router_);
    outbox_.set_socket(&router_);
    outbox_.set_replica_link(link_.get());
  }

  static Message Hello(int process, const std::string& endpoint) {
    Message m;
    m.header.set_type(REPLICA_HELLO);
    m.header.mutable_replica_hello()->set_shard(0);
    m.header.mutable_replica_hello()->set_process(process);
    m.header.mutable_replica_hello()->set_endpoint(endpoint);
    return m;
  }
  static Message Ack(uint64_t applied) {
    Message m;
    m.header.set_type(REPLICATE_ACK);
    m.header.mutable_replicate_ack()->set_shard(0);
    m.header.mutable_replicate_ack()->set_applied(applied);
    return m;
  }
  static Message Reply(MessageType type, uint64_t id) {
    Message m;
    m.header.set_type(type);
    m.header.set_request_id(id);
    return m;
  }
  // The entries a replica's socket holds: (seq, chain endpoints).
  static std::vector<std::pair<uint64_t, std::vector<std::string>>> Entries(zmq::socket_t& replica) {
    std::vector<std::pair<uint64_t, std::vector<std::string>>> out;
    Message m;
    while (RecvMessage(replica, &m, nullptr).ok()) {
      if (m.header.type() != REPLICATE) continue;
      out.emplace_back(m.header.replicate().seq(), std::vector<std::string>(m.header.chain_endpoints().begin(),
                                                                             m.header.chain_endpoints().end()));
    }
    return out;
  }
  std::vector<uint64_t> Received() {
    std::vector<uint64_t> ids;
    Message m;
    while (RecvMessage(worker_, &m, nullptr).ok()) ids.push_back(m.header.request_id());
    return ids;
  }

  JobConfig config_;
  zmq::context_t ctx_{1};
  zmq::socket_t router_{ctx_, zmq::socket_type::router};
  zmq::socket_t worker_{ctx_, zmq::socket_type::dealer};
  zmq::socket_t r1_{ctx_, zmq::socket_type::dealer};
  zmq::socket_t r2_{ctx_, zmq::socket_type::dealer};
  std::atomic<bool> stopping_{false};
  ServerStats stats_;
  ShardOutbox outbox_{"[server 0] ", 7, &stopping_, &stats_};
  std::unique_ptr<ReplicaLink> link_;
};

TEST_F(ReplicaLinkChainTest, ARepliesWaitsForEveryReplicaAndEntriesNameTheChain) {
  const auto now = ReplicaLink::Clock::now();
  Message input = Reply(PUSH, 1);
  link_->Append("w0", input);  // entry 1, before either replica came
  ASSERT_TRUE(link_->Take("r1", Hello(1, kEndpoint1), "", now));
  ASSERT_TRUE(link_->Take("r2", Hello(2, kEndpoint2), "", now));
  EXPECT_EQ(link_->chain_endpoints(), (std::vector<std::string>{kEndpoint1, kEndpoint2}));
  link_->Append("w0", input);  // entry 2
  Message reply = Reply(PUSH_REPLY, 1);
  outbox_.Send("w0", &reply, 0);
  const auto to_r1 = Entries(r1_);
  const auto to_r2 = Entries(r2_);
  ASSERT_EQ(to_r1.size(), 2u);
  ASSERT_EQ(to_r2.size(), 2u);
  EXPECT_EQ(to_r2[0].first, 1u);  // the replica that came second is sent entry 1 too
  EXPECT_EQ(to_r2[1].first, 2u);
  EXPECT_EQ(to_r1[1].second, (std::vector<std::string>{kEndpoint1, kEndpoint2}));
  ASSERT_TRUE(link_->Take("r1", Ack(2), "", now));
  outbox_.ReleaseCommitted();
  EXPECT_TRUE(Received().empty()) << "left before the second replica had the entry";
  EXPECT_EQ(link_->log().commit(), 0u);
  ASSERT_TRUE(link_->Take("r2", Ack(1), "", now));
  EXPECT_EQ(link_->log().commit(), 1u);
  outbox_.ReleaseCommitted();
  EXPECT_TRUE(Received().empty());
  ASSERT_TRUE(link_->Take("r2", Ack(2), "", now));
  outbox_.ReleaseCommitted();
  EXPECT_EQ(Received(), std::vector<uint64_t>{1});
  EXPECT_EQ(link_->generation(), 1u);
}

TEST_F(ReplicaLinkChainTest, AProcessOutsideTheChainIsRefused) {
  const auto now = ReplicaLink::Clock::now();
  ASSERT_TRUE(link_->Take("r1", Hello(3, kEndpoint1), "", now));
  Message no;
  ASSERT_TRUE(RecvMessage(r1_, &no, nullptr).ok());
  EXPECT_TRUE(no.header.replicate_ack().refused());
  EXPECT_NE(no.header.replicate_ack().reason().find("whose replicas are processes 1, 2,"), std::string::npos)
      << no.header.replicate_ack().reason();
  EXPECT_TRUE(link_->chain_endpoints().empty());
}

// The middle of the chain goes: the primary goes on with the tail, which
// alone decides commits from then on.
TEST_F(ReplicaLinkChainTest, AGoneReplicaLeavesTheChainAndTheOtherKeepsItGoing) {
  const auto now = ReplicaLink::Clock::now();
  ASSERT_TRUE(link_->Take("r1", Hello(1, kEndpoint1), "", now));
  ASSERT_TRUE(link_->Take("r2", Hello(2, kEndpoint2), "", now));
  Message input = Reply(PUSH, 1);
  link_->Append("w0", input);
  Message reply = Reply(PUSH_REPLY, 1);
  outbox_.Send("w0", &reply, 0);
  ASSERT_TRUE(link_->Take("r2", Ack(1), "", now));
  outbox_.ReleaseCommitted();
  EXPECT_TRUE(Received().empty());
  r1_.close();  // its process died
  // Its pipe closes on the router's side asynchronously: ticked until the
  // probe finds it gone.
  ASSERT_TRUE(testing::PollUntil(2000, [&] {
    link_->Tick(ReplicaLink::Clock::now());
    return link_->generation() == 2u;
  }));
  EXPECT_EQ(link_->generation(), 2u);
  EXPECT_EQ(link_->log().view().members, (std::vector<int>{0, 2}));
  EXPECT_EQ(link_->chain_endpoints(), std::vector<std::string>{kEndpoint2});
  outbox_.ReleaseCommitted();
  EXPECT_EQ(Received(), std::vector<uint64_t>{1});
  link_->Append("w0", input);  // entry 2: waits for the replica left
  Message reply2 = Reply(PUSH_REPLY, 2);
  outbox_.Send("w0", &reply2, 0);
  EXPECT_TRUE(Received().empty());
  const auto to_r2 = Entries(r2_);
  ASSERT_FALSE(to_r2.empty());
  EXPECT_EQ(to_r2.back().first, 2u);
  EXPECT_EQ(to_r2.back().second, std::vector<std::string>{kEndpoint2});
  ASSERT_TRUE(link_->Take("r2", Ack(2), "", now));
  outbox_.ReleaseCommitted();
  EXPECT_EQ(Received(), std::vector<uint64_t>{2});
  EXPECT_TRUE(link_->stepped_down().ok());
}

// A replica or joining process started with another chain shape or
// consistency (a flag given to it alone) is refused at its REPLICA_HELLO,
// naming the field and both values, before any state is sent.
TEST_F(ReplicaLinkChainTest, AProcessOfAnotherConfigurationIsRefusedNamingTheField) {
  zmq::socket_t joiner{ctx_, zmq::socket_type::dealer};
  joiner.set(zmq::sockopt::routing_id, "j1");
  joiner.set(zmq::sockopt::linger, 0);
  joiner.connect("inproc://replica-link-chain-test");
  link_->set_state_source([]() -> StatusOr<std::vector<std::string>> { return std::vector<std::string>{"state"}; });
  const auto now = ReplicaLink::Clock::now();
  const auto refusal = [](zmq::socket_t& socket) {
    Message m;
    while (RecvMessage(socket, &m, nullptr).ok())
      if (m.header.type() == REPLICATE_ACK) return m.header.replicate_ack();
    return ReplicateAckBody();
  };
  Message hello = Hello(1, kEndpoint1);
  hello.header.mutable_replica_hello()->set_replicas(1);
  ASSERT_TRUE(link_->Take("r1", hello, "", now));
  ReplicateAckBody no = refusal(r1_);
  EXPECT_TRUE(no.refused());
  EXPECT_EQ(no.reason(), "[server 0] the process at tcp://10.0.0.2:4100 runs with cluster.replicas=1, this shard "
                         "with 2 (another job's configuration, or a flag given to one process only)");
  // A copy placed at the start: the servers disagree, and the shard is
  // told once (the job cannot run).
  EXPECT_EQ(no.join_refusal(), ReplicateAckBody::CONFIG_DIFFERS);
  EXPECT_EQ(link_->TakeConfigRefusal(), "server process 1 holds a copy of shard 0, but the process at "
                                        "tcp://10.0.0.2:4100 runs with cluster.replicas=1, this shard with 2 (another "
                                        "job's configuration, or a flag given to one process only)");
  EXPECT_EQ(link_->TakeConfigRefusal(), "");
  // Its own configuration: taken.
  hello.header.mutable_replica_hello()->set_replicas(2);
  hello.header.mutable_replica_hello()->set_num_servers(4);
  hello.header.mutable_replica_hello()->set_staleness(config_.consistency().staleness());
  ASSERT_TRUE(link_->Take("r1", hello, "", now));
  ASSERT_TRUE(link_->Take("r2", Hello(2, kEndpoint2), "", now));
  EXPECT_EQ(link_->chain_endpoints(), (std::vector<std::string>{kEndpoint1, kEndpoint2}));
  // A joining process with another staleness bound: refused for good.
  Message join = Hello(-1, "tcp://10.0.0.9:4200");
  join.header.mutable_replica_hello()->set_join(true);
  join.header.mutable_replica_hello()->set_state_format(kShardStateFormatVersion);
  join.header.mutable_replica_hello()->set_staleness(config_.consistency().staleness() + 3);
  ASSERT_TRUE(link_->Take("j1", join, "", now));
  no = refusal(joiner);
  EXPECT_TRUE(no.refused());
  EXPECT_EQ(no.join_refusal(), ReplicateAckBody::CONFIG_DIFFERS);  // no other shard is asked
  EXPECT_EQ(no.reason(), "[server 0] the process at tcp://10.0.0.9:4200 runs with consistency.staleness=" +
                             std::to_string(config_.consistency().staleness() + 3) + ", this shard with " +
                             std::to_string(config_.consistency().staleness()) +
                             " (another job's configuration, or a flag given to one process only)");
  EXPECT_FALSE(link_->learning());
}

// The shard's end reaches every replica (SHUTDOWN): a job that failed
// carries its reason, so a copy ends with it rather than as a shard that
// finished; one that finished carries none.
TEST_F(ReplicaLinkChainTest, TheShardsEndTellsEveryReplicaWhetherTheJobFailed) {
  const auto now = ReplicaLink::Clock::now();
  ASSERT_TRUE(link_->Take("r1", Hello(1, kEndpoint1), "", now));
  ASSERT_TRUE(link_->Take("r2", Hello(2, kEndpoint2), "", now));
  const auto shutdown = [](zmq::socket_t& replica) {
    Message m;
    while (RecvMessage(replica, &m, nullptr).ok())
      if (m.header.type() == SHUTDOWN) return m.header;
    return MessageHeader();
  };
  link_->Finish(Status::Unavailable("[server 0] job aborted: worker 1 failed: out of memory"));
  for (zmq::socket_t* replica : {&r1_, &r2_}) {
    const MessageHeader h = shutdown(*replica);
    EXPECT_EQ(h.type(), SHUTDOWN);
    EXPECT_EQ(h.job_abort().reason(), "[server 0] job aborted: worker 1 failed: out of memory");
  }
  link_->Finish(Status::OK());
  for (zmq::socket_t* replica : {&r1_, &r2_}) {
    const MessageHeader h = shutdown(*replica);
    EXPECT_EQ(h.type(), SHUTDOWN);
    EXPECT_FALSE(h.has_job_abort());
  }
}

// A joiner that comes for the place of a replica the primary has not
// dropped yet (the connections are probed every 100 ms; silence is judged
// at cluster.liveness_timeout_ms) is refused for now, not told the chain is
// full: it asks again and is taken once the replica was dropped.
TEST_F(ReplicaLinkChainTest, AJoinerForAReplicaNotYetDroppedIsRefusedForNowThenTaken) {
  zmq::socket_t joiner{ctx_, zmq::socket_type::dealer};
  joiner.set(zmq::sockopt::routing_id, "j1");
  joiner.set(zmq::sockopt::linger, 0);
  joiner.connect("inproc://replica-link-chain-test");
  link_->set_state_source([]() -> StatusOr<std::vector<std::string>> { return std::vector<std::string>{"state"}; });
  const auto now = ReplicaLink::Clock::now();
  ASSERT_TRUE(link_->Take("r1", Hello(1, kEndpoint1), "", now));
  ASSERT_TRUE(link_->Take("r2", Hello(2, kEndpoint2), "", now));
  Message join = Hello(-1, "tcp://10.0.0.9:4200");
  join.header.mutable_replica_hello()->set_join(true);
  join.header.mutable_replica_hello()->set_state_format(kShardStateFormatVersion);
  const auto answer = [&](ReplicaLink::Clock::time_point at) {
    EXPECT_TRUE(link_->Take("j1", join, "", at));
    Message no;
    EXPECT_TRUE(RecvMessage(joiner, &no, nullptr).ok());
    return no.header.replicate_ack();
  };
  ReplicateAckBody full = answer(now);
  EXPECT_EQ(full.join_refusal(), ReplicateAckBody::CHAIN_FULL);
  // Silent for more than two heartbeat intervals (2 × 1000 ms).
  const ReplicateAckBody silent = answer(now + std::chrono::milliseconds(2500));
  EXPECT_EQ(silent.join_refusal(), ReplicateAckBody::JOIN_LATER);
  EXPECT_EQ(silent.reason(),
            "[server 0] shard 0 waits to hear from its replica (process 1 at tcp://10.0.0.2:4100), silent for "
            "2500 ms (dropped past cluster.liveness_timeout_ms=1000)");
  r2_.close();  // its process died
  ReplicateAckBody later;
  ASSERT_TRUE(testing::PollUntil(2000, [&] {
    later = answer(now);
    return later.join_refusal() == ReplicateAckBody::JOIN_LATER;
  }));
  EXPECT_EQ(later.reason(), "[server 0] shard 0 is dropping its replica (process 2 at tcp://10.0.0.3:4100): its "
                            "connection closed");
  EXPECT_EQ(link_->generation(), 1u);
  link_->Tick(ReplicaLink::Clock::now());
  EXPECT_EQ(link_->generation(), 2u);
  ASSERT_TRUE(link_->Take("j1", join, "", ReplicaLink::Clock::now()));
  EXPECT_TRUE(link_->learning());
  Message state;
  ASSERT_TRUE(RecvMessage(joiner, &state, nullptr).ok());
  EXPECT_EQ(state.header.type(), REPLICA_STATE);
}

// The chain 0 → 1 → 2 after process 1 is gone: 0 → 2, one replica short.
class ReplicaLinkRegrowTest : public ReplicaLinkChainTest {
 protected:
  static constexpr char kJoinEndpoint[] = "tcp://10.0.0.9:4200";

  void SetUp() override {
    ReplicaLinkChainTest::SetUp();
    for (auto [socket, id] : {std::pair{&j1_, "j1"}, {&j2_, "j2"}}) {
      socket->set(zmq::sockopt::routing_id, id);
      socket->set(zmq::sockopt::linger, 0);
      socket->connect("inproc://replica-link-chain-test");
    }
    link_->set_state_source([]() -> StatusOr<std::vector<std::string>> { return std::vector<std::string>{"state"}; });
    const auto now = ReplicaLink::Clock::now();
    ASSERT_TRUE(link_->Take("r1", Hello(1, kEndpoint1), "", now));
    ASSERT_TRUE(link_->Take("r2", Hello(2, kEndpoint2), "", now));
    Message input = Reply(PUSH, 1);
    link_->Append("w0", input);  // entry 1
    ASSERT_TRUE(link_->Take("r1", Ack(1), "", now));
    ASSERT_TRUE(link_->Take("r2", Ack(1), "", now));
    r1_.close();  // its process died
    ASSERT_TRUE(testing::PollUntil(2000, [&] {
      link_->Tick(ReplicaLink::Clock::now());
      return link_->generation() == 2u;
    }));
    ASSERT_EQ(link_->log().view().members, (std::vector<int>{0, 2}));
    (void)Entries(r2_);
  }
  static Message Join() {
    Message m = Hello(-1, kJoinEndpoint);
    m.header.mutable_replica_hello()->set_join(true);
    m.header.mutable_replica_hello()->set_state_format(kShardStateFormatVersion);
    return m;
  }
  // The REPLICATE entries a joiner received: (seq, member).
  static std::vector<std::pair<uint64_t, bool>> Followed(zmq::socket_t& joiner, int* state_parts = nullptr) {
    std::vector<std::pair<uint64_t, bool>> out;
    Message m;
    while (RecvMessage(joiner, &m, nullptr).ok()) {
      if (m.header.type() == REPLICA_STATE && state_parts != nullptr) ++*state_parts;
      if (m.header.type() == REPLICATE) out.emplace_back(m.header.replicate().seq(), m.header.replicate().member());
    }
    return out;
  }

  zmq::socket_t j1_{ctx_, zmq::socket_type::dealer};
  zmq::socket_t j2_{ctx_, zmq::socket_type::dealer};
};

TEST_F(ReplicaLinkRegrowTest, AJoinerBesideTheReplicaIsAppendedOnceCaughtUpAndAFullChainRefusesAnother) {
  const auto now = ReplicaLink::Clock::now();
  ASSERT_TRUE(link_->Take("j1", Join(), "", now));
  EXPECT_TRUE(link_->learning());
  EXPECT_EQ(link_->generation(), 3u);
  EXPECT_EQ(link_->log().view().learner, 4);  // the first slot past the 4 server processes
  int parts = 0;
  EXPECT_TRUE(Followed(j1_, &parts).empty());
  EXPECT_EQ(parts, 1);
  // The learner holds no reply back: the replica's acknowledgement releases it.
  Message input = Reply(PUSH, 2);
  link_->Append("w0", input);  // entry 2
  Message reply2 = Reply(PUSH_REPLY, 2);
  outbox_.Send("w0", &reply2, 0);
  ASSERT_TRUE(link_->Take("r2", Ack(2), "", now));
  outbox_.ReleaseCommitted();
  EXPECT_EQ(Received(), std::vector<uint64_t>{2});
  EXPECT_EQ(Followed(j1_), (std::vector<std::pair<uint64_t, bool>>{{2, false}}));
  // Caught up: appended as the last replica, told so by an entry of its own (3).
  ASSERT_TRUE(link_->Take("j1", Ack(2), "", now));
  EXPECT_FALSE(link_->learning());
  EXPECT_EQ(link_->generation(), 4u);
  EXPECT_EQ(link_->log().view().members, (std::vector<int>{0, 2, 4}));
  EXPECT_EQ(link_->chain_endpoints(), (std::vector<std::string>{kEndpoint2, kJoinEndpoint}));
  EXPECT_EQ(Followed(j1_), (std::vector<std::pair<uint64_t, bool>>{{3, true}}));
  const auto to_r2 = Entries(r2_);
  ASSERT_EQ(to_r2.size(), 2u);
  EXPECT_EQ(to_r2[0].first, 2u);
  EXPECT_EQ(to_r2[0].second, std::vector<std::string>{kEndpoint2});
  EXPECT_EQ(to_r2[1].first, 3u);
  EXPECT_EQ(to_r2[1].second, (std::vector<std::string>{kEndpoint2, kJoinEndpoint}));
  // Replies wait for both replicas now.
  link_->Append("w0", input);  // entry 4
  Message reply3 = Reply(PUSH_REPLY, 3);
  outbox_.Send("w0", &reply3, 0);
  ASSERT_TRUE(link_->Take("r2", Ack(4), "", now));
  outbox_.ReleaseCommitted();
  EXPECT_TRUE(Received().empty()) << "left before the new replica had the entry";
  EXPECT_EQ(link_->log().commit(), 2u);
  ASSERT_TRUE(link_->Take("j1", Ack(4), "", now));
  EXPECT_EQ(link_->log().commit(), 4u);
  outbox_.ReleaseCommitted();
  Message got;
  ASSERT_TRUE(RecvMessage(worker_, &got, nullptr).ok());
  EXPECT_EQ(got.header.request_id(), 3u);
  EXPECT_EQ(std::vector<std::string>(got.header.chain_endpoints().begin(), got.header.chain_endpoints().end()),
            (std::vector<std::string>{kEndpoint2, kJoinEndpoint}));
  // Full again: another joiner is refused, naming the replicas.
  ASSERT_TRUE(link_->Take("j2", Join(), "", now));
  Message no;
  ASSERT_TRUE(RecvMessage(j2_, &no, nullptr).ok());
  EXPECT_TRUE(no.header.replicate_ack().refused());
  EXPECT_EQ(no.header.replicate_ack().reason(),
            "[server 0] shard 0 has all its replicas (cluster.replicas=2: processes 2 at tcp://10.0.0.3:4100, "
            "4 at tcp://10.0.0.9:4200)");
  EXPECT_FALSE(link_->learning());
  EXPECT_EQ(link_->generation(), 4u);
}

// A learner close behind counts for commits before it is appended, and is
// appended only once it holds every committed entry; gone, it holds nothing.
TEST_F(ReplicaLinkRegrowTest, ALearnerWithinTheLagHoldsCommitsUntilItHasThemOrIsGone) {
  const auto now = ReplicaLink::Clock::now();
  ASSERT_TRUE(link_->Take("j1", Join(), "", now));
  Message input = Reply(PUSH, 2);
  for (int i = 0; i < 10; ++i) link_->Append("w0", input);  // entries 2 ... 11
  ASSERT_TRUE(link_->Take("r2", Ack(11), "", now));
  EXPECT_EQ(link_->log().commit(), 11u);  // the learner does not count yet
  ASSERT_TRUE(link_->Take("j1", Ack(5), "", now));
  EXPECT_TRUE(link_->learning()) << "appended while it lacked committed entries 6 ... 11";
  link_->Append("w0", input);  // entry 12
  Message reply = Reply(PUSH_REPLY, 12);
  outbox_.Send("w0", &reply, 0);
  ASSERT_TRUE(link_->Take("r2", Ack(12), "", now));
  outbox_.ReleaseCommitted();
  EXPECT_EQ(link_->log().commit(), 11u) << "the learner within the lag counts";
  EXPECT_TRUE(Received().empty());
  const auto followed = Followed(j1_);
  ASSERT_EQ(followed.size(), 11u);
  EXPECT_EQ(followed.back(), (std::pair<uint64_t, bool>{12, false}));
  j1_.close();  // its process died
  ASSERT_TRUE(testing::PollUntil(2000, [&] {
    link_->Tick(ReplicaLink::Clock::now());
    return !link_->learning();
  }));
  EXPECT_EQ(link_->log().commit(), 12u);
  EXPECT_EQ(link_->log().view().members, (std::vector<int>{0, 2}));
  EXPECT_EQ(link_->log().view().learner, -1);
  outbox_.ReleaseCommitted();
  EXPECT_EQ(Received(), std::vector<uint64_t>{12});
  // Another may join.
  ASSERT_TRUE(link_->Take("j2", Join(), "", ReplicaLink::Clock::now()));
  EXPECT_TRUE(link_->learning());
}

// The loop builds a joiner's state for longer than half the liveness
// timeout (a large table's takes seconds): witnessed running, that is no
// stall of this process. No mark is appended, no reply held, the replica
// that stayed silent meanwhile (its acknowledgements wait in the socket)
// is not dropped, and the next stall of its own is judged as ever.
TEST_F(ReplicaLinkRegrowTest, BuildingAJoinersStateForLongIsNoStallOfItsOwn) {
  config_.mutable_cluster()->set_liveness_timeout_ms(200);
  constexpr auto kBuild = std::chrono::milliseconds(300);  // past 200 / 2
  link_->set_state_source([kBuild]() -> StatusOr<std::vector<std::string>> {
    const auto until = ReplicaLink::Clock::now() + kBuild;
    volatile uint64_t work = 0;
    while (ReplicaLink::Clock::now() < until) work = work + 1;
    return std::vector<std::string>{"state"};
  });
  ASSERT_TRUE(link_->Take("r2", Ack(1), "", ReplicaLink::Clock::now()));
  link_->Tick(ReplicaLink::Clock::now());
  const auto before = ReplicaLink::Clock::now();
  ASSERT_TRUE(link_->Take("j1", Join(), "", before));
  ASSERT_GE(ReplicaLink::Clock::now() - before, kBuild);
  EXPECT_GE(link_->forgiven_busy_ms(), 300);
  link_->Tick(ReplicaLink::Clock::now());
  EXPECT_EQ(link_->log().applied(), 1u) << "a stall's mark was appended";
  EXPECT_EQ(link_->log().view().members, (std::vector<int>{0, 2}));
  EXPECT_TRUE(link_->learning());
  Message input = Reply(PUSH, 2);
  link_->Append("w0", input);  // entry 2
  Message reply = Reply(PUSH_REPLY, 2);
  outbox_.Send("w0", &reply, 0);
  ASSERT_TRUE(link_->Take("r2", Ack(2), "", ReplicaLink::Clock::now()));
  link_->Tick(ReplicaLink::Clock::now());
  outbox_.ReleaseCommitted();
  EXPECT_EQ(Received(), std::vector<uint64_t>{2});
  // A gap with no work in it (the next turn 300 ms later) is a stall: the
  // mark (entry 3) holds replies.
  link_->Tick(ReplicaLink::Clock::now() + kBuild);
  EXPECT_EQ(link_->log().applied(), 3u);
}

}  // namespace
}  // namespace tether
