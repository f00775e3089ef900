// ShardOutbox with a reply cache (server/reply_cache.h): every reply is
// recorded as the shard's room made it, before the outbox stamps it, both
// when it is sent and when the outbox is muted (a copy replaying its
// primary's inputs); a reply sent again from the cache is stamped as any
// reply is and not recorded twice. Over an inproc ROUTER/DEALER pair.
#include "server/shard_outbox.h"

#include <glog/logging.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>

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
