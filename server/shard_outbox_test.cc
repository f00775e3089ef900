// ShardOutbox with a reply cache (server/reply_cache.h): every reply is
// recorded as the shard's room made it, before the outbox stamps it, both
// when it is sent and when the outbox is muted (a copy replaying its
// primary's inputs); a reply sent again from the cache is stamped as any
// reply is and not recorded twice. Over an inproc ROUTER/DEALER pair. A
// large pull reply written while it is sent goes in chunks over tcp://
// only, and is written at once wherever it is not sent so.
#include "server/shard_outbox.h"

#include <glog/logging.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "core/net/reply_joiner.h"
#include "core/wire_limits.h"

namespace tether {
namespace {

constexpr uint64_t kIncarnation = 0x5eed;

// Receives one message on `socket` within 5 s (false: none came).
bool RecvWithin(zmq::socket_t& socket, Message* m) {
  zmq::pollitem_t item{socket.handle(), 0, ZMQ_POLLIN, 0};
  if (zmq::poll(&item, 1, std::chrono::milliseconds(5000)) <= 0) return false;
  return RecvMessage(socket, m, nullptr).ok();
}

MessageHeader Push(uint64_t id) {
  MessageHeader h;
  h.set_type(PUSH);
  h.set_request_id(id);
  h.set_sender_rank(0);
  return h;
}

Message PushReply(uint64_t id) {
  Message m;
  m.header.set_type(PUSH_REPLY);
  m.header.set_request_id(id);
  m.header.set_min_clock(3);
  return m;
}

TEST(ShardOutboxTest, RepliesAreRecordedUnstampedAndSentAgainStamped) {
  zmq::context_t ctx;
  zmq::socket_t router(ctx, zmq::socket_type::router);
  zmq::socket_t dealer(ctx, zmq::socket_type::dealer);
  router.set(zmq::sockopt::linger, 0);
  dealer.set(zmq::sockopt::linger, 0);
  dealer.set(zmq::sockopt::routing_id, "w0");
  router.bind("inproc://shard-outbox-test");
  dealer.connect("inproc://shard-outbox-test");
  Message hello = PushReply(1);  // any message: the router learns the route
  ASSERT_TRUE(SendMessage(dealer, &hello, nullptr, "server 0").ok());
  {
    zmq::pollitem_t item{router.handle(), 0, ZMQ_POLLIN, 0};
    ASSERT_GT(zmq::poll(&item, 1, std::chrono::milliseconds(5000)), 0);
    Message got;
    std::string identity;
    ASSERT_TRUE(RecvMessage(router, &got, &identity).ok());
    ASSERT_EQ(identity, "w0");
  }

  std::atomic<bool> stopping{true};
  ServerStats stats;
  ShardOutbox outbox("[server 0] ", kIncarnation, &stopping, &stats);
  ReplyCache cache;
  outbox.set_reply_cache(&cache);
  outbox.set_socket(&router);
  Message unused;
  int rank = -1;
  ASSERT_EQ(cache.Take("w0", Push(7), &unused, &rank), ReplyCache::Verdict::kHandle);
  Message reply = PushReply(7);
  outbox.Send("w0", &reply, 0);
  Message got;
  ASSERT_TRUE(RecvWithin(dealer, &got));
  EXPECT_EQ(got.header.server_incarnation(), kIncarnation);
  EXPECT_TRUE(got.header.server_stopping());

  // The cache holds the reply as the room made it.
  ASSERT_EQ(cache.Kept("w0").size(), 1u);
  MessageHeader kept;
  ASSERT_TRUE(kept.ParseFromString(cache.Kept("w0")[0].reply));
  EXPECT_EQ(kept.type(), PUSH_REPLY);
  EXPECT_FALSE(kept.has_server_incarnation());
  EXPECT_FALSE(kept.has_server_stopping());

  // Sent again: stamped, the same reply, and the cache unchanged.
  const std::string before = cache.Kept("w0")[0].reply;
  Message again;
  ASSERT_EQ(cache.Take("w0", Push(7), &again, &rank), ReplyCache::Verdict::kResend);
  outbox.Resend("w0", &again, rank);
  Message got_again;
  ASSERT_TRUE(RecvWithin(dealer, &got_again));
  EXPECT_EQ(got_again.header.request_id(), 7u);
  EXPECT_EQ(got_again.header.min_clock(), 3);
  EXPECT_EQ(got_again.header.server_incarnation(), kIncarnation);
  EXPECT_EQ(cache.Kept("w0")[0].reply, before);
  EXPECT_EQ(cache.stats().resent, 1u);
}

TEST(ShardOutboxTest, AMutedOutboxRecordsWhatItWouldHaveSent) {
  std::atomic<bool> stopping{false};
  ServerStats stats;
  ShardOutbox outbox("[server 0] ", kIncarnation, &stopping, &stats);
  ReplyCache cache;
  outbox.set_reply_cache(&cache);
  Message unused;
  int rank = -1;
  cache.Take("w0", Push(9), &unused, &rank);
  Message reply = PushReply(9);
  outbox.Send("w0", &reply, 0);
  EXPECT_EQ(outbox.muted(), 1u);
  ASSERT_EQ(cache.Kept("w0").size(), 1u);
  EXPECT_TRUE(cache.Kept("w0")[0].has_reply);
  Message again;
  ASSERT_EQ(cache.Take("w0", Push(9), &again, &rank), ReplyCache::Verdict::kResend);
  outbox.Resend("w0", &again, rank);
  EXPECT_EQ(outbox.muted(), 2u);
  EXPECT_EQ(cache.num_replies(), 1u);
}

// Counts the ERROR lines that say a reply was lost.
class LostReplyLines : public google::LogSink {
 public:
  void send(google::LogSeverity severity, const char*, const char*, int, const google::LogMessageTime&,
            const char* message, size_t length) override {
    if (severity == google::GLOG_ERROR && std::string(message, length).find(" lost: ") != std::string::npos) {
      std::lock_guard<std::mutex> lock(mu_);
      ++lines_;
    }
  }
  int lines() {
    std::lock_guard<std::mutex> lock(mu_);
    return lines_;
  }

 private:
  std::mutex mu_;
  int lines_ = 0;
};

// Replies to peers that never said HELLO and are gone (random ZMTP traffic
// to a server port) are logged for the first 10, then every 1,000th: 2,500
// lost replies give 12 lines, and every one is counted.
TEST(ShardOutboxTest, LostRepliesToUnregisteredPeersAreRateLimited) {
  zmq::context_t ctx;
  zmq::socket_t router(ctx, zmq::socket_type::router);
  router.set(zmq::sockopt::linger, 0);
  router.set(zmq::sockopt::router_mandatory, 1);  // as the shard's: an unknown peer is EHOSTUNREACH
  router.bind("inproc://shard-outbox-lost-test");
  std::atomic<bool> stopping{false};
  ServerStats stats;
  ShardOutbox outbox("[server 0] ", kIncarnation, &stopping, &stats);
  outbox.set_socket(&router);
  LostReplyLines sink;
  google::AddLogSink(&sink);
  for (int i = 0; i < 2500; ++i) {
    Message reply;
    reply.header.set_type(ERROR_REPLY);
    outbox.Send("gone-" + std::to_string(i), &reply, -1);
  }
  Message to_worker;
  to_worker.header.set_type(PUSH_REPLY);
  outbox.Send("gone-worker", &to_worker, 3);  // a worker's lost reply is always logged
  google::RemoveLogSink(&sink);
  EXPECT_EQ(outbox.lost_unregistered(), 2500u);
  EXPECT_EQ(stats.send_failures, 2501u);
  EXPECT_EQ(sink.lines(), 10 + 2 + 1);
}

}  // namespace
}  // namespace tether

namespace tether {
namespace {

// A PULL_REPLY of `floats` values, zeros, whose values `write` fills with
// 0.5·i, recording each end it is asked for.
Message PullReplyWrittenLater(uint64_t id, uint64_t floats, std::vector<size_t>* ends) {
  Message m;
  m.header.set_type(PULL_REPLY);
  m.header.set_request_id(id);
  m.header.set_num_values(floats);
  m.values.rebuild(floats * sizeof(float));
  std::memset(m.values.data(), 0, m.values.size());
  auto* v = static_cast<float*>(m.values.data());
  m.write_values = [v, ends, written = size_t{0}](size_t end) mutable {
    ends->push_back(end);
    for (; written < end / sizeof(float); ++written) v[written] = 0.5f * static_cast<float>(written);
  };
  return m;
}

bool WrittenAsExpected(const Message& m, uint64_t floats) {
  if (m.values.size() != floats * sizeof(float)) return false;
  const auto* v = static_cast<const float*>(m.values.data());
  for (uint64_t i = 0; i < floats; ++i)
    if (v[i] != 0.5f * static_cast<float>(i)) return false;
  return true;
}

// Over tcp:// a large reply whose values are written while it is sent goes
// in chunks, each written just before it is queued, and joins on the
// worker's side equal to what was written; inproc://, a muted outbox and a
// replicated shard's (its reply cache) write it at once and say so.
TEST(ShardOutboxTest, LargeRepliesAreWrittenChunkByChunkOnlyOverAWire) {
  zmq::context_t ctx;
  zmq::socket_t router(ctx, zmq::socket_type::router);
  zmq::socket_t dealer(ctx, zmq::socket_type::dealer);
  router.set(zmq::sockopt::linger, 0);
  dealer.set(zmq::sockopt::linger, 0);
  dealer.set(zmq::sockopt::routing_id, "w0");
  router.bind("tcp://127.0.0.1:0");
  dealer.connect(router.get(zmq::sockopt::last_endpoint));
  Message hello = PushReply(1);
  ASSERT_TRUE(SendMessage(dealer, &hello, nullptr, "server 0").ok());
  {
    zmq::pollitem_t item{router.handle(), 0, ZMQ_POLLIN, 0};
    ASSERT_GT(zmq::poll(&item, 1, std::chrono::milliseconds(5000)), 0);
    Message got;
    std::string identity;
    ASSERT_TRUE(RecvMessage(router, &got, &identity).ok());
  }
  std::atomic<bool> stopping{false};
  ServerStats stats;
  ShardOutbox outbox("[server 0] ", kIncarnation, &stopping, &stats);
  EXPECT_FALSE(outbox.WritesValuesWhileSending(kReplyChunkBytes));  // muted
  outbox.set_socket(&router);
  EXPECT_TRUE(outbox.WritesValuesWhileSending(kReplyChunkBytes + 1));
  EXPECT_FALSE(outbox.WritesValuesWhileSending(kReplyChunkBytes));

  const uint64_t floats = 3 * kReplyChunkBytes / sizeof(float) + 5;
  std::vector<size_t> ends;
  Message reply = PullReplyWrittenLater(2, floats, &ends);
  zmq::message_t keep;
  keep.copy(reply.values);
  outbox.Send("w0", &reply, 0);
  const size_t bytes = floats * sizeof(float);
  EXPECT_EQ(ends, (std::vector<size_t>{kReplyChunkBytes, 2 * kReplyChunkBytes, 3 * kReplyChunkBytes, bytes, bytes}));
  ReplyJoiner joiner("server 0");
  Message got;
  zmq::pollitem_t item{dealer.handle(), 0, ZMQ_POLLIN, 0};
  Status st = Status::Unavailable("");
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (st.code() == Status::Code::kUnavailable && std::chrono::steady_clock::now() < until) {
    (void)zmq::poll(&item, 1, std::chrono::milliseconds(100));
    st = joiner.Recv(dealer, &got);
  }
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(got.header.request_id(), 2u);
  EXPECT_EQ(got.header.server_incarnation(), kIncarnation);
  EXPECT_TRUE(WrittenAsExpected(got, floats));
  EXPECT_EQ(stats.bytes_out, bytes);

  // Muted: written whole before Send returns.
  outbox.set_socket(nullptr);
  ends.clear();
  Message muted = PullReplyWrittenLater(3, floats, &ends);
  outbox.Send("w0", &muted, 0);
  EXPECT_EQ(ends, (std::vector<size_t>{bytes}));

  // A replicated shard's outbox records the reply: written before it is.
  ReplyCache cache;
  outbox.set_reply_cache(&cache);
  outbox.set_socket(&router);
  EXPECT_FALSE(outbox.WritesValuesWhileSending(bytes));
  Message unused;
  int rank = -1;
  // A push's reply is kept (a read's is not): one with values written later.
  ASSERT_EQ(cache.Take("w0", Push(4), &unused, &rank), ReplyCache::Verdict::kHandle);
  ends.clear();
  Message recorded = PullReplyWrittenLater(4, floats, &ends);
  outbox.Send("w0", &recorded, 0);
  EXPECT_EQ(ends.front(), bytes);
  ASSERT_EQ(cache.Kept("w0").size(), 1u);
  EXPECT_NE(cache.Kept("w0")[0].reply.find(std::string(reinterpret_cast<const char*>(keep.data()) + 4, 64)),
            std::string::npos);  // the written values, not zeros

  // inproc://: nothing to overlap.
  zmq::socket_t local(ctx, zmq::socket_type::router);
  local.set(zmq::sockopt::linger, 0);
  local.bind("inproc://shard-outbox-chunks");
  ShardOutbox inproc("[server 0] ", kIncarnation, &stopping, &stats);
  inproc.set_socket(&local);
  EXPECT_FALSE(inproc.WritesValuesWhileSending(bytes));
}

}  // namespace
}  // namespace tether
