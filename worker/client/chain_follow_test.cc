// RequestChannel following a replicated shard's chain (see "A replicated
// shard" in worker/client/request_channel.h). Two ROUTER sockets on
// 127.0.0.1 (port 0) play the shard's primary A (the test's own thread)
// and the replica B that claims the shard (a thread of its own, since it
// must answer while the worker waits). Closing A's socket is the primary's
// death: its connections close, and its port then refuses connections.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <zmq.hpp>

#include "core/net/transport.h"
#include "tests/testing/log_capture.h"
#include "tests/testing/poll.h"
#include "tests/testing/silent_listener.h"
#include "worker/client/claim_lookup.h"
#include "worker/client/request_channel.h"

namespace tether {
namespace {

constexpr uint64_t kIncarnationA = 0xa1, kIncarnationB = 0xb2;

// One message as a ROUTER received it: every frame's bytes.
struct Received {
  std::string identity, header, keys, values;
  MessageHeader parsed;
};

// The next message on `router` that is not a HEARTBEAT, within 5 s
// (nullopt-like: an empty header when none came).
Received NextMessage(zmq::socket_t& router) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < deadline) {
    zmq::pollitem_t item = {router.handle(), 0, ZMQ_POLLIN, 0};
    if (zmq::poll(&item, 1, std::chrono::milliseconds(100)) != 1) continue;
    std::vector<zmq::message_t> frames;
    zmq::message_t f;
    do {
      if (!router.recv(f, zmq::recv_flags::none)) break;
      frames.push_back(std::move(f));
      f = zmq::message_t();
    } while (frames.back().more());
    EXPECT_EQ(frames.size(), 4u) << "identity, header, keys, values";
    if (frames.size() != 4) return {};
    Received r{frames[0].to_string(), frames[1].to_string(), frames[2].to_string(), frames[3].to_string(), {}};
    EXPECT_TRUE(r.parsed.ParseFromString(r.header));
    if (r.parsed.type() != HEARTBEAT) return r;
  }
  ADD_FAILURE() << "no message within 5 s";
  return {};
}

// The seconds a give-up names, by the worker's own clock: "... its primary
// disconnected 0.8 s ago ..." (-1 when it names none).
double DownSeconds(const std::string& message) {
  const std::string from = "its primary disconnected ";
  const size_t at = message.find(from);
  if (at == std::string::npos || message.find(" s ago", at) == std::string::npos) return -1;
  return std::atof(message.c_str() + at + from.size());
}

// Sends a message of `type` for `request_id` to `identity`, stamped as a
// replicated shard's server stamps it.
void Answer(zmq::socket_t& router, const std::string& identity, uint64_t request_id, MessageType type,
            uint64_t generation, uint64_t incarnation, const std::vector<std::string>& chain = {}) {
  Message m;
  m.header.set_type(type);
  m.header.set_request_id(request_id);
  m.header.set_shard_generation(generation);
  m.header.set_server_incarnation(incarnation);
  if (type == HELLO_REPLY)
    for (const std::string& ep : chain) m.header.mutable_hello_reply()->add_chain_endpoints(ep);
  if (type == ERROR_REPLY) m.header.mutable_error_reply()->set_error("from a former primary");
  ASSERT_TRUE(SendMessage(router, &m, &identity, "worker").ok());
}

class ChainFollowTest : public ::testing::Test {
 protected:
  void SetUp() override {
    a_ = Bind(&endpoint_a_);
    b_ = Bind(&endpoint_b_);
  }
  void Start(int liveness_ms) {
    RequestChannel::Options o;
    o.servers = {endpoint_a_};
    o.context = &ctx_;
    o.request_timeout_ms = 20000;
    o.liveness_timeout_ms = liveness_ms;
    o.heartbeat_interval_ms = 60000;  // no HEARTBEAT unless a connection comes up
    o.claim_lookup = claim_lookup_;
    // What WorkerClient does with a HELLO_REPLY (OnHelloReply).
    channel_ = std::make_unique<RequestChannel>(o, [this](uint64_t tag, const Status& verdict, Message* reply) {
      tags_.push_back(tag);
      const auto& chain = reply->header.hello_reply().chain_endpoints();
      if (verdict.ok() && reply->header.type() == HELLO_REPLY && !chain.empty())
        return channel_->SetChain(0, {chain.begin(), chain.end()});
      return verdict;
    });
    ASSERT_TRUE(channel_->Connect().ok());
  }
  zmq::socket_t Bind(std::string* endpoint) {
    auto router = BindRouter(ctx_, "tcp://127.0.0.1:0", SocketOptions{}, endpoint);
    EXPECT_TRUE(router.ok()) << router.status().ToString();
    return std::move(router).value();
  }
  // Sends one message of `type` to the shard; a request (owed `expect`)
  // with `tag` unless `expect` is MSG_UNKNOWN (a CLOCK).
  RequestHandle Send(MessageType type, MessageType expect, uint64_t tag, const std::string& values = "") {
    RequestHandle h = channel_->NewRequest(/*sticky=*/false);
    Message m;
    m.header.set_type(type);
    m.values = zmq::message_t(values.data(), values.size());
    m.header.set_num_values(values.size() / sizeof(float));
    EXPECT_TRUE(channel_->Send(0, &m, expect == MSG_UNKNOWN ? nullptr : &h, expect, tag).ok());
    return h;
  }
  // HELLO answered by A with its chain [B] at generation 1.
  void Hello(const std::vector<std::string>& chain) {
    const RequestHandle hello = Send(HELLO, HELLO_REPLY, 100);
    const Received got = NextMessage(a_);
    ASSERT_EQ(got.parsed.type(), HELLO);
    Answer(a_, got.identity, got.parsed.request_id(), HELLO_REPLY, 1, kIncarnationA, chain);
    ASSERT_TRUE(hello.Wait().ok());
  }

  zmq::context_t ctx_;
  zmq::socket_t a_, b_;
  std::string endpoint_a_, endpoint_b_;
  std::unique_ptr<RequestChannel> channel_;
  std::vector<uint64_t> tags_;
  std::shared_ptr<ClaimLookup> claim_lookup_;  // set before Start: the job has a rendezvous
};

// The primary dies with three messages unanswered (a CLOCK, a PUSH, a
// PULL): B receives exactly those again, byte for byte and in order, and
// answers; a reply A had already made counts once; B's process start id is
// accepted with its higher generation; a late message of generation 1 is
// dropped. Once B dies too, no successor is left: the shard is gone as an
// unreplicated one.
TEST_F(ChainFollowTest, PrimaryDiesTheWorkerFollowsToTheReplicaAndSendsTheUnansweredAgain) {
  Start(4000);
  Hello({endpoint_b_});
  const RequestHandle r1 = Send(PUSH, PUSH_REPLY, 1, std::string(400, 'p'));
  const RequestHandle r2 = Send(PULL, PULL_REPLY, 2);
  (void)Send(CLOCK, MSG_UNKNOWN, 0);
  const RequestHandle r4 = Send(PUSH, PUSH_REPLY, 4, std::string(4000, 'q'));
  const RequestHandle r5 = Send(PULL, PULL_REPLY, 5);
  std::vector<Received> at_a;
  for (int i = 0; i < 5; ++i) at_a.push_back(NextMessage(a_));
  ASSERT_EQ(at_a[2].parsed.type(), CLOCK);
  Answer(a_, at_a[0].identity, at_a[0].parsed.request_id(), PUSH_REPLY, 1, kIncarnationA);
  Answer(a_, at_a[1].identity, at_a[1].parsed.request_id(), PULL_REPLY, 1, kIncarnationA);
  ASSERT_TRUE(r1.Wait().ok());
  ASSERT_TRUE(r2.Wait().ok());
  EXPECT_FALSE(r4.is_completed());

  // B: the three unanswered messages again, then answers (a second reply,
  // a stale one from the former primary, then the real one), then a new
  // request, then B dies with one more in flight.
  std::vector<Received> at_b;
  std::thread replica([&] {
    for (int i = 0; i < 3; ++i) at_b.push_back(NextMessage(b_));
    if (at_b.size() != 3 || at_b[1].parsed.request_id() == 0) return;
    const std::string& w = at_b[0].identity;
    Answer(b_, w, at_b[1].parsed.request_id(), PUSH_REPLY, 2, kIncarnationB);
    Answer(b_, w, at_b[1].parsed.request_id(), PUSH_REPLY, 2, kIncarnationB);   // dropped: answered
    Answer(b_, w, at_b[2].parsed.request_id(), ERROR_REPLY, 1, kIncarnationA);  // dropped: generation 1
    Answer(b_, w, at_b[2].parsed.request_id(), PULL_REPLY, 2, kIncarnationB);
    at_b.push_back(NextMessage(b_));
    Answer(b_, w, at_b[3].parsed.request_id(), PULL_REPLY, 2, kIncarnationB);
    at_b.push_back(NextMessage(b_));
    b_.close();
  });
  a_.close();  // the primary dies
  EXPECT_TRUE(r4.Wait().ok());
  EXPECT_TRUE(r5.Wait().ok()) << "the generation-1 error reached no request";
  EXPECT_EQ(channel_->server(0), endpoint_b_);
  const RequestHandle r6 = Send(PULL, PULL_REPLY, 6);
  EXPECT_TRUE(r6.Wait().ok());
  const RequestHandle r7 = Send(PULL, PULL_REPLY, 7);
  const Status gone = r7.Wait();
  replica.join();

  ASSERT_EQ(at_b.size(), 5u);
  for (int i = 0; i < 3; ++i) {
    SCOPED_TRACE("message " + std::to_string(i) + " sent again");
    const Received& before = at_a[static_cast<size_t>(2 + i)];
    EXPECT_EQ(at_b[static_cast<size_t>(i)].header, before.header) << "same request id, rank, clock: same bytes";
    EXPECT_EQ(at_b[static_cast<size_t>(i)].keys, before.keys);
    EXPECT_EQ(at_b[static_cast<size_t>(i)].values, before.values);
    EXPECT_EQ(at_b[static_cast<size_t>(i)].identity, before.identity) << "the same worker identity";
  }
  EXPECT_EQ(at_b[0].parsed.type(), CLOCK);
  EXPECT_EQ(at_b[1].values, std::string(4000, 'q'));
  EXPECT_EQ(at_b[3].parsed.type(), PULL);
  EXPECT_GT(at_b[3].parsed.request_id(), at_a[4].parsed.request_id()) << "a new request, nothing sent twice";
  EXPECT_EQ(tags_, (std::vector<uint64_t>{100, 1, 2, 4, 5, 6})) << "one handler call per request";
  EXPECT_EQ(channel_->stats().failovers, 1u);
  EXPECT_EQ(gone.code(), Status::Code::kUnavailable) << gone.ToString();
  EXPECT_EQ(gone.message(), "[worker 0] server shard 0 at " + endpoint_b_ +
                                " is gone: its connection dropped with 1 request(s) in flight, whose replies are lost");
  EXPECT_EQ(channel_->stats().failovers, 1u) << "no successor was left";
}

// The chain ran out (the primary died, the worker followed the last
// replica) and grew again (a replica joined the claimant): a request sent
// while no successor was known, still unanswered when the claimant dies,
// goes again to the replica that joined, byte for byte.
TEST_F(ChainFollowTest, ARequestSentWhileNoSuccessorWasKnownGoesToAReplicaThatJoinedLater) {
  std::string endpoint_c;
  zmq::socket_t c = Bind(&endpoint_c);
  Start(4000);
  Hello({endpoint_b_});
  const RequestHandle r1 = Send(PULL, PULL_REPLY, 1);
  (void)NextMessage(a_);
  a_.close();  // the primary dies: the worker follows to B, the last of its chain
  ASSERT_TRUE(testing::PollUntil(5000, [&] {
    (void)r1.Wait(20);
    return channel_->server(0) == endpoint_b_;
  }));
  const RequestHandle r2 = Send(PULL, PULL_REPLY, 2);  // no successor known
  const Received r1_at_b = NextMessage(b_);
  const Received r2_at_b = NextMessage(b_);
  ASSERT_EQ(r2_at_b.parsed.type(), PULL);
  // B, which claimed the shard, gains a replica C: its reply to r1 names it.
  Message named;
  named.header.set_type(PULL_REPLY);
  named.header.set_request_id(r1_at_b.parsed.request_id());
  named.header.set_shard_generation(3);
  named.header.set_server_incarnation(kIncarnationB);
  named.header.add_chain_endpoints(endpoint_c);
  ASSERT_TRUE(SendMessage(b_, &named, &r1_at_b.identity, "worker").ok());
  ASSERT_TRUE(r1.Wait().ok());
  EXPECT_FALSE(r2.is_completed());
  Received r2_at_c;
  std::thread replica([&] {
    r2_at_c = NextMessage(c);
    if (r2_at_c.parsed.request_id() != 0)
      Answer(c, r2_at_c.identity, r2_at_c.parsed.request_id(), PULL_REPLY, 4, 0xc3);
  });
  b_.close();  // the claimant dies with r2 unanswered
  EXPECT_TRUE(r2.Wait().ok());
  replica.join();
  EXPECT_EQ(channel_->server(0), endpoint_c);
  EXPECT_EQ(r2_at_c.header, r2_at_b.header) << "the same request, sent again";
  EXPECT_EQ(r2_at_c.identity, r2_at_b.identity);
  EXPECT_EQ(channel_->stats().failovers, 2u);
}

// A shard whose HELLO_REPLY named no chain fails as before when its server
// dies with a request in flight, and keeps no copies.
TEST_F(ChainFollowTest, ShardWithoutAChainStillFailsWhenItsServerDies) {
  Start(4000);
  Hello({});
  const RequestHandle r = Send(PUSH, PUSH_REPLY, 1, std::string(400, 'p'));
  EXPECT_EQ(NextMessage(a_).parsed.type(), PUSH);
  a_.close();
  const Status st = r.Wait();
  EXPECT_EQ(st.code(), Status::Code::kUnavailable) << st.ToString();
  EXPECT_EQ(st.message(), "[worker 0] server shard 0 at " + endpoint_a_ +
                              " is gone: its connection dropped with 1 request(s) in flight, whose replies are lost");
  EXPECT_EQ(channel_->server(0), endpoint_a_);
  EXPECT_EQ(channel_->stats().failovers, 0u);
  zmq::pollitem_t item = {b_.handle(), 0, ZMQ_POLLIN, 0};
  EXPECT_EQ(zmq::poll(&item, 1, std::chrono::milliseconds(0)), 0) << "nothing went to B";
}

// The next server of the chain, the last, is gone too: the shard is given
// up once liveness_timeout_ms passed without a connection there, naming it.
TEST_F(ChainFollowTest, ASuccessorThatNeverAnswersIsGivenUpAfterTheLivenessTimeout) {
  Start(600);
  Hello({endpoint_b_});
  b_.close();
  const RequestHandle r = Send(PULL, PULL_REPLY, 1);
  EXPECT_EQ(NextMessage(a_).parsed.type(), PULL);
  a_.close();
  const Status st = r.Wait();
  EXPECT_EQ(st.code(), Status::Code::kUnavailable) << st.ToString();
  const std::string start = "[worker 0] server shard 0 at " + endpoint_b_ + " is gone: its primary disconnected ";
  EXPECT_EQ(st.message().rfind(start, 0), 0u) << st.message();
  EXPECT_NE(st.message().find(" s ago and this next server of its chain never answered "
                              "(cluster.liveness_timeout_ms=600)"),
            std::string::npos)
      << st.message();
  EXPECT_GE(DownSeconds(st.message()), 0.6) << "given up only once the timeout passed";
  EXPECT_EQ(channel_->stats().failovers, 1u);
}

// The primary and the next server of the chain die together (B's port
// refuses connections): the worker passes B over well before
// liveness_timeout_ms and sends the unanswered messages to C, the server
// after it, byte for byte; C answers them.
TEST_F(ChainFollowTest, ASuccessorThatRefusesTheConnectionIsPassedOverForTheNext) {
  testing::LogCapture log;
  std::string endpoint_c;
  zmq::socket_t c = Bind(&endpoint_c);
  Start(5000);
  Hello({endpoint_b_, endpoint_c});
  b_.close();  // B's process died: its port refuses
  const RequestHandle r1 = Send(PUSH, PUSH_REPLY, 1, std::string(400, 'p'));
  const RequestHandle r2 = Send(PULL, PULL_REPLY, 2);
  std::vector<Received> at_a;
  for (int i = 0; i < 2; ++i) at_a.push_back(NextMessage(a_));
  std::vector<Received> at_c;
  std::thread replica([&] {
    for (int i = 0; i < 2; ++i) at_c.push_back(NextMessage(c));
    for (const Received& m : at_c)
      Answer(c, m.identity, m.parsed.request_id(), m.parsed.type() == PUSH ? PUSH_REPLY : PULL_REPLY, 2,
             kIncarnationB);
  });
  a_.close();  // the primary dies
  const Status s1 = r1.Wait(), s2 = r2.Wait();
  replica.join();
  EXPECT_TRUE(s1.ok()) << s1.ToString();
  EXPECT_TRUE(s2.ok()) << s2.ToString();
  ASSERT_EQ(at_c.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(at_c[i].header, at_a[i].header) << "message " << i << " sent again, same bytes";
    EXPECT_EQ(at_c[i].values, at_a[i].values);
    EXPECT_EQ(at_c[i].identity, at_a[i].identity);
  }
  EXPECT_EQ(channel_->server(0), endpoint_c);
  EXPECT_EQ(channel_->stats().failovers, 1u) << "one failover, B passed over within it";
  // A refused connection is a dead process: passed over on its refusals,
  // never waited for (B would have been given up at the timeout).
  EXPECT_EQ(log.Matching({"the next server of its chain at " + endpoint_b_ + " refused the connection",
                          "following the chain on to " + endpoint_c})
                .size(),
            1u);
}

// The next server of the chain is stopped: its kernel accepts the
// connection and nothing answers. The worker waits for it (a slow process
// may still claim) and does not move on to C; the shard is given up after
// liveness_timeout_ms, naming B.
TEST_F(ChainFollowTest, ASuccessorThatAcceptsAndNeverAnswersIsWaitedForNotPassedOver) {
  testing::SilentListener stopped;
  ASSERT_FALSE(stopped.endpoint().empty());
  std::string endpoint_c;
  zmq::socket_t c = Bind(&endpoint_c);
  Start(800);
  Hello({stopped.endpoint(), endpoint_c});
  const RequestHandle r = Send(PULL, PULL_REPLY, 1);
  EXPECT_EQ(NextMessage(a_).parsed.type(), PULL);
  a_.close();
  const Status st = r.Wait();
  EXPECT_EQ(st.code(), Status::Code::kUnavailable) << st.ToString();
  const std::string start =
      "[worker 0] server shard 0 at " + stopped.endpoint() + " is gone: its primary disconnected ";
  EXPECT_EQ(st.message().rfind(start, 0), 0u) << st.message();
  EXPECT_NE(st.message().find(" s ago and this next server of its chain never answered "
                              "(cluster.liveness_timeout_ms=800)"),
            std::string::npos)
      << st.message();
  EXPECT_GE(DownSeconds(st.message()), 0.8) << "waited for up to the timeout";
  EXPECT_EQ(channel_->server(0), stopped.endpoint());
  zmq::pollitem_t item = {c.handle(), 0, ZMQ_POLLIN, 0};
  EXPECT_EQ(zmq::poll(&item, 1, std::chrono::milliseconds(0)), 0) << "nothing went to C";
}

// A rendezvous entry as a claiming copy rewrites it: the reader returns
// `script` in turn, then its last value again; `reads` counts the reads.
std::shared_ptr<ClaimLookup> ScriptedClaims(std::vector<std::string> script, int interval_ms,
                                            std::shared_ptr<std::atomic<int>> reads) {
  ClaimLookup::Options o;
  o.interval_ms = interval_ms;
  o.source = "rendezvous file:/r";
  o.log_prefix = "[worker 0] ";
  return std::make_shared<ClaimLookup>(
      1,
      [script = std::move(script), reads](int shard) -> StatusOr<std::string> {
        EXPECT_EQ(shard, 0);
        const int i = reads->fetch_add(1);
        return script[std::min<size_t>(static_cast<size_t>(i), script.size() - 1)];
      },
      o);
}

// The worker's chain for the shard is [B], B's port refuses (its process
// dropped that copy), and the primary dies: the chain ran out, so the
// worker reads the shard's rendezvous entry, which first names the
// primary and then B (endpoints it was at: no news), then C, the process
// that claimed the shard since on a port the worker never heard of. The
// two unanswered messages go to C byte for byte, C answers them with its
// higher generation and its own start id, and the shard serves on. The
// entry was not read while the primary served.
TEST_F(ChainFollowTest, AChainThatRanOutIsFollowedToTheClaimantItsRendezvousEntryNames) {
  testing::LogCapture log;
  std::string endpoint_c;
  zmq::socket_t c = Bind(&endpoint_c);
  auto reads = std::make_shared<std::atomic<int>>(0);
  claim_lookup_ = ScriptedClaims({endpoint_a_, endpoint_b_, endpoint_c}, 20, reads);
  Start(5000);
  Hello({endpoint_b_});
  b_.close();  // the copy at B is gone: its port refuses
  const RequestHandle r1 = Send(PUSH, PUSH_REPLY, 1, std::string(400, 'p'));
  const RequestHandle r2 = Send(PULL, PULL_REPLY, 2);
  std::vector<Received> at_a;
  for (int i = 0; i < 2; ++i) at_a.push_back(NextMessage(a_));
  EXPECT_EQ(reads->load(), 0) << "a shard whose primary serves is not looked up";
  std::vector<Received> at_c;
  std::thread claimant([&] {
    for (int i = 0; i < 2; ++i) at_c.push_back(NextMessage(c));
    for (const Received& m : at_c)
      Answer(c, m.identity, m.parsed.request_id(), m.parsed.type() == PUSH ? PUSH_REPLY : PULL_REPLY, 5, 0xc3);
  });
  a_.close();  // the primary dies
  const Status s1 = r1.Wait(), s2 = r2.Wait();
  claimant.join();
  EXPECT_TRUE(s1.ok()) << s1.ToString();
  EXPECT_TRUE(s2.ok()) << s2.ToString();
  ASSERT_EQ(at_c.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(at_c[i].header, at_a[i].header) << "message " << i << " sent again, same bytes";
    EXPECT_EQ(at_c[i].values, at_a[i].values);
    EXPECT_EQ(at_c[i].identity, at_a[i].identity);
  }
  EXPECT_EQ(channel_->server(0), endpoint_c);
  EXPECT_GE(reads->load(), 3) << "the primary's and B's entries were passed over";
  EXPECT_EQ(channel_->stats().failovers, 1u);
  // Followed from the entry, once: a worker that waited out
  // liveness_timeout_ms=5000 first would have given the shard up instead.
  EXPECT_EQ(log.Matching({"its chain as this worker knows it ends at " + endpoint_b_, "names " + endpoint_c}).size(),
            1u);
  EXPECT_TRUE(log.Matching({"is gone"}).empty()) << log.Matching({"is gone"})[0];
  // C serves the shard: a new request goes there, and nothing else came.
  const RequestHandle r3 = Send(PULL, PULL_REPLY, 3);
  const Received third = NextMessage(c);
  EXPECT_EQ(third.parsed.type(), PULL);
  EXPECT_GT(third.parsed.request_id(), at_a[1].parsed.request_id());
  Answer(c, third.identity, third.parsed.request_id(), PULL_REPLY, 5, 0xc3);
  EXPECT_TRUE(r3.Wait().ok());
  EXPECT_EQ(tags_, (std::vector<uint64_t>{100, 1, 2, 3}));
}

// The worker followed the chain to its last server, B, which serves the
// shard and then dies with a request in flight before the worker heard
// of a replica that joined it: no successor is known, so the worker reads
// the shard's rendezvous entry, which names C (the replica that claimed
// the shard since), and sends the request again there, byte for byte.
TEST_F(ChainFollowTest, TheLastServerKnownDyingIsFollowedToTheClaimantItsRendezvousEntryNames) {
  std::string endpoint_c;
  zmq::socket_t c = Bind(&endpoint_c);
  auto reads = std::make_shared<std::atomic<int>>(0);
  claim_lookup_ = ScriptedClaims({endpoint_b_, endpoint_c}, 20, reads);
  Start(5000);
  Hello({endpoint_b_});
  const RequestHandle r1 = Send(PULL, PULL_REPLY, 1);
  (void)NextMessage(a_);
  a_.close();  // the primary dies: the worker follows to B, the last of its chain
  ASSERT_TRUE(testing::PollUntil(5000, [&] {
    (void)r1.Wait(20);
    return channel_->server(0) == endpoint_b_;
  }));
  const Received r1_at_b = NextMessage(b_);
  Answer(b_, r1_at_b.identity, r1_at_b.parsed.request_id(), PULL_REPLY, 2, kIncarnationB);
  ASSERT_TRUE(r1.Wait().ok());
  EXPECT_EQ(channel_->server(0), endpoint_b_);
  // Read once at most meanwhile (before B's handshake: it named B, known).
  EXPECT_LE(reads->load(), 1);
  const RequestHandle r2 = Send(PUSH, PUSH_REPLY, 2, std::string(400, 'p'));
  const Received r2_at_b = NextMessage(b_);
  ASSERT_EQ(r2_at_b.parsed.type(), PUSH);
  Received r2_at_c;
  std::thread claimant([&] {
    r2_at_c = NextMessage(c);
    if (r2_at_c.parsed.request_id() != 0)
      Answer(c, r2_at_c.identity, r2_at_c.parsed.request_id(), PUSH_REPLY, 4, 0xc3);
  });
  b_.close();  // the claimant dies with r2 unanswered
  const Status st = r2.Wait();
  claimant.join();
  EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(channel_->server(0), endpoint_c);
  EXPECT_EQ(r2_at_c.header, r2_at_b.header) << "the same request, sent again";
  EXPECT_EQ(r2_at_c.values, r2_at_b.values);
  EXPECT_EQ(r2_at_c.identity, r2_at_b.identity);
  EXPECT_GE(reads->load(), 2) << "B's entry (known), then C's";
  EXPECT_EQ(channel_->stats().failovers, 2u);
  EXPECT_EQ(tags_, (std::vector<uint64_t>{100, 1, 2}));
}

// No process claimed the shard: the entry keeps naming endpoints the
// worker was at. The shard is given up after liveness_timeout_ms as
// before, the message saying that the rendezvous named no claimant; the
// entry was read about once per interval meanwhile.
TEST_F(ChainFollowTest, AChainThatRanOutWithNoClaimantIsGivenUpAfterTheLivenessTimeout) {
  auto reads = std::make_shared<std::atomic<int>>(0);
  claim_lookup_ = ScriptedClaims({endpoint_a_}, 100, reads);
  Start(800);
  Hello({endpoint_b_});
  b_.close();
  const RequestHandle r = Send(PULL, PULL_REPLY, 1);
  EXPECT_EQ(NextMessage(a_).parsed.type(), PULL);
  a_.close();
  const Status st = r.Wait();
  EXPECT_EQ(st.code(), Status::Code::kUnavailable) << st.ToString();
  const std::string start = "[worker 0] server shard 0 at " + endpoint_b_ + " is gone: its primary disconnected ";
  EXPECT_EQ(st.message().rfind(start, 0), 0u) << st.message();
  EXPECT_NE(st.message().find(" s ago and this next server of its chain never answered, and its entry in "
                              "rendezvous file:/r named no other process claiming it "
                              "(cluster.liveness_timeout_ms=800)"),
            std::string::npos)
      << st.message();
  // By the worker's own clock: given up once the timeout passed, the entry
  // read once per 100 ms at most until then (the give-up names the time
  // to a tenth of a second).
  const double down_s = DownSeconds(st.message());
  EXPECT_GE(down_s, 0.8);
  EXPECT_GE(reads->load(), 1);
  EXPECT_LE(reads->load(), static_cast<int>(down_s * 10) + 2) << "one read per 100 ms at most";
  EXPECT_EQ(channel_->server(0), endpoint_b_);
}

TEST_F(ChainFollowTest, AChainEndpointThatIsNoNetworkAddressIsRefused) {
  Start(4000);
  const Status st = channel_->SetChain(0, {endpoint_b_, "inproc://elsewhere"});
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(st.message(), "[worker 0] server shard 0 at " + endpoint_a_ +
                              " named chain_endpoints[1] 'inproc://elsewhere', which is not a tcp:// or ipc:// "
                              "endpoint");
}

}  // namespace
}  // namespace tether
