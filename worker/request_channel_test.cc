// RequestChannel against a raw ROUTER socket in the test thread (inproc, one
// ZeroMQ context): the test reads each request and answers as it likes.
#include "worker/request_channel.h"

#include <gtest/gtest.h>

#include <string>
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
    m.header.set_error(error);
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

TEST_F(ChannelTest, WaitWithATimeoutLeavesTheRequestOutstanding) {
  const RequestHandle a = channel_->NewRequest(false);
  SendPull(a, 1);
  const MessageHeader h = Receive();
  EXPECT_EQ(a.Wait(20).code(), Status::Code::kDeadlineExceeded);
  EXPECT_EQ(channel_->in_flight(), 1u);
  Reply(h.request_id(), PULL_REPLY);
  EXPECT_TRUE(a.Wait(2000).ok());
}

}  // namespace
}  // namespace tether
