// WireBytes (worker/client/wire_bytes.h): bytes per table and direction as
// the frames are, their float32 size beside them, and the ratio.
#include "worker/client/wire_bytes.h"

#include <gtest/gtest.h>

namespace tether {
namespace {

Message Frames(MessageType type, uint32_t table, size_t key_bytes, size_t value_bytes, WireEncoding e) {
  Message m;
  m.header.set_type(type);
  m.header.set_table_id(table);
  if (e != FP32) m.header.set_value_encoding(e);
  m.keys = zmq::message_t(key_bytes);
  m.values = zmq::message_t(value_bytes);
  return m;
}

TEST(WireBytesTest, CountsPerTableAndDirection) {
  WireBytes w;
  w.CountSent(Frames(PULL, 1, 800, 0, FP32));
  w.CountSent(Frames(PUSH, 1, 800, 400, BF16));          // 200 values
  w.CountReceived(Frames(PULL_REPLY, 1, 0, 400, BF16));  // 200 values
  w.CountReceived(Frames(PUSH_REPLY, 0, 0, 40, FP32));
  w.CountSent(Frames(CLOCK, 0, 0, 0, FP32));             // not a table's
  w.CountReceived(Frames(HELLO_REPLY, 3, 0, 0, FP32));
  ASSERT_EQ(w.tables().size(), 2u);
  const TableWireBytes& t1 = w.tables()[1];
  EXPECT_EQ(t1.sent.messages, 2u);
  EXPECT_EQ(t1.sent.bytes, 2000u);
  EXPECT_EQ(t1.sent.value_bytes, 400u);
  EXPECT_EQ(t1.sent.fp32_value_bytes, 800u);
  EXPECT_DOUBLE_EQ(t1.sent.ratio(), 2400.0 / 2000.0);
  EXPECT_EQ(t1.received.bytes, 400u);
  EXPECT_DOUBLE_EQ(t1.received.ratio(), 2.0);
  const TableWireBytes& t0 = w.tables()[0];
  EXPECT_EQ(t0.sent.messages, 0u);
  EXPECT_DOUBLE_EQ(t0.sent.ratio(), 1.0);
  EXPECT_EQ(t0.received.bytes, 40u);
  EXPECT_DOUBLE_EQ(t0.received.ratio(), 1.0);
  EXPECT_EQ(w.received_saturated(), 0u);
}

TEST(WireBytesTest, CountsTheValuesTheShardsSaturated) {
  WireBytes w;
  Message pulled = Frames(PULL_REPLY, 1, 0, 400, FP16);
  pulled.header.set_values_saturated(3);
  w.CountReceived(pulled);
  Message pushed = Frames(PUSH_REPLY, 0, 0, 40, FP16);
  pushed.header.set_values_saturated(2);
  w.CountReceived(pushed);
  w.CountReceived(Frames(PULL_REPLY, 1, 0, 400, FP16));  // none saturated
  Message sent = Frames(PUSH, 1, 800, 400, FP16);
  sent.header.set_values_saturated(7);  // a push's are the encoder's to count
  w.CountSent(sent);
  ASSERT_EQ(w.tables().size(), 2u);
  EXPECT_EQ(w.tables()[1].received_saturated, 3u);
  EXPECT_EQ(w.tables()[0].received_saturated, 2u);
  EXPECT_EQ(w.received_saturated(), 5u);
}

}  // namespace
}  // namespace tether
