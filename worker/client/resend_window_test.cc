// ResendWindow (worker/client/resend_window.h): what a reply acknowledges,
// and that the copies kept are the bytes sent.
#include "worker/client/resend_window.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace tether {
namespace {

Message Stamped(MessageType type, uint64_t request_id, const std::string& values) {
  Message m;
  m.header.set_type(type);
  m.header.set_request_id(request_id);
  m.values = zmq::message_t(values.data(), values.size());
  return m;
}

std::vector<uint64_t> Ids(ResendWindow& w) {
  std::vector<uint64_t> ids;
  for (const Message& m : w.messages()) ids.push_back(m.header.request_id());
  return ids;
}

TEST(ResendWindowTest, AReplyAcknowledgesItsIdAndEveryEarlierOne) {
  // Ids as RequestChannel makes them: sequence << 32 | slot (a CLOCK has
  // no slot).
  auto id = [](uint64_t seq, uint64_t slot) { return (seq << 32) | slot; };
  ResendWindow w;
  const std::vector<uint64_t> sent = {id(1, 5), id(2, 0), id(3, 0), id(4, 2), id(5, 1)};
  for (uint64_t i : sent) {
    Message m = Stamped(i == id(3, 0) ? CLOCK : PUSH, i, "v");
    w.Keep(&m);
  }
  EXPECT_EQ(w.size(), 5u);
  EXPECT_EQ(w.Ack(id(2, 0)), 2u) << "the reply's own id and the one before it";
  EXPECT_EQ(Ids(w), (std::vector<uint64_t>{id(3, 0), id(4, 2), id(5, 1)}));
  // A reply to the 4th acknowledges the reply-less CLOCK before it too.
  EXPECT_EQ(w.Ack(id(4, 2)), 2u);
  EXPECT_EQ(Ids(w), (std::vector<uint64_t>{id(5, 1)}));
  EXPECT_EQ(w.Ack(id(3, 7)), 0u) << "an older reply (a deferred one answered late) acknowledges nothing more";
  EXPECT_EQ(w.Ack(id(9, 0)), 1u);
  EXPECT_TRUE(w.empty());
}

TEST(ResendWindowTest, CopiesKeepTheSentBytesAndTheMessageIsUntouched) {
  ResendWindow w;
  const std::string big(4096, 'x');
  Message m = Stamped(PUSH, 7, big);
  m.keys = zmq::message_t(std::string(16, 'k').data(), 16);
  w.Keep(&m);
  EXPECT_EQ(m.values.size(), big.size()) << "the message to send still holds its frames";
  ASSERT_EQ(w.size(), 1u);
  Message& kept = w.messages().front();
  EXPECT_EQ(kept.header.SerializeAsString(), m.header.SerializeAsString());
  EXPECT_EQ(kept.values.to_string(), big);
  EXPECT_EQ(kept.keys.to_string(), std::string(16, 'k'));
  EXPECT_EQ(kept.values.data(), m.values.data()) << "a large frame is shared, not copied";
  Message again = SharedCopy(&kept);
  EXPECT_EQ(again.values.to_string(), big);
  EXPECT_EQ(w.messages().front().values.size(), big.size()) << "sending a copy leaves the kept one whole";
}

TEST(ResendWindowTest, AFailedSendIsForgotten) {
  ResendWindow w;
  Message a = Stamped(PULL, 1, ""), b = Stamped(PULL, 2, "");
  w.Keep(&a);
  w.Keep(&b);
  w.DropNewest();
  EXPECT_EQ(Ids(w), (std::vector<uint64_t>{1}));
  w.Clear();
  EXPECT_TRUE(w.empty());
  w.DropNewest();  // nothing kept: nothing to forget
  EXPECT_TRUE(w.empty());
}

}  // namespace
}  // namespace tether
