// RequestChannel against a raw ROUTER socket in the test thread (inproc, one
// ZeroMQ context): the test reads each request and answers as it likes.
#include "worker/client/request_channel.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "core/net/transport.h"

namespace tether {
namespace {

class ChannelTest : public ::testing::Test {
 protected:
  ChannelTest() {
    SocketOptions so;
    auto router = BindRouter(ctx_, "inproc://request-channel-test", so, &endpoint_);
    EXPECT_TRUE(router.ok()) << router.status().ToString();
    router_ = std::move(router).value();
    RequestChannel::Options o;
    o.servers = {endpoint_};
    o.context = &ctx_;
    o.request_timeout_ms = 2000;
    channel_ = std::make_unique<RequestChannel>(o, [this](uint64_t tag, const Status& verdict, Message*) {
      tags_.push_back(tag);
      return verdict;
    });
    EXPECT_TRUE(channel_->Connect().ok());
  }

  // Sends a PULL as a part of `request` with `tag`.
  void SendPull(const RequestHandle& request, uint64_t tag) {
    Message m;
    m.header.set_type(PULL);
    ASSERT_TRUE(channel_->Send(0, &m, &request, PULL_REPLY, tag).ok());
  }
  // Receives the next request at the peer; returns its header.
  MessageHeader Receive() {
    Message m;
    zmq::pollitem_t item = {router_.handle(), 0, ZMQ_POLLIN, 0};
    EXPECT_EQ(zmq::poll(&item, 1, std::chrono::milliseconds(2000)), 1);
    EXPECT_TRUE(RecvMessage(router_, &m, &peer_).ok());
    return m.header;
  }
  void Reply(uint64_t request_id, MessageType type, const std::string& error = "") {
    Message m;
    m.header.set_type(type);
    m.header.set_request_id(request_id);
    if (type == ERROR_REPLY) m.header.mutable_error_reply()->set_error(error);
    ASSERT_TRUE(SendMessage(router_, &m, &peer_, "worker").ok());
  }

  zmq::context_t ctx_;
  zmq::socket_t router_;
  std::string endpoint_, peer_;
  std::unique_ptr<RequestChannel> channel_;
  std::vector<uint64_t> tags_;
};

TEST_F(ChannelTest, RequestCompletesWhenEveryPartIsAnsweredWithItsOwnStatus) {
  const RequestHandle a = channel_->NewRequest(/*sticky=*/false);
  const RequestHandle b = channel_->NewRequest(/*sticky=*/false);
  EXPECT_TRUE(a.is_completed()) << "nothing sent yet";
  SendPull(a, 10);
  SendPull(a, 11);
  SendPull(b, 20);
  EXPECT_EQ(channel_->in_flight(), 3u);
  const MessageHeader a1 = Receive(), a2 = Receive(), b1 = Receive();
  EXPECT_NE(a1.request_id(), a2.request_id());
  EXPECT_FALSE(a.is_completed());
  EXPECT_EQ(a.status().code(), Status::Code::kUnavailable) << "in flight";
  Reply(b1.request_id(), ERROR_REPLY, "no such row");
  Reply(a2.request_id(), PULL_REPLY);
  EXPECT_EQ(b.Wait().message(), "no such row");
  EXPECT_FALSE(a.is_completed()) << "one part of a still owed";
  Reply(a1.request_id(), PULL_REPLY);
  EXPECT_TRUE(a.Wait().ok()) << "b's error is not a's";
  EXPECT_EQ(tags_, (std::vector<uint64_t>{20, 11, 10}));
  EXPECT_EQ(channel_->in_flight(), 0u);
  EXPECT_TRUE(channel_->sticky_error().ok()) << "b was not sticky";
  EXPECT_EQ(b.Wait().message(), "no such row") << "same answer twice";
}

TEST_F(ChannelTest, WrongTypeFailsItsRequestUnknownIdsAreIgnoredStickyFailuresStick) {
  const RequestHandle push = channel_->NewRequest(/*sticky=*/true);
  const RequestHandle pull = channel_->NewRequest(/*sticky=*/false);
  SendPull(push, 1);
  SendPull(pull, 2);
  const MessageHeader p1 = Receive(), p2 = Receive();
  Reply(p1.request_id() + (uint64_t{1} << 40), PULL_REPLY);  // nobody's id
  Reply(p1.request_id(), BYE_REPLY);
  Reply(p2.request_id(), PULL_REPLY);
  const Status st = push.Wait();
  EXPECT_EQ(st.code(), Status::Code::kDataLoss);
  EXPECT_NE(st.message().find("answered BYE_REPLY to a request expecting PULL_REPLY"), std::string::npos)
      << st.message();
  EXPECT_TRUE(pull.Wait().ok());
  EXPECT_EQ(tags_.size(), 2u) << "the unknown reply reached no handler";
  EXPECT_EQ(channel_->sticky_error().message(), st.message());
  EXPECT_EQ(channel_->WaitAll().message(), st.message());
}

// A shard's address answered by another server process (killed and started
// again by hand): its replies carry another start id. The shard is given
// up naming it, and the new process's reply (its confusion: it knows no
// table) reaches no handler. ABORT names the process the worker knew.
TEST_F(ChannelTest, AReplyFromAnotherServerProcessGivesTheShardUp) {
  auto reply = [this](uint64_t request_id, MessageType type, uint64_t incarnation, const std::string& error) {
    Message m;
    m.header.set_type(type);
    m.header.set_request_id(request_id);
    if (type == ERROR_REPLY) m.header.mutable_error_reply()->set_error(error);
    if (incarnation != 0) m.header.set_server_incarnation(incarnation);
    ASSERT_TRUE(SendMessage(router_, &m, &peer_, "worker").ok());
  };
  const RequestHandle a = channel_->NewRequest(false);
  SendPull(a, 1);
  reply(Receive().request_id(), PULL_REPLY, 0x7a, "");
  EXPECT_TRUE(a.Wait().ok());
  const RequestHandle b = channel_->NewRequest(false);
  SendPull(b, 2);
  reply(Receive().request_id(), PULL_REPLY, 0, "");  // no id (an older server): not checked
  EXPECT_TRUE(b.Wait().ok());
  const RequestHandle c = channel_->NewRequest(/*sticky=*/true);
  SendPull(c, 3);
  reply(Receive().request_id(), ERROR_REPLY, 0x9b, "PULL from worker 0: unknown table id 0");
  const Status st = c.Wait();
  EXPECT_EQ(st.code(), Status::Code::kUnavailable);
  EXPECT_EQ(st.message(), "[worker 0] server shard 0 at " + endpoint_ +
                              " restarted (new process, start id 000000000000009b; this worker joined "
                              "000000000000007a) and holds none of the job's tables; resume the job from a checkpoint "
                              "(start every server and worker again, the workers with --resume_from=CHECKPOINT_DIR; "
                              "a job without checkpoint.dir starts over)");
  EXPECT_EQ(tags_, (std::vector<uint64_t>{1, 2})) << "the new process's reply reached no handler";
  EXPECT_EQ(channel_->sticky_error().message(), st.message());
  const RequestHandle d = channel_->NewRequest(false);
  Message m;
  m.header.set_type(PULL);
  EXPECT_EQ(channel_->Send(0, &m, &d, PULL_REPLY, 4).message(), st.message()) << "a given-up shard takes nothing";
  EXPECT_EQ(channel_->SendAbort("worker 0 failed: " + st.message(), 500, "job", 0), 1);
  const MessageHeader abort = Receive();
  EXPECT_EQ(abort.type(), ABORT);
  EXPECT_EQ(abort.job_abort().known_server_incarnation(), 0x7au) << "the process this worker joined";
}

TEST_F(ChannelTest, WaitWithATimeoutLeavesTheRequestOutstanding) {
  const RequestHandle a = channel_->NewRequest(false);
  SendPull(a, 1);
  const MessageHeader h = Receive();
  EXPECT_EQ(a.Wait(20).code(), Status::Code::kDeadlineExceeded);
  EXPECT_EQ(channel_->in_flight(), 1u);
  Reply(h.request_id(), PULL_REPLY);
  EXPECT_TRUE(a.Wait(2000).ok());
}

// A worker that keeps talking to one shard (polling shard 0 for a chunk,
// or waiting on it) must still heartbeat the others: the servers drop a
// worker they have not heard from for cluster.worker_timeout_ms. Heartbeats
// go per shard, to a shard silent for an interval, and no oftener.
TEST(ChannelHeartbeatTest, AShardNotSentToGetsHeartbeatsWhileAnotherIsBusy) {
  zmq::context_t ctx;
  std::vector<zmq::socket_t> routers;
  RequestChannel::Options o;
  for (int s = 0; s < 2; ++s) {
    std::string endpoint;
    auto router = BindRouter(ctx, "inproc://heartbeat-test-" + std::to_string(s), SocketOptions{}, &endpoint);
    ASSERT_TRUE(router.ok()) << router.status().ToString();
    routers.push_back(std::move(router).value());
    o.servers.push_back(endpoint);
  }
  o.context = &ctx;
  o.request_timeout_ms = 2000;
  constexpr int kIntervalMs = 20;
  o.heartbeat_interval_ms = kIntervalMs;
  RequestChannel channel(o, [](uint64_t, const Status& verdict, Message*) { return verdict; });
  ASSERT_TRUE(channel.Connect().ok());
  // Like a worker waiting for a chunk: a request to shard 0 answered at
  // once, a short idle, again; shard 1 hears nothing else.
  const auto start = std::chrono::steady_clock::now();
  const auto ms_since_start = [&] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
  };
  int heartbeats_1 = 0, other_1 = 0, requests_0 = 0;
  while (heartbeats_1 < 3 && ms_since_start() < 5000) {
    const RequestHandle h = channel.NewRequest(/*sticky=*/false);
    Message m;
    m.header.set_type(PULL);
    ASSERT_TRUE(channel.Send(0, &m, &h, PULL_REPLY, 1).ok());
    std::string peer;
    uint64_t id = 0;
    // Shard 0 may see heartbeats too (an iteration slower than the
    // interval); the PULL is the one to answer.
    while (id == 0) {
      Message in;
      zmq::pollitem_t item = {routers[0].handle(), 0, ZMQ_POLLIN, 0};
      ASSERT_EQ(zmq::poll(&item, 1, std::chrono::milliseconds(2000)), 1);
      ASSERT_TRUE(RecvMessage(routers[0], &in, &peer).ok());
      if (in.header.type() == PULL) id = in.header.request_id();
    }
    ++requests_0;
    Message reply;
    reply.header.set_type(PULL_REPLY);
    reply.header.set_request_id(id);
    ASSERT_TRUE(SendMessage(routers[0], &reply, &peer, "worker").ok());
    ASSERT_TRUE(h.Wait(2000).ok());
    ASSERT_TRUE(channel.Idle(2).ok());
    while (true) {
      zmq::pollitem_t item = {routers[1].handle(), 0, ZMQ_POLLIN, 0};
      if (zmq::poll(&item, 1, std::chrono::milliseconds(0)) != 1) break;
      Message in;
      ASSERT_TRUE(RecvMessage(routers[1], &in, &peer).ok());
      (in.header.type() == HEARTBEAT ? heartbeats_1 : other_1) += 1;
    }
  }
  EXPECT_EQ(heartbeats_1, 3) << "within 5 s, over " << requests_0 << " requests to shard 0";
  EXPECT_EQ(other_1, 0);
  // Three heartbeats, each an interval after the one before: never sooner.
  EXPECT_GE(ms_since_start(), 3 * kIntervalMs);
}

// Idle(1), a worker's heartbeat between buffers of data it reads (label
// counting, streamed blocks), heartbeats a shard silent for an interval
// like any longer wait: a worker reading for longer than
// cluster.worker_timeout_ms in 1 ms idles must stay alive.
TEST(ChannelHeartbeatTest, OneMillisecondIdlesHeartbeat) {
  zmq::context_t ctx;
  std::string endpoint;
  auto router = BindRouter(ctx, "inproc://idle-heartbeat-test", SocketOptions{}, &endpoint);
  ASSERT_TRUE(router.ok()) << router.status().ToString();
  RequestChannel::Options o;
  o.servers.push_back(endpoint);
  o.context = &ctx;
  o.request_timeout_ms = 2000;
  o.heartbeat_interval_ms = 20;
  RequestChannel channel(o, [](uint64_t, const Status& verdict, Message*) { return verdict; });
  ASSERT_TRUE(channel.Connect().ok());
  const auto start = std::chrono::steady_clock::now();
  int heartbeats = 0, idles = 0;
  while (heartbeats < 2 && std::chrono::steady_clock::now() - start < std::chrono::seconds(5)) {
    ASSERT_TRUE(channel.Idle(1).ok());
    ++idles;
    zmq::pollitem_t item = {router->handle(), 0, ZMQ_POLLIN, 0};
    while (zmq::poll(&item, 1, std::chrono::milliseconds(0)) == 1) {
      Message in;
      std::string peer;
      ASSERT_TRUE(RecvMessage(*router, &in, &peer).ok());
      EXPECT_EQ(in.header.type(), HEARTBEAT);
      ++heartbeats;
    }
  }
  EXPECT_EQ(heartbeats, 2) << "within 5 s, over " << idles << " idles of 1 ms";
}

// Liveness over tcp: the test thread's ROUTER on 127.0.0.1 (port 0) plays
// the server; closing it is a dead server (its connection closes), not
// answering is a busy one (ZeroMQ's I/O thread still answers heartbeats).
class LivenessTest : public ::testing::Test {
 protected:
  void Start(int liveness_ms, std::function<bool()> stop = {}) {
    auto router = BindRouter(ctx_, "tcp://127.0.0.1:0", SocketOptions{}, &endpoint_);
    ASSERT_TRUE(router.ok()) << router.status().ToString();
    router_ = std::move(router).value();
    RequestChannel::Options o;
    o.servers = {endpoint_};
    o.context = &ctx_;
    o.request_timeout_ms = 20000;
    o.liveness_timeout_ms = liveness_ms;
    o.stop_requested = std::move(stop);
    channel_ = std::make_unique<RequestChannel>(o, [](uint64_t, const Status& verdict, Message*) { return verdict; });
    ASSERT_TRUE(channel_->Connect().ok());
  }
  // A PULL that the router has received (so the connection is up).
  RequestHandle Pull() {
    const RequestHandle h = channel_->NewRequest(/*sticky=*/false);
    Message m;
    m.header.set_type(PULL);
    EXPECT_TRUE(channel_->Send(0, &m, &h, PULL_REPLY, 1).ok());
    header_ = Receive(&m);
    return h;
  }
  MessageHeader Receive(Message* m) {
    zmq::pollitem_t item = {router_.handle(), 0, ZMQ_POLLIN, 0};
    EXPECT_EQ(zmq::poll(&item, 1, std::chrono::milliseconds(5000)), 1);
    EXPECT_TRUE(RecvMessage(router_, m, &peer_).ok());
    return m->header;
  }
  static int64_t MsSince(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t).count();
  }

  zmq::context_t ctx_;
  zmq::socket_t router_;
  std::string endpoint_, peer_;
  MessageHeader header_;
  std::unique_ptr<RequestChannel> channel_;
};

// A server that dies under a request: what was in flight on the dropped
// connection is lost, so the wait fails at once, naming shard and endpoint
// (not after request_timeout_ms, and not as if the push might have landed).
TEST_F(LivenessTest, DeadServerWithARequestInFlightFailsAtOnceNamingShardAndEndpoint) {
  Start(300);
  const RequestHandle pull = Pull();
  EXPECT_TRUE(channel_->shard_up(0));
  const auto t0 = std::chrono::steady_clock::now();
  router_.close();  // the server dies: its connections close
  const Status st = pull.Wait();  // request_timeout_ms is 20 s
  const int64_t took = MsSince(t0);
  EXPECT_EQ(st.code(), Status::Code::kUnavailable) << st.ToString();
  EXPECT_NE(st.message().find("server shard 0 at " + endpoint_ +
                              " is gone: its connection dropped with 1 request(s) in flight, whose replies are lost"),
            std::string::npos)
      << st.message();
  EXPECT_LT(took, 3000);
  EXPECT_FALSE(channel_->shard_up(0));
  EXPECT_EQ(channel_->sticky_error().message(), st.message()) << "every later Clock/Barrier/Bye fails too";
}

TEST_F(LivenessTest, BusyServerIsWaitedForNotGivenUp) {
  Start(300);
  const RequestHandle pull = Pull();
  // The server's loop does not answer for 4 liveness timeouts (a long
  // checkpoint write), but its process (and ZeroMQ's I/O thread) is alive.
  const Status st = pull.Wait(1200);
  EXPECT_EQ(st.code(), Status::Code::kDeadlineExceeded) << st.ToString();
  EXPECT_TRUE(channel_->shard_up(0));
  Message reply;
  reply.header.set_type(PULL_REPLY);
  reply.header.set_request_id(header_.request_id());
  ASSERT_TRUE(SendMessage(router_, &reply, &peer_, "worker").ok());
  EXPECT_TRUE(pull.Wait(5000).ok());
}

TEST_F(LivenessTest, StopRequestEndsABlockedWaitPromptlyThenLeavingIgnoresIt) {
  std::atomic<bool> stop{false};
  Start(300, [&stop] { return stop.load(); });
  const RequestHandle pull = Pull();
  std::thread signaller([&stop] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the "signal" lands mid-wait
    stop.store(true);
  });
  const auto t0 = std::chrono::steady_clock::now();
  const Status st = pull.Wait();
  const int64_t took = MsSince(t0);
  signaller.join();
  EXPECT_EQ(st.code(), Status::Code::kUnavailable);
  EXPECT_NE(st.message().find("stop requested"), std::string::npos) << st.message();
  EXPECT_LT(took, 200 + 2 * RequestChannel::kStopPollMs + 200);
  // Leaving: the goodbye's own wait is not cut short by the stop request.
  channel_->BeginLeaving(300);
  const RequestHandle bye = channel_->NewRequest(false);
  Message m;
  m.header.set_type(BYE);
  ASSERT_TRUE(channel_->Send(0, &m, &bye, BYE_REPLY, 3).ok());
  Message got;
  EXPECT_EQ(Receive(&got).type(), BYE);
  Message reply;
  reply.header.set_type(BYE_REPLY);
  reply.header.set_request_id(got.header.request_id());
  ASSERT_TRUE(SendMessage(router_, &reply, &peer_, "worker").ok());
  EXPECT_TRUE(bye.Wait(3000).ok());
}

TEST_F(LivenessTest, AbortReachesTheServerWithItsReason) {
  Start(300);
  (void)Pull();
  EXPECT_EQ(channel_->SendAbort("worker 0 failed: out of memory", 500), 1);
  Message m;
  const MessageHeader h = Receive(&m);
  EXPECT_EQ(h.type(), ABORT);
  EXPECT_EQ(h.job_abort().reason(), "worker 0 failed: out of memory");
}

void NoOp(int) {}

// A signal that interrupts the wait's poll (EINTR) is no error.
TEST_F(LivenessTest, SignalDuringAWaitIsNoError) {
  struct sigaction sa {};
  sa.sa_handler = NoOp;  // no SA_RESTART: poll returns EINTR
  struct sigaction old {};
  ASSERT_EQ(sigaction(SIGUSR1, &sa, &old), 0);
  Start(300);
  const RequestHandle pull = Pull();
  const pthread_t waiter = pthread_self();
  std::atomic<bool> done{false};
  std::thread signaller([&] {
    for (int i = 0; i < 20 && !done.load(); ++i) {
      pthread_kill(waiter, SIGUSR1);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  const Status st = pull.Wait(500);
  done.store(true);
  signaller.join();
  sigaction(SIGUSR1, &old, nullptr);
  EXPECT_EQ(st.code(), Status::Code::kDeadlineExceeded) << st.ToString();
}

// A shard whose rendezvous entry changes while it waits for a connection
// (Options::server_lookup): the test thread's ROUTERs on 127.0.0.1 play the
// servers, `entry_` is the store (read every 50 ms).
class MovedShardTest : public ::testing::Test {
 protected:
  // The channel starts at `first` (a port nobody serves, or a router's).
  void Start(const std::string& first) {
    entry_ = first;
    ServerLookup::Options lo;
    lo.interval_ms = 50;
    lo.source = "rendezvous test";
    lookup_ = std::make_shared<ServerLookup>(
        std::vector<std::string>{first},
        [this](int) -> StatusOr<std::string> {
          ++reads_;
          return entry_;
        },
        lo);
    RequestChannel::Options o;
    o.servers = {first};
    o.context = &ctx_;
    o.request_timeout_ms = 20000;
    o.liveness_timeout_ms = 3000;
    o.servers_source = "rendezvous test";
    o.server_lookup = lookup_;
    channel_ = std::make_unique<RequestChannel>(o, [](uint64_t, const Status& verdict, Message*) { return verdict; });
    ASSERT_TRUE(channel_->Connect().ok());
  }
  zmq::socket_t Bind(std::string* endpoint) {
    auto router = BindRouter(ctx_, "tcp://127.0.0.1:0", SocketOptions{}, endpoint);
    EXPECT_TRUE(router.ok()) << router.status().ToString();
    return std::move(router).value();
  }
  RequestHandle SendPull() {
    const RequestHandle h = channel_->NewRequest(/*sticky=*/false);
    Message m;
    m.header.set_type(PULL);
    EXPECT_TRUE(channel_->Send(0, &m, &h, PULL_REPLY, 1).ok());
    return h;
  }
  // Receives one message on `router` (5 s at most) and answers it with
  // `type`, stamped with the process start id `incarnation`.
  static MessageHeader Answer(zmq::socket_t& router, MessageType type, uint64_t incarnation) {
    zmq::pollitem_t item = {router.handle(), 0, ZMQ_POLLIN, 0};
    EXPECT_EQ(zmq::poll(&item, 1, std::chrono::milliseconds(5000)), 1);
    Message got;
    std::string peer;
    EXPECT_TRUE(RecvMessage(router, &got, &peer).ok());
    Message reply;
    reply.header.set_type(type);
    reply.header.set_request_id(got.header.request_id());
    reply.header.set_server_incarnation(incarnation);
    if (type == ERROR_REPLY) reply.header.mutable_error_reply()->set_error("HEARTBEAT from unknown worker 0");
    EXPECT_TRUE(SendMessage(router, &reply, &peer, "worker").ok());
    return got.header;
  }

  zmq::context_t ctx_;
  std::string entry_;
  int reads_ = 0;
  std::shared_ptr<ServerLookup> lookup_;
  std::unique_ptr<RequestChannel> channel_;
};

// A stale entry (a dead server's port), then the real server publishes
// another: the request sent before the move (HELLO, at start-up) reaches
// the new endpoint, with its request id, and is answered.
TEST_F(MovedShardTest, NeverConnectedShardFollowsItsEntryAndGetsWhatWasSent) {
  Start("tcp://127.0.0.1:1");
  const RequestHandle pull = SendPull();
  EXPECT_EQ(pull.Wait(300).code(), Status::Code::kDeadlineExceeded);
  EXPECT_EQ(channel_->server(0), "tcp://127.0.0.1:1") << "an unchanged entry moves nothing";
  EXPECT_GE(reads_, 2);
  EXPECT_LE(reads_, 300 / 50 + 2) << "read every 50 ms at most";
  std::string endpoint;
  zmq::socket_t router = Bind(&endpoint);
  entry_ = endpoint;
  EXPECT_EQ(pull.Wait(200).code(), Status::Code::kDeadlineExceeded);  // the move happens meanwhile
  EXPECT_EQ(channel_->server(0), endpoint);
  const MessageHeader got = Answer(router, PULL_REPLY, 0x7a);
  EXPECT_EQ(got.type(), PULL);
  EXPECT_TRUE(pull.Wait(5000).ok());
  const RequestHandle again = SendPull();
  EXPECT_EQ(Answer(router, PULL_REPLY, 0x7a).type(), PULL) << "no copy of the first request was sent twice";
  EXPECT_TRUE(again.Wait(5000).ok());
}

// A shard down mid-job whose server comes back on another port is a new
// process there: it holds none of the job's tables, and is refused as on
// the same port (its answer to the heartbeat carries another start id).
TEST_F(MovedShardTest, ShardDownMidJobMovedToANewProcessIsRefused) {
  std::string first;
  zmq::socket_t old_router = Bind(&first);
  Start(first);
  const RequestHandle pull = SendPull();
  Answer(old_router, PULL_REPLY, 0x7a);
  EXPECT_TRUE(pull.Wait(5000).ok());
  old_router.close();  // the server dies with nothing in flight
  std::string second;
  zmq::socket_t new_router = Bind(&second);
  entry_ = second;
  std::thread new_process([&new_router] { EXPECT_EQ(Answer(new_router, ERROR_REPLY, 0x9b).type(), HEARTBEAT); });
  const Status st = channel_->Idle(5000);
  new_process.join();
  EXPECT_EQ(channel_->server(0), second);
  EXPECT_EQ(st.code(), Status::Code::kUnavailable) << st.ToString();
  EXPECT_NE(st.message().find("server shard 0 at " + second +
                              " restarted (new process, start id 000000000000009b; this worker joined "
                              "000000000000007a) and holds none of the job's tables"),
            std::string::npos)
      << st.message();
}

// What a reply handler sees of 16-bit replies: widened to float32 by
// default; with widen_pull_replies off a PULL_REPLY comes in its wire
// encoding (the handler widens it where it goes) and a PUSH_REPLY is still
// widened.
TEST(ChannelWideningTest, PullRepliesStayInTheirEncodingOnlyWhenAsked) {
  for (const bool widen : {true, false}) {
    zmq::context_t ctx;
    std::string endpoint, peer;
    auto router = BindRouter(ctx, "inproc://request-channel-widening", SocketOptions{}, &endpoint);
    ASSERT_TRUE(router.ok()) << router.status().ToString();
    RequestChannel::Options o;
    o.servers = {endpoint};
    o.context = &ctx;
    o.request_timeout_ms = 2000;
    o.widen_pull_replies = widen;
    std::vector<std::pair<WireEncoding, uint64_t>> seen;  // per reply: encoding, values frame bytes
    RequestChannel channel(o, [&seen](uint64_t, const Status& verdict, Message* reply) {
      seen.emplace_back(reply->header.value_encoding(), reply->values.size());
      return verdict;
    });
    ASSERT_TRUE(channel.Connect().ok());
    const RequestHandle request = channel.NewRequest(/*sticky=*/false);
    for (const MessageType type : {PULL, PUSH}) {
      Message m;
      m.header.set_type(type);
      ASSERT_TRUE(channel.Send(0, &m, &request, type == PULL ? PULL_REPLY : PUSH_REPLY, 1).ok());
      Message got;
      zmq::pollitem_t item = {router->handle(), 0, ZMQ_POLLIN, 0};
      ASSERT_EQ(zmq::poll(&item, 1, std::chrono::milliseconds(2000)), 1);
      ASSERT_TRUE(RecvMessage(*router, &got, &peer).ok());
      Message r;
      r.header.set_type(type == PULL ? PULL_REPLY : PUSH_REPLY);
      r.header.set_request_id(got.header.request_id());
      r.header.set_num_values(40);
      r.header.set_value_encoding(BF16);
      const std::vector<uint16_t> half(40, 0x3f80);  // bf16 1.0
      r.values = zmq::message_t(half.data(), half.size() * sizeof(uint16_t));
      ASSERT_TRUE(SendMessage(*router, &r, &peer, "worker").ok());
    }
    ASSERT_TRUE(request.Wait().ok());
    ASSERT_EQ(seen.size(), 2u);
    EXPECT_EQ(seen[0].first, widen ? FP32 : BF16) << "pull reply, widen " << widen;
    EXPECT_EQ(seen[0].second, widen ? 160u : 80u);
    EXPECT_EQ(seen[1].first, FP32) << "push reply, widen " << widen;
    EXPECT_EQ(seen[1].second, 160u);
  }
}

}  // namespace
}  // namespace tether
