// A worker's side of a shard's chunked replies: a reply sent in chunks
// (SendMessageInChunks, over real TCP) arrives byte for byte equal to the
// same reply sent whole, at sizes around the chunk boundary; streams cut at
// any byte (header and keys spanning chunks) join the same, or land in a
// placer's buffer byte for byte (float32 pull replies only); malformed
// streams are DataLoss naming the server, and the joiner takes the next
// reply after them. Every wait polls with a bound.
#include "core/net/reply_joiner.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/net/chunk_wire.h"
#include "core/net/transport.h"
#include "core/wire_limits.h"
#include "tests/testing/poll.h"

namespace tether {
namespace {

using testing::PollUntil;

Message Reply(uint64_t request_id, uint64_t keys, uint64_t floats, float seed) {
  Message m;
  m.header.set_type(PULL_REPLY);
  m.header.set_request_id(request_id);
  m.header.set_table_id(3);
  m.header.set_num_keys(keys);
  m.header.set_num_values(floats);
  m.keys.rebuild(keys * sizeof(uint64_t));
  for (uint64_t i = 0; i < keys; ++i) {
    const uint64_t k = 1000 + 7 * i;
    std::memcpy(static_cast<char*>(m.keys.data()) + i * sizeof(uint64_t), &k, sizeof k);
  }
  m.values.rebuild(floats * sizeof(float));
  auto* v = static_cast<float*>(m.values.data());
  for (uint64_t i = 0; i < floats; ++i) v[i] = seed + 0.25f * static_cast<float>(i);
  return m;
}

std::string Bytes(const zmq::message_t& f) { return std::string(static_cast<const char*>(f.data()), f.size()); }

void ExpectSame(const Message& got, const Message& want) {
  EXPECT_EQ(got.header.SerializeAsString(), want.header.SerializeAsString());
  EXPECT_EQ(Bytes(got.keys), Bytes(want.keys));
  EXPECT_EQ(Bytes(got.values), Bytes(want.values));
}

// The stream header | keys | values of `m` as chunk messages whose
// payloads are cut at the given sizes (the last takes the rest).
std::vector<std::vector<zmq::message_t>> Chunks(const Message& m, const std::vector<size_t>& cuts) {
  const std::string header = m.header.SerializeAsString();
  const std::string stream = header + Bytes(m.keys) + Bytes(m.values);
  const std::string lead = ChunkLeadTag(header.size(), m.keys.size(), m.values.size());
  std::vector<std::vector<zmq::message_t>> out;
  size_t at = 0;
  for (size_t i = 0; i <= cuts.size(); ++i) {
    const size_t n = i < cuts.size() ? cuts[i] : stream.size() - at;
    std::vector<zmq::message_t> f;
    f.emplace_back(i == 0 ? lead.data() : kChunkContinueTag, i == 0 ? lead.size() : kChunkTagBytes);
    f.emplace_back(stream.data() + at, n);
    out.push_back(std::move(f));
    at += n;
  }
  return out;
}

// Feeds `chunks` to `j`; the status of the last Take and whether it completed.
Status Feed(ReplyJoiner* j, std::vector<std::vector<zmq::message_t>>* chunks, Message* m, bool* complete) {
  Status st;
  for (auto& c : *chunks) {
    st = j->Take(&c, m, complete);
    if (*complete || !st.ok()) return st;
  }
  return st;
}

TEST(ReplyJoinerTest, StreamsCutAnywhereJoinToTheWholeReply) {
  const Message want = Reply(9, 3, 50, 1.5f);
  const size_t header = want.header.SerializeAsString().size();
  // Header split, header and keys in one chunk, keys split, one byte at a
  // time across the boundaries, one chunk for everything.
  const std::vector<std::vector<size_t>> cuts = {
      {}, {header / 2}, {header + 5}, {header, 24, 1, 100}, {1, 1, 1, header - 3 + 24 - 1, 1}};
  FramePool pool;
  for (const bool place : {false, true}) {
    for (const auto& c : cuts) {
      // Placed: the values land in `dest`, a buffer of the caller's.
      std::vector<char> dest(want.values.size() + 1, '\x7f');
      int asked = 0;
      ReplyJoiner::Placer placer = [&](const MessageHeader& h, uint64_t bytes) -> char* {
        ++asked;
        EXPECT_EQ(h.request_id(), 9u);
        EXPECT_EQ(bytes, want.values.size());
        return dest.data();
      };
      ReplyJoiner j("server tcp://s:1", kMaxFrameBytes, &pool, place ? placer : nullptr);
      auto chunks = Chunks(want, c);
      Message got;
      bool complete = false;
      const Status st = Feed(&j, &chunks, &got, &complete);
      ASSERT_TRUE(st.ok()) << st.message();
      ASSERT_TRUE(complete);
      EXPECT_EQ(got.values_size(), want.values.size());
      EXPECT_FALSE(j.partial());
      if (!place) {
        ExpectSame(got, want);
        continue;
      }
      EXPECT_EQ(asked, 1);
      EXPECT_EQ(got.placed_values_bytes, want.values.size());
      EXPECT_EQ(got.values.size(), 0u);
      EXPECT_EQ(got.header.SerializeAsString(), want.header.SerializeAsString());
      EXPECT_EQ(Bytes(got.keys), Bytes(want.keys));
      EXPECT_EQ(std::string(dest.data(), want.values.size()), Bytes(want.values));
      EXPECT_EQ(dest.back(), '\x7f') << "wrote past the values";
    }
  }
}

// A placer that declines (null) has the reply joined as without one; one
// is not asked for a reply that is not a float32 PULL_REPLY; a message
// decoded whole after a placed one carries no placed bytes.
TEST(ReplyJoinerTest, PlacementOnlyForFloat32PullReplies) {
  FramePool pool;
  int asked = 0;
  std::vector<char> dest(4096);
  ReplyJoiner declines("server tcp://s:1", kMaxFrameBytes, &pool, [&](const MessageHeader&, uint64_t) -> char* {
    ++asked;
    return nullptr;
  });
  const Message want = Reply(9, 2, 200, 0.5f);
  auto chunks = Chunks(want, {10, 300});
  Message got;
  bool complete = false;
  ASSERT_TRUE(Feed(&declines, &chunks, &got, &complete).ok());
  ASSERT_TRUE(complete);
  EXPECT_EQ(asked, 1);
  EXPECT_EQ(got.placed_values_bytes, 0u);
  ExpectSame(got, want);

  asked = 0;
  ReplyJoiner places("server tcp://s:1", kMaxFrameBytes, &pool, [&](const MessageHeader&, uint64_t) -> char* {
    ++asked;
    return dest.data();
  });
  Message push = Reply(10, 2, 200, 1.5f);
  push.header.set_type(PUSH_REPLY);
  auto push_chunks = Chunks(push, {10, 300});
  ASSERT_TRUE(Feed(&places, &push_chunks, &got, &complete).ok());
  ASSERT_TRUE(complete);
  EXPECT_EQ(asked, 0);
  ExpectSame(got, push);

  auto placed_chunks = Chunks(want, {10, 300});
  ASSERT_TRUE(Feed(&places, &placed_chunks, &got, &complete).ok());
  ASSERT_TRUE(complete);
  EXPECT_EQ(asked, 1);
  EXPECT_EQ(got.placed_values_bytes, want.values.size());
  std::vector<zmq::message_t> whole;
  whole.emplace_back(want.header.SerializeAsString());
  whole.emplace_back(Bytes(want.keys));
  whole.emplace_back(Bytes(want.values));
  ASSERT_TRUE(places.Take(&whole, &got, &complete).ok());
  ASSERT_TRUE(complete);
  EXPECT_EQ(got.placed_values_bytes, 0u);
  ExpectSame(got, want);
}

TEST(ReplyJoinerTest, EmptyValuesAndOneValueJoin) {
  for (const uint64_t floats : {uint64_t{0}, uint64_t{1}}) {
    const Message want = Reply(4, 0, floats, -2.0f);
    ReplyJoiner j("server tcp://s:1");
    auto chunks = Chunks(want, {});
    Message got;
    bool complete = false;
    ASSERT_TRUE(Feed(&j, &chunks, &got, &complete).ok());
    ASSERT_TRUE(complete);
    ExpectSame(got, want);
  }
}

TEST(ReplyJoinerTest, PlainMessagesPassThrough) {
  const Message want = Reply(5, 2, 8, 0.5f);
  std::vector<zmq::message_t> frames;
  frames.emplace_back(want.header.SerializeAsString());
  frames.emplace_back(want.keys.data(), want.keys.size());
  frames.emplace_back(want.values.data(), want.values.size());
  ReplyJoiner j("server tcp://s:1");
  Message got;
  bool complete = false;
  ASSERT_TRUE(j.Take(&frames, &got, &complete).ok());
  EXPECT_TRUE(complete);
  ExpectSame(got, want);
}

TEST(ReplyJoinerTest, LeadAboveTheBoundsIsRefusedAndItsChunksDropped) {
  ReplyJoiner j("server tcp://s:1", /*max_frame_bytes=*/1000);
  const Message big = Reply(1, 0, 251, 0.0f);  // 1,004 bytes of values
  auto chunks = Chunks(big, {10, 500});
  Message got;
  bool complete = false;
  Status st = j.Take(&chunks[0], &got, &complete);
  EXPECT_EQ(st.code(), Status::Code::kDataLoss);
  EXPECT_NE(st.message().find("server tcp://s:1"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("1004"), std::string::npos) << st.message();
  EXPECT_FALSE(j.partial());
  EXPECT_TRUE(j.Take(&chunks[1], &got, &complete).ok());  // dropped quietly
  EXPECT_TRUE(j.Take(&chunks[2], &got, &complete).ok());
  EXPECT_FALSE(complete);
  // A header above kMaxHeaderBytes too.
  std::vector<zmq::message_t> f;
  const std::string lead = ChunkLeadTag(kMaxHeaderBytes + 1, 0, 0);
  f.emplace_back(lead.data(), lead.size());
  f.emplace_back(size_t{0});
  EXPECT_EQ(j.Take(&f, &got, &complete).code(), Status::Code::kDataLoss);
  // The next reply joins.
  const Message want = Reply(2, 0, 200, 1.0f);
  chunks = Chunks(want, {30});
  ASSERT_TRUE(Feed(&j, &chunks, &got, &complete).ok());
  ASSERT_TRUE(complete);
  ExpectSame(got, want);
}

TEST(ReplyJoinerTest, ContinueWithoutLeadIsDataLoss) {
  ReplyJoiner j("server tcp://s:1");
  const Message want = Reply(2, 0, 20, 1.0f);
  auto chunks = Chunks(want, {10, 10});
  Message got;
  bool complete = false;
  const Status st = j.Take(&chunks[1], &got, &complete);
  EXPECT_EQ(st.code(), Status::Code::kDataLoss);
  EXPECT_NE(st.message().find("continues no reply"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("server tcp://s:1"), std::string::npos) << st.message();
  EXPECT_TRUE(j.Take(&chunks[2], &got, &complete).ok());  // the same stray stream: dropped
  chunks = Chunks(want, {10, 10});
  ASSERT_TRUE(Feed(&j, &chunks, &got, &complete).ok());
  ASSERT_TRUE(complete);
  ExpectSame(got, want);
}

TEST(ReplyJoinerTest, BadLeadTagIsDataLoss) {
  ReplyJoiner j("server tcp://s:1");
  std::vector<zmq::message_t> f;
  f.emplace_back(std::string("TQCX") + std::string(20, '\0'));
  f.emplace_back(std::string(8, 'x'));
  Message got;
  bool complete = false;
  const Status st = j.Take(&f, &got, &complete);
  EXPECT_EQ(st.code(), Status::Code::kDataLoss);  // two frames, not a chunk: a malformed message
  EXPECT_NE(st.message().find("server tcp://s:1"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("2 frames"), std::string::npos) << st.message();
}

TEST(ReplyJoinerTest, MoreBytesThanAnnouncedIsDataLoss) {
  ReplyJoiner j("server tcp://s:1");
  const Message want = Reply(2, 0, 20, 1.0f);
  auto chunks = Chunks(want, {10});
  std::string longer = Bytes(chunks[1][1]) + "xyz";
  chunks[1][1].rebuild(longer.data(), longer.size());
  Message got;
  bool complete = false;
  const Status st = Feed(&j, &chunks, &got, &complete);
  EXPECT_EQ(st.code(), Status::Code::kDataLoss);
  EXPECT_NE(st.message().find("more than the"), std::string::npos) << st.message();
  EXPECT_FALSE(j.partial());
}

TEST(ReplyJoinerTest, TruncatedStreamThenNewLeadReportsTheCutAndJoinsTheNew) {
  ReplyJoiner j("server tcp://s:1");
  const Message cut = Reply(1, 0, 100, 0.0f);
  auto first = Chunks(cut, {20, 100});
  Message got;
  bool complete = false;
  ASSERT_TRUE(j.Take(&first[0], &got, &complete).ok());
  ASSERT_TRUE(j.Take(&first[1], &got, &complete).ok());
  EXPECT_TRUE(j.partial());
  const Message want = Reply(2, 1, 100, 3.0f);
  auto second = Chunks(want, {40});
  Status st = j.Take(&second[0], &got, &complete);
  EXPECT_EQ(st.code(), Status::Code::kDataLoss);
  EXPECT_NE(st.message().find("ended after 120"), std::string::npos) << st.message();
  EXPECT_FALSE(complete);
  st = j.Take(&second[1], &got, &complete);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_TRUE(complete);
  ExpectSame(got, want);
}

TEST(ReplyJoinerTest, HeaderThatDoesNotParseIsDataLoss) {
  ReplyJoiner j("server tcp://s:1");
  const std::string lead = ChunkLeadTag(4, 0, 0);
  std::vector<zmq::message_t> f;
  f.emplace_back(lead.data(), lead.size());
  f.emplace_back(std::string("\xff\xff\xff\xff", 4));
  Message got;
  bool complete = false;
  const Status st = j.Take(&f, &got, &complete);
  EXPECT_EQ(st.code(), Status::Code::kDataLoss);
  EXPECT_NE(st.message().find("does not parse"), std::string::npos) << st.message();
}

// Over TCP: a shard's ROUTER sends each reply in chunks and whole; the
// worker's DEALER joins the chunked one equal to the whole one, with the
// values written chunk by chunk just before each is queued.
TEST(ReplyJoinerTest, ChunkedRepliesOverTcpEqualWholeOnes) {
  zmq::context_t ctx;
  std::string endpoint;
  auto router = BindRouter(ctx, "tcp://127.0.0.1:0", SocketOptions{}, &endpoint);
  ASSERT_TRUE(router.ok()) << router.status().message();
  auto dealer = ConnectDealer(ctx, endpoint, "worker-a", SocketOptions{});
  ASSERT_TRUE(dealer.ok());
  // The ROUTER learns the identity from a first message.
  Message hello = Reply(0, 0, 0, 0.0f);
  ASSERT_TRUE(SendMessage(*dealer, &hello, nullptr, "server").ok());
  Message in;
  std::string id;
  ASSERT_TRUE(PollUntil(5000, [&] { return RecvMessage(*router, &in, &id).ok(); }));
  ASSERT_EQ(id, "worker-a");
  ReplyJoiner joiner("server " + endpoint);
  const uint64_t c = kReplyChunkBytes / sizeof(float);
  uint64_t request = 1;
  for (const uint64_t floats : {uint64_t{0}, uint64_t{1}, c, c + 1, 10 * c + 3}) {
    for (const bool chunked : {true, false}) {
      Message m = Reply(request, 0, floats, 0.0f);
      std::memset(m.values.data(), 0, m.values.size());
      std::vector<size_t> ends;
      size_t written = 0;
      auto* v = static_cast<float*>(m.values.data());
      m.write_values = [&ends, &written, v](size_t end) {
        ends.push_back(end);
        for (; written < end / sizeof(float); ++written) v[written] = 0.25f * static_cast<float>(written);
      };
      zmq::message_t keep;
      keep.copy(m.values);  // the written bytes stay alive after the send
      const Status sent = chunked ? SendMessageInChunks(*router, &m, id, "worker 0") : SendMessage(*router, &m, &id, "worker 0");
      ASSERT_TRUE(sent.ok()) << sent.message();
      const size_t bytes = floats * sizeof(float);
      if (chunked && bytes > kReplyChunkBytes) {
        ASSERT_EQ(ends.size(), (bytes + kReplyChunkBytes - 1) / kReplyChunkBytes + 1);
        for (size_t i = 0; i + 2 < ends.size(); ++i) EXPECT_EQ(ends[i], (i + 1) * kReplyChunkBytes);
        EXPECT_EQ(ends[ends.size() - 2], bytes);
      } else {
        EXPECT_EQ(ends.front(), bytes);
      }
      EXPECT_EQ(ends.back(), bytes);
      Message got;
      Status st = Status::Unavailable("");
      ASSERT_TRUE(PollUntil(5000, [&] {
        st = joiner.Recv(*dealer, &got);
        return st.code() != Status::Code::kUnavailable;
      }));
      ASSERT_TRUE(st.ok()) << st.message();
      ExpectSame(got, Reply(request, 0, floats, 0.0f));
      EXPECT_FALSE(joiner.partial());
      ++request;
    }
  }
  EXPECT_GT(joiner.chunk_bytes(), 10 * kReplyChunkBytes);
}

}  // namespace
}  // namespace tether
