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

TEST(ResendWindowTest, AReplyAcknowledgesItsRequestAndEarlierMessagesOwedNone) {
  // Ids as RequestChannel makes them: sequence << 32 | slot (a CLOCK has
  // no slot and is owed no reply).
  auto id = [](uint64_t seq, uint64_t slot) { return (seq << 32) | slot; };
  ResendWindow w;
  const std::vector<uint64_t> sent = {id(1, 5), id(2, 0), id(3, 0), id(4, 2), id(5, 1)};
  for (uint64_t i : sent) {
    const bool clock = i == id(2, 0) || i == id(3, 0);
    Message m = Stamped(clock ? CLOCK : PUSH, i, "v");
    w.Keep(&m, /*owed_reply=*/!clock);
  }
  EXPECT_EQ(w.size(), 5u);
  // The reply to the 4th: it and the two CLOCKs before it are committed;
  // the 1st (a pull deferred on the bound, say) still waits for its own.
  EXPECT_EQ(w.Ack(id(4, 2)), 3u);
  EXPECT_EQ(Ids(w), (std::vector<uint64_t>{id(1, 5), id(5, 1)}));
  EXPECT_EQ(w.Ack(id(1, 5)), 1u) << "the deferred one answered late";
  EXPECT_EQ(Ids(w), (std::vector<uint64_t>{id(5, 1)}));
  EXPECT_EQ(w.Ack(id(3, 7)), 0u) << "a reply to nothing kept forgets nothing";
  EXPECT_EQ(w.Ack(id(5, 1)), 1u);
  EXPECT_TRUE(w.empty());
}

TEST(ResendWindowTest, CopiesKeepTheSentBytesAndTheMessageIsUntouched) {
  ResendWindow w;
  const std::string big(4096, 'x');
  Message m = Stamped(PUSH, 7, big);
  m.keys = zmq::message_t(std::string(16, 'k').data(), 16);
  w.Keep(&m, true);
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
  w.Keep(&a, true);
  w.Keep(&b, true);
  w.DropNewest();
  EXPECT_EQ(Ids(w), (std::vector<uint64_t>{1}));
  w.Clear();
  EXPECT_TRUE(w.empty());
  w.DropNewest();  // nothing kept: nothing to forget
  EXPECT_TRUE(w.empty());
}

}  // namespace
}  // namespace tether
