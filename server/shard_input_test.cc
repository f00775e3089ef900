// ShardInput's bytes: a round trip keeps every frame and header field, and
// bytes from a peer that are cut short, too long, of another version or
// with frames that disagree with their header are refused with the field.
#include "server/shard_input.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

namespace tether {
namespace {

Message Push(uint64_t n, uint32_t seed) {
  Message m;
  m.header.set_type(PUSH);
  m.header.set_sender_rank(3);
  m.header.set_table_id(1);
  m.header.set_request_id(77);
  m.header.set_clock(12);
  m.header.set_num_keys(n);
  m.header.set_num_values(n * 2);
  std::mt19937 rng(seed);
  std::vector<uint64_t> keys(n);
  std::vector<float> values(n * 2);
  for (uint64_t i = 0; i < n; ++i) keys[i] = i * 5 + 1;
  for (float& v : values) v = std::uniform_real_distribution<float>(-1, 1)(rng);
  m.keys.rebuild(keys.data(), keys.size() * 8);
  m.values.rebuild(values.data(), values.size() * 4);
  return m;
}

TEST(ShardInputTest, RoundTripKeepsEveryByte) {
  const Message m = Push(1000, 1);
  const std::string identity("\0\x80\x01\x02\x03", 5);
  const std::string bytes = EncodeShardInput(identity, m);
  EXPECT_EQ(bytes.size(), 1 + 4 + 5 + 4 + m.header.ByteSizeLong() + 8 + 8000 + 8 + 8000);
  ShardInput in;
  ASSERT_TRUE(DecodeShardInput(bytes, "server 1", &in).ok());
  EXPECT_EQ(in.identity, identity);
  EXPECT_EQ(in.message.header.SerializeAsString(), m.header.SerializeAsString());
  ASSERT_EQ(in.message.keys.size(), m.keys.size());
  ASSERT_EQ(in.message.values.size(), m.values.size());
  EXPECT_EQ(std::memcmp(in.message.keys.data(), m.keys.data(), m.keys.size()), 0);
  EXPECT_EQ(std::memcmp(in.message.values.data(), m.values.data(), m.values.size()), 0);
}

TEST(ShardInputTest, EmptyFramesRoundTrip) {
  Message m;
  m.header.set_type(CLOCK);
  m.header.set_sender_rank(0);
  m.header.set_clock(4);
  ShardInput in;
  ASSERT_TRUE(DecodeShardInput(EncodeShardInput("id", m), "server 1", &in).ok());
  EXPECT_EQ(in.message.header.clock(), 4);
  EXPECT_EQ(in.message.keys.size(), 0u);
}

TEST(ShardInputTest, EveryTruncationIsRefusedNamingTheField) {
  const std::string bytes = EncodeShardInput("worker-a", Push(3, 2));
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    ShardInput in;
    Status st = DecodeShardInput(std::string_view(bytes).substr(0, cut), "server 2", &in);
    ASSERT_FALSE(st.ok()) << "cut at " << cut;
    EXPECT_EQ(st.code(), Status::Code::kDataLoss);
    EXPECT_NE(st.message().find("shard input from server 2"), std::string::npos) << st.message();
  }
}

TEST(ShardInputTest, BadVersionTrailingBytesAndLengthsAreRefused) {
  const std::string good = EncodeShardInput("w", Push(2, 3));
  std::string v = good;
  v[0] = 2;
  ShardInput in;
  EXPECT_NE(DecodeShardInput(v, "p", &in).message().find("version 2"), std::string::npos);
  EXPECT_NE(DecodeShardInput(good + "x", "p", &in).message().find("1 bytes after the values frame"),
            std::string::npos);
  // An identity length past ZeroMQ's 255 bytes.
  std::string long_id = good;
  const uint32_t big = 4096;
  std::memcpy(&long_id[1], &big, 4);
  EXPECT_NE(DecodeShardInput(long_id, "p", &in).message().find("identity of 4096 bytes is over the limit"),
            std::string::npos);
}

TEST(ShardInputTest, FramesThatDisagreeWithTheHeaderAreRefused) {
  Message m = Push(4, 4);
  m.header.set_num_keys(5);  // the keys frame holds 4
  ShardInput in;
  Status st = DecodeShardInput(EncodeShardInput("w", m), "server 0", &in);
  EXPECT_EQ(st.code(), Status::Code::kDataLoss);
  EXPECT_NE(st.message().find("shard input from server 0"), std::string::npos) << st.message();
}

TEST(ShardInputTest, RandomBytesNeverDecodeWrongly) {
  std::mt19937 rng(5);
  const std::string good = EncodeShardInput("w", Push(8, 6));
  int refused = 0;
  for (int i = 0; i < 2000; ++i) {
    std::string b = good;
    b[rng() % b.size()] = static_cast<char>(rng());
    ShardInput in;
    if (!DecodeShardInput(b, "p", &in).ok()) ++refused;
  }
  // A flipped byte in the values (or a header field that still parses)
  // decodes; one in the lengths never reads past the bytes.
  EXPECT_GT(refused, 0);
}

}  // namespace
}  // namespace tether
