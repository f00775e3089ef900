// A listening socket in two stages, over real TCP: before HELLO a peer's
// frames are bounded by ZMQ_MAXMSGSIZE (a raw ZMTP peer announcing a 3 GB
// frame, plain or CURVE, is cut off before anything is buffered), and its
// chunked messages are refused with an answer naming the bound; an admitted
// peer's large messages arrive whole, bit for bit, interleaved with another
// peer's. Under CURVE the inbox names the key the ZAP handler admitted.
// Every wait polls with a bound.
#include "core/net/inbox.h"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "core/net/chunk_wire.h"
#include "core/net/curve.h"
#include "core/net/transport.h"
#include "core/net/zap_handler.h"
#include "core/peer_limits.h"
#include "core/wire_codec.h"
#include "core/wire_limits.h"
#include "tests/testing/poll.h"

namespace tether {
namespace {

using Clock = std::chrono::steady_clock;

uint64_t Dropped(const std::string& reason) {
  for (const auto& [listener, r, n] : PeerDrops())
    if (listener == "test" && r == reason) return n;
  return 0;
}

// A server shard's listening socket: frames up to kShardFrameBytes.
SocketOptions ShardSocket() {
  SocketOptions o;
  o.max_frame_bytes = static_cast<int64_t>(kShardFrameBytes + kListenerFrameSlackBytes);
  return o;
}

Message Push(uint64_t request_id, size_t floats, float seed) {
  Message m;
  m.header.set_type(PUSH);
  m.header.set_request_id(request_id);
  m.header.set_num_values(floats);
  m.header.set_num_keys(1);
  const uint64_t key = 7;
  m.keys.rebuild(&key, sizeof(key));
  m.values.rebuild(floats * sizeof(float));
  float* v = static_cast<float*>(m.values.data());
  for (size_t i = 0; i < floats; ++i) v[i] = seed + static_cast<float>(i);
  return m;
}

// Polls `inbox` until a message (or an error) comes, at most `ms`.
Status Next(zmq::socket_t& router, Inbox& inbox, Message* m, std::string* id, int ms = 10000) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(ms);
  while (Clock::now() < deadline) {
    zmq::pollitem_t items[] = {{router.handle(), 0, ZMQ_POLLIN, 0}};
    zmq::poll(items, 1, std::chrono::milliseconds(20));
    Status st = inbox.Recv(router, m, id);
    if (st.code() != Status::Code::kUnavailable) return st;
  }
  return Status::DeadlineExceeded("nothing in " + std::to_string(ms) + " ms");
}

TEST(InboxTest, ChunkedMessagesAreJoinedOnlyForAdmittedPeers) {
  zmq::context_t ctx;
  std::string endpoint;
  auto router = BindRouter(ctx, "tcp://127.0.0.1:0", ShardSocket(), &endpoint);
  ASSERT_TRUE(router.ok()) << router.status().message();
  auto a = ConnectDealer(ctx, endpoint, "worker-a", SocketOptions{});
  auto b = ConnectDealer(ctx, endpoint, "worker-b", SocketOptions{});
  ASSERT_TRUE(a.ok() && b.ok());
  Inbox inbox("test");
  Message m;
  std::string id;

  // Not admitted: 1 MiB of values in chunks is refused, answered by its
  // header, and nothing of it is kept.
  const uint64_t refused = Dropped("not_admitted");
  Message big = Push(41, 1 << 18, 0.5f);
  ASSERT_TRUE(SendMessage(*a, &big, nullptr, "server").ok());
  Status st = Next(*router, inbox, &m, &id);
  ASSERT_EQ(st.code(), Status::Code::kDataLoss) << st.message();
  EXPECT_EQ(id, "worker-a");
  EXPECT_EQ(m.header.request_id(), 41u);
  EXPECT_EQ(st.message(),
            "message PUSH from peer 8-byte identity has frames above the 16384 bytes a server takes from a peer "
            "whose HELLO it has not accepted (a worker that was removed, or never said HELLO)");
  EXPECT_EQ(Dropped("not_admitted"), refused + 1);
  // A plain message still comes (a HELLO is one), and nothing is in progress.
  Message small = Push(42, 16, 1.0f);
  ASSERT_TRUE(SendMessage(*a, &small, nullptr, "server").ok());
  ASSERT_TRUE(Next(*router, inbox, &m, &id).ok());
  EXPECT_EQ(m.header.request_id(), 42u);
  EXPECT_EQ(m.first_non_finite, Message::kNotScanned);  // not joined: the server scans it
  EXPECT_EQ(inbox.partial_messages(), 0u);

  // Admitted: two peers' large messages interleave and arrive bit for bit.
  inbox.Admit("worker-a");
  inbox.Admit("worker-b");
  const size_t floats = (3 << 20) / 4 + 3;  // 3 MiB and a bit: 13 chunks of values
  Message ma = Push(1, floats, 2.0f), mb = Push(2, floats, -5.0f);
  std::thread ta([&] { ASSERT_TRUE(SendMessage(*a, &ma, nullptr, "server").ok()); });
  std::thread tb([&] { ASSERT_TRUE(SendMessage(*b, &mb, nullptr, "server").ok()); });
  std::vector<uint64_t> got;
  for (int i = 0; i < 2; ++i) {
    st = Next(*router, inbox, &m, &id);
    ASSERT_TRUE(st.ok()) << st.message();
    const float seed = id == "worker-a" ? 2.0f : -5.0f;
    ASSERT_EQ(m.values.size(), floats * sizeof(float));
    const Message want = Push(0, floats, seed);
    EXPECT_EQ(std::memcmp(m.values.data(), want.values.data(), m.values.size()), 0) << id;
    EXPECT_EQ(m.first_non_finite, floats) << id;  // scanned as it was joined: all finite
    got.push_back(m.header.request_id());
  }
  ta.join();
  tb.join();
  EXPECT_EQ(got.size(), 2u);
  EXPECT_EQ(inbox.partial_messages(), 0u);
  // Forgotten (removed): refused again, chunked or not.
  inbox.Forget("worker-a");
  Message again = Push(43, 1 << 17, 0.0f);
  ASSERT_TRUE(SendMessage(*a, &again, nullptr, "server").ok());
  EXPECT_EQ(Next(*router, inbox, &m, &id).code(), Status::Code::kDataLoss);
  EXPECT_EQ(m.header.request_id(), 43u);
}

// A message whose values are written while it is sent
// (Message::write_values): SendMessage asks for each chunk's end before it
// queues the chunk, then for the whole frame, and the shard receives what
// was written. A plain message is written whole before its first frame.
TEST(InboxTest, ValuesWrittenWhileSentArriveAsWritten) {
  zmq::context_t ctx;
  std::string endpoint;
  auto router = BindRouter(ctx, "tcp://127.0.0.1:0", ShardSocket(), &endpoint);
  ASSERT_TRUE(router.ok()) << router.status().message();
  auto a = ConnectDealer(ctx, endpoint, "worker-a", SocketOptions{});
  ASSERT_TRUE(a.ok());
  Inbox inbox("test");
  inbox.Admit("worker-a");
  for (const size_t floats : {size_t{(kShardFrameBytes * 2 + 4000) / 4}, size_t{1000}}) {
    Message m = Push(7, floats, 0.0f);
    std::memset(m.values.data(), 0, m.values.size());
    std::vector<size_t> ends;
    size_t written = 0;
    auto* v = static_cast<float*>(m.values.data());
    m.write_values = [&](size_t end) {
      ends.push_back(end);
      for (; written < end / sizeof(float); ++written) v[written] = 3.0f + static_cast<float>(written);
    };
    zmq::message_t shared;
    shared.copy(m.values);  // keeps the bytes alive after the send
    ASSERT_TRUE(SendMessage(*a, &m, nullptr, "server").ok());
    const size_t bytes = floats * sizeof(float);
    if (bytes > kShardFrameBytes) {
      EXPECT_EQ(ends, (std::vector<size_t>{kShardFrameBytes, 2 * kShardFrameBytes, bytes, bytes}));
    } else {
      EXPECT_EQ(ends, (std::vector<size_t>{bytes, bytes}));
    }
    EXPECT_FALSE(m.write_values);
    Message got;
    std::string id;
    const Status st = Next(*router, inbox, &got, &id);
    ASSERT_TRUE(st.ok()) << st.message();
    const Message want = Push(0, floats, 3.0f);
    ASSERT_EQ(got.values.size(), bytes);
    EXPECT_EQ(std::memcmp(got.values.data(), want.values.data(), bytes), 0) << floats;
  }
}

// A plain message whose frames are above kListenerFrameBytes (below
// kShardFrameBytes, so it is not chunked) is taken from an admitted peer
// only: from any other it is refused as a chunked one is, answered by its
// header and counted.
TEST(InboxTest, PlainMessagesAboveTheHelloBoundComeOnlyFromAdmittedPeers) {
  zmq::context_t ctx;
  std::string endpoint;
  auto router = BindRouter(ctx, "tcp://127.0.0.1:0", ShardSocket(), &endpoint);
  ASSERT_TRUE(router.ok()) << router.status().message();
  auto a = ConnectDealer(ctx, endpoint, "worker-a", SocketOptions{});
  ASSERT_TRUE(a.ok());
  Inbox inbox("test");
  Message m;
  std::string id;
  const size_t floats = kListenerFrameBytes / sizeof(float) + 1;  // 16 KiB and 4 bytes
  const uint64_t refused = Dropped("not_admitted");
  Message hello_sized = Push(50, kListenerFrameBytes / sizeof(float), 1.0f);
  Message over = Push(51, floats, 1.0f);
  ASSERT_TRUE(SendMessage(*a, &hello_sized, nullptr, "server").ok());
  ASSERT_TRUE(SendMessage(*a, &over, nullptr, "server").ok());
  ASSERT_TRUE(Next(*router, inbox, &m, &id).ok());
  EXPECT_EQ(m.header.request_id(), 50u);
  Status st = Next(*router, inbox, &m, &id);
  ASSERT_EQ(st.code(), Status::Code::kDataLoss) << st.message();
  EXPECT_EQ(id, "worker-a");
  EXPECT_EQ(m.header.request_id(), 51u);
  EXPECT_EQ(m.values.size(), 0u);
  EXPECT_EQ(st.message(),
            "message PUSH from peer 8-byte identity has frames above the 16384 bytes a server takes from a peer "
            "whose HELLO it has not accepted (a worker that was removed, or never said HELLO)");
  EXPECT_EQ(Dropped("not_admitted"), refused + 1);
  // Admitted: the same message, and one of a whole shard frame, come whole
  // and unchunked.
  inbox.Admit("worker-a");
  Message whole = Push(52, kShardFrameBytes / sizeof(float), 3.0f);
  over = Push(51, floats, 1.0f);
  ASSERT_TRUE(SendMessage(*a, &over, nullptr, "server").ok());
  ASSERT_TRUE(SendMessage(*a, &whole, nullptr, "server").ok());
  ASSERT_TRUE(Next(*router, inbox, &m, &id).ok());
  EXPECT_EQ(m.header.request_id(), 51u);
  EXPECT_EQ(m.values.size(), floats * sizeof(float));
  ASSERT_TRUE(Next(*router, inbox, &m, &id).ok());
  EXPECT_EQ(m.header.request_id(), 52u);
  const Message want = Push(0, kShardFrameBytes / sizeof(float), 3.0f);
  ASSERT_EQ(m.values.size(), kShardFrameBytes);
  EXPECT_EQ(std::memcmp(m.values.data(), want.values.data(), m.values.size()), 0);
  EXPECT_EQ(m.first_non_finite, Message::kNotScanned);  // plain: the server scans it
  EXPECT_EQ(inbox.partial_messages(), 0u);
  EXPECT_EQ(Dropped("not_admitted"), refused + 1);
}

// A joined message's values are scanned as their pieces land, floats that
// straddle two chunks included: the first NaN or infinity is found wherever
// it is.
TEST(InboxTest, AJoinedMessagesFirstNonFiniteValueIsFound) {
  zmq::context_t ctx;
  std::string endpoint;
  auto router = BindRouter(ctx, "tcp://127.0.0.1:0", ShardSocket(), &endpoint);
  ASSERT_TRUE(router.ok()) << router.status().message();
  auto a = ConnectDealer(ctx, endpoint, "worker-a", SocketOptions{});
  ASSERT_TRUE(a.ok());
  Inbox inbox("test");
  inbox.Admit("worker-a");
  const size_t floats = 100003;
  for (size_t bad : {size_t{0}, size_t{4095}, size_t{65535}, size_t{65536}, size_t{65537}, size_t{77777}, floats - 1}) {
    for (float value : {std::nanf(""), -std::numeric_limits<float>::infinity()}) {
      Message push = Push(bad, floats, 1.0f);
      static_cast<float*>(push.values.data())[bad] = value;
      if (bad + 9 < floats) static_cast<float*>(push.values.data())[bad + 9] = std::nanf("");  // a later one
      ASSERT_TRUE(SendMessage(*a, &push, nullptr, "server").ok());
      Message m;
      std::string id;
      Status st = Next(*router, inbox, &m, &id);
      ASSERT_TRUE(st.ok()) << st.message();
      EXPECT_EQ(m.first_non_finite, bad) << value;
    }
  }
}

// A float32 PUSH of `rows` rows of `dim` floats (value i is seed + i).
Message RowPush(uint64_t request_id, uint64_t rows, uint32_t dim, float seed) {
  Message m = Push(request_id, rows * dim, seed);
  m.header.set_value_dim(dim);
  m.header.set_num_keys(rows);
  std::vector<uint64_t> keys(rows);
  for (uint64_t i = 0; i < rows; ++i) keys[i] = 3 * i;
  m.keys.rebuild(keys.data(), keys.size() * sizeof(uint64_t));
  return m;
}

// The values of a message as sent, whether joined or kept in pieces.
std::string ValuesOf(const Message& m) {
  std::vector<float> scratch;
  const float* v = m.ValueData(&scratch);
  return std::string(reinterpret_cast<const char*>(v), m.values_size());
}

// A float32 PUSH of rows is kept as it came: the sender cuts its values
// into chunks of whole rows (ValuesChunkBytes), the inbox keeps each
// payload, no values frame is made, and the pieces hold the bytes sent,
// scanned (the first non-finite value found by its index in the whole
// push). Rows of 64, 3 and 1,000 floats; a row wider than a frame (65,600
// floats) cannot be cut whole and is joined.
TEST(InboxTest, ARowPushIsKeptInThePiecesItCameIn) {
  zmq::context_t ctx;
  std::string endpoint;
  auto router = BindRouter(ctx, "tcp://127.0.0.1:0", ShardSocket(), &endpoint);
  ASSERT_TRUE(router.ok()) << router.status().message();
  auto a = ConnectDealer(ctx, endpoint, "worker-a", SocketOptions{});
  ASSERT_TRUE(a.ok());
  Inbox inbox("test");
  inbox.Admit("worker-a");
  struct Case {
    uint32_t dim;
    uint64_t rows;
    size_t pieces;  // 0: joined
  };
  // 64 × 4 bytes: 1,024 rows a chunk; 3 × 4: 21,845 rows (262,140 bytes);
  // 1,000 × 4: 65 rows (260,000 bytes).
  for (const Case& c : {Case{64, 10000, 10}, Case{64, 1025, 2}, Case{3, 50000, 3}, Case{1000, 200, 4},
                        Case{65600, 2, 0}}) {
    for (int64_t bad : {int64_t{-1}, int64_t{7}, static_cast<int64_t>(c.rows * c.dim - 1)}) {
      Message push = RowPush(c.rows, c.rows, c.dim, 0.25f);
      if (bad >= 0) static_cast<float*>(push.values.data())[bad] = std::nanf("");
      const std::string sent(static_cast<const char*>(push.values.data()), push.values.size());
      ASSERT_TRUE(SendMessage(*a, &push, nullptr, "server").ok());
      Message m;
      std::string id;
      Status st = Next(*router, inbox, &m, &id);
      ASSERT_TRUE(st.ok()) << st.message();
      EXPECT_EQ(m.header.request_id(), c.rows);
      EXPECT_EQ(m.value_pieces.size(), c.pieces) << c.dim;
      if (c.pieces > 0) {
        EXPECT_EQ(m.values.size(), 0u) << c.dim;
      }
      for (const zmq::message_t& piece : m.value_pieces) EXPECT_EQ(piece.size() % (c.dim * sizeof(float)), 0u);
      EXPECT_EQ(m.values_size(), sent.size());
      EXPECT_TRUE(ValuesOf(m) == sent) << c.dim;
      EXPECT_EQ(m.first_non_finite, bad >= 0 ? static_cast<uint64_t>(bad) : c.rows * c.dim) << c.dim;
      EXPECT_TRUE(ValidateFrames(m, "worker-a").ok());
    }
  }
  EXPECT_EQ(inbox.partial_messages(), 0u);
}

// Another sender's cut: a values payload that is not whole rows, starts
// inside a row, or is shorter than half a frame before the last, makes the
// inbox join the message from there on (the pieces taken so far copied in):
// the same bytes and scan either way.
TEST(InboxTest, APushCutInsideARowIsJoined) {
  zmq::context_t ctx;
  std::string endpoint;
  auto router = BindRouter(ctx, "tcp://127.0.0.1:0", ShardSocket(), &endpoint);
  ASSERT_TRUE(router.ok());
  zmq::socket_t raw(ctx, zmq::socket_type::dealer);
  raw.set(zmq::sockopt::routing_id, "raw");
  raw.connect(endpoint);
  Inbox inbox("test");
  inbox.Admit("raw");
  const uint32_t dim = 4;
  const uint64_t rows = 20000;  // 320,000 bytes of values
  const size_t half = kShardFrameBytes / 2;
  struct Cut {
    std::vector<size_t> sizes;
    size_t pieces;  // kept at the end; 0: joined
  };
  for (const Cut& cut : {Cut{{half, half, 10, 320000 - 2 * half - 10}, 0}, Cut{{half, 320000 - half}, 2},
                         Cut{{2 * half, 320000 - 2 * half}, 2}, Cut{{16, half, 320000 - 16 - half}, 0},
                         Cut{{40, half, 320000 - 40 - half}, 0},
                         Cut{{half + 8, 320000 - half - 8}, 0}}) {
    SCOPED_TRACE(::testing::Message() << "first payload " << cut.sizes[0] << ", " << cut.sizes.size() << " payloads");
    Message push = RowPush(9, rows, dim, 1.5f);
    static_cast<float*>(push.values.data())[40000] = std::numeric_limits<float>::infinity();
    const std::string header = push.header.SerializeAsString();
    const std::string keys(static_cast<const char*>(push.keys.data()), push.keys.size());
    const std::string values(static_cast<const char*>(push.values.data()), push.values.size());
    auto send = [&](const std::string& tag, const std::string& payload) {
      raw.send(zmq::buffer(tag), zmq::send_flags::sndmore);
      raw.send(zmq::buffer(payload), zmq::send_flags::none);
    };
    send(ChunkLeadTag(header.size(), keys.size(), values.size()), header);
    send(std::string(kChunkContinueTag, kChunkTagBytes), keys);
    size_t at = 0;
    for (size_t n : cut.sizes) {
      send(std::string(kChunkContinueTag, kChunkTagBytes), values.substr(at, n));
      at += n;
    }
    ASSERT_EQ(at, values.size());
    Message m;
    std::string id;
    Status st = Next(*router, inbox, &m, &id);
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_EQ(m.value_pieces.size(), cut.pieces) << cut.sizes[0];
    EXPECT_EQ(m.values.size(), cut.pieces > 0 ? 0u : values.size()) << cut.sizes[0];
    EXPECT_TRUE(ValuesOf(m) == values) << cut.sizes[0];
    EXPECT_EQ(m.first_non_finite, 40000u) << cut.sizes[0];
  }
  EXPECT_EQ(inbox.partial_messages(), 0u);
}

// n 16-bit values of encoding e: value i is i / 8 − 100, with NaN at each
// of `nans` and +infinity just after the last of them.
std::vector<uint16_t> HalfValues(size_t n, WireEncoding e, const std::vector<size_t>& nans) {
  std::vector<float> f(n);
  for (size_t i = 0; i < n; ++i) f[i] = static_cast<float>(i) / 8.0f - 100.0f;
  for (size_t i : nans) f[i] = std::nanf("");
  if (!nans.empty() && nans.back() + 1 < n) f[nans.back() + 1] = std::numeric_limits<float>::infinity();
  std::vector<uint16_t> h(n);
  (void)EncodeValues(f.data(), n, 1.0f, e, nullptr, h.data());
  return h;
}

Message HalfPush(uint64_t request_id, const std::vector<uint16_t>& values, WireEncoding e) {
  Message m = Push(request_id, 0, 0.0f);
  m.header.set_value_encoding(e);
  m.header.set_num_values(values.size());
  m.values.rebuild(values.data(), values.size() * sizeof(uint16_t));
  return m;
}

// What the server's WidenValues makes of the same frame.
void ExpectWidened(const Message& got, const std::vector<uint16_t>& sent, WireEncoding e) {
  std::vector<float> want(sent.size());
  const uint64_t first = DecodeValuesScan(sent.data(), sent.size(), e, want.data());
  EXPECT_FALSE(got.header.has_value_encoding());
  EXPECT_EQ(got.header.num_values(), sent.size());
  EXPECT_EQ(got.received_values_bytes, sent.size() * sizeof(uint16_t));
  ASSERT_EQ(got.values.size(), sent.size() * sizeof(float));
  EXPECT_EQ(std::memcmp(got.values.data(), want.data(), got.values.size()), 0) << WireEncodingName(e);
  EXPECT_EQ(got.first_non_finite, first) << WireEncodingName(e);
}

// A joined 16-bit PUSH is widened as its pieces land, bit for bit what the
// server's WidenValues makes of the joined frame, its first NaN or infinity
// found across chunk boundaries, and whatever the chunks' sizes (a piece
// that ends inside a value); a 16-bit message whose sizes disagree, or of a
// type that may not carry 16-bit values, is joined as it came and refused
// by ValidateFrames as before.
TEST(InboxTest, AJoined16BitPushIsWidenedAsItLands) {
  zmq::context_t ctx;
  std::string endpoint;
  auto router = BindRouter(ctx, "tcp://127.0.0.1:0", ShardSocket(), &endpoint);
  ASSERT_TRUE(router.ok());
  auto a = ConnectDealer(ctx, endpoint, "worker-a", SocketOptions{});
  ASSERT_TRUE(a.ok());
  zmq::socket_t raw(ctx, zmq::socket_type::dealer);
  raw.set(zmq::sockopt::routing_id, "raw");
  raw.connect(endpoint);
  Inbox inbox("test");
  inbox.Admit("worker-a");
  inbox.Admit("raw");
  Message m;
  std::string id;
  const size_t n = 3 * kShardFrameBytes / sizeof(uint16_t) + 5;  // 4 chunks of values
  for (const WireEncoding e : {BF16, FP16}) {
    for (const std::vector<size_t>& nans : std::vector<std::vector<size_t>>{
             {}, {0}, {kShardFrameBytes / 2 - 1, kShardFrameBytes / 2}, {n - 2}}) {
      const std::vector<uint16_t> sent = HalfValues(n, e, nans);
      Message push = HalfPush(7, sent, e);
      ASSERT_TRUE(SendMessage(*a, &push, nullptr, "server").ok());
      ASSERT_TRUE(Next(*router, inbox, &m, &id).ok());
      ExpectWidened(m, sent, e);
    }
  }
  // Pieces of 7,777 bytes: most end inside a value.
  const std::vector<uint16_t> sent = HalfValues(n, BF16, {40000});
  const Message proto = HalfPush(8, sent, BF16);
  const std::string header = proto.header.SerializeAsString();
  const std::string stream = header + std::string(static_cast<const char*>(proto.keys.data()), proto.keys.size()) +
                             std::string(reinterpret_cast<const char*>(sent.data()), sent.size() * 2);
  for (size_t off = 0; off < stream.size(); off += 7777) {
    const std::string tag = off == 0 ? ChunkLeadTag(header.size(), proto.keys.size(), sent.size() * 2)
                                     : std::string(kChunkContinueTag, kChunkTagBytes);
    raw.send(zmq::buffer(tag), zmq::send_flags::sndmore);
    raw.send(zmq::buffer(stream.substr(off, 7777)), zmq::send_flags::none);
  }
  ASSERT_TRUE(Next(*router, inbox, &m, &id).ok());
  EXPECT_EQ(id, "raw");
  ExpectWidened(m, sent, BF16);
  // Sizes that disagree: joined as they came, refused naming them.
  Message wrong = HalfPush(9, sent, BF16);
  wrong.header.set_num_values(n + 1);
  ASSERT_TRUE(SendMessage(*a, &wrong, nullptr, "server").ok());
  Status st = Next(*router, inbox, &m, &id);
  EXPECT_EQ(st.message(), "message PUSH from peer 8-byte identity: values frame has " + std::to_string(n * 2) +
                              " bytes but the header says " + std::to_string(n + 1) + " bf16 values");
  // A PULL may not carry 16-bit values: not widened, refused.
  Message pull = HalfPush(10, sent, BF16);
  pull.header.set_type(PULL);
  ASSERT_TRUE(SendMessage(*a, &pull, nullptr, "server").ok());
  st = Next(*router, inbox, &m, &id);
  EXPECT_EQ(st.message(),
            "message PULL from peer 8-byte identity: value_encoding bf16 on a message that carries float32 values only");
  EXPECT_EQ(inbox.partial_messages(), 0u);
}

TEST(InboxTest, ChunksThatBreakTheStreamAreRefusedAndCounted) {
  zmq::context_t ctx;
  std::string endpoint;
  auto router = BindRouter(ctx, "tcp://127.0.0.1:0", ShardSocket(), &endpoint);
  ASSERT_TRUE(router.ok());
  zmq::socket_t raw(ctx, zmq::socket_type::dealer);
  raw.set(zmq::sockopt::routing_id, "raw");
  raw.connect(endpoint);
  Inbox inbox("test");
  inbox.Admit("raw");
  Message m;
  std::string id;
  auto send = [&](const std::string& tag, const std::string& payload) {
    raw.send(zmq::buffer(tag), zmq::send_flags::sndmore);
    raw.send(zmq::buffer(payload), zmq::send_flags::none);
  };
  // A continuation with no message started.
  const uint64_t stray = Dropped("stray_chunk");
  send(std::string(kChunkContinueTag, kChunkTagBytes), "abc");
  // Sizes above the frame limit, announced by an admitted peer.
  send(ChunkLeadTag(10, kMaxFrameBytes + 1, 0), "x");
  Status st = Next(*router, inbox, &m, &id);
  EXPECT_EQ(st.code(), Status::Code::kDataLoss);
  EXPECT_NE(st.message().find("above the limits"), std::string::npos) << st.message();
  EXPECT_EQ(Dropped("stray_chunk"), stray + 1);
  // More bytes than announced.
  send(ChunkLeadTag(4, 0, 0), "abcdef");
  st = Next(*router, inbox, &m, &id);
  EXPECT_EQ(st.message(), "message from peer 3-byte identity: its chunks carry more bytes than announced");
  EXPECT_EQ(inbox.partial_messages(), 0u);
}

// A peer that is not admitted starts chunked messages it never ends, each
// on a connection of its own (an identity each) that it then leaves: every
// one is answered from its lead chunk, and the inbox keeps nothing of any,
// nor of a lead whose header does not come whole; the rest of a message
// comes as strays.
TEST(InboxTest, ChunkedMessagesFromPeersNotAdmittedLeaveNothingKept) {
  zmq::context_t ctx;
  std::string endpoint;
  auto router = BindRouter(ctx, "tcp://127.0.0.1:0", ShardSocket(), &endpoint);
  ASSERT_TRUE(router.ok());
  Inbox inbox("test");
  Message m;
  std::string id;
  MessageHeader h;
  h.set_type(PUSH);
  h.set_request_id(77);
  const std::string header = h.SerializeAsString();
  const uint64_t refused = Dropped("not_admitted"), stray = Dropped("stray_chunk");
  auto lead = [&](zmq::socket_t& s, const std::string& payload) {
    s.send(zmq::buffer(ChunkLeadTag(static_cast<uint32_t>(header.size()), 0, 1ull << 30)), zmq::send_flags::sndmore);
    s.send(zmq::buffer(payload), zmq::send_flags::none);
  };
  for (int i = 0; i < 20; ++i) {
    zmq::socket_t raw(ctx, zmq::socket_type::dealer);
    raw.set(zmq::sockopt::routing_id, "peer-" + std::to_string(i));
    raw.set(zmq::sockopt::linger, 2000);
    raw.connect(endpoint);
    lead(raw, header + std::string(1000, 'v'));  // 1 GiB of values announced, 1,000 bytes sent
    Status st = Next(*router, inbox, &m, &id);
    ASSERT_EQ(st.code(), Status::Code::kDataLoss) << st.message();
    EXPECT_EQ(id, "peer-" + std::to_string(i));
    EXPECT_EQ(m.header.request_id(), 77u);
    EXPECT_EQ(inbox.partial_messages(), 0u) << i;
  }
  zmq::socket_t raw(ctx, zmq::socket_type::dealer);
  raw.set(zmq::sockopt::routing_id, "peer-cut");
  raw.connect(endpoint);
  lead(raw, header.substr(0, 3));
  Status st = Next(*router, inbox, &m, &id);
  ASSERT_EQ(st.code(), Status::Code::kDataLoss) << st.message();
  EXPECT_EQ(id, "peer-cut");
  EXPECT_FALSE(m.header.has_request_id());
  EXPECT_EQ(inbox.partial_messages(), 0u);
  raw.send(zmq::buffer(std::string(kChunkContinueTag, kChunkTagBytes)), zmq::send_flags::sndmore);
  raw.send(zmq::buffer(header.substr(3) + "vvvv"), zmq::send_flags::none);
  EXPECT_TRUE(testing::PollUntil(10000, [&] {
    EXPECT_EQ(inbox.Recv(*router, &m, &id).code(), Status::Code::kUnavailable);
    return Dropped("stray_chunk") == stray + 1;
  }));
  EXPECT_EQ(inbox.partial_messages(), 0u);
  EXPECT_EQ(inbox.partial_bytes(), 0u);
  EXPECT_EQ(Dropped("not_admitted"), refused + 21);
}

// A raw ZMTP 3.0 peer: the 64-byte greeting for `mechanism`, then one
// command frame announced as `announced` bytes (8-byte size) and some of its
// bytes. Returns whether the server closed the connection within 3 s.
bool ServerCutsOff(int port, const char* mechanism, uint64_t announced, uint64_t* sent) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) return false;
  std::string greeting(64, '\0');
  greeting[0] = static_cast<char>(0xff);
  greeting[9] = 0x7f;
  greeting[10] = 3;
  std::memcpy(&greeting[12], mechanism, std::strlen(mechanism));
  std::string frame(9, '\0');
  frame[0] = 0x06;  // a long command frame
  for (int i = 0; i < 8; ++i) frame[1 + i] = static_cast<char>((announced >> (8 * (7 - i))) & 0xff);
  send(fd, greeting.data(), greeting.size(), MSG_NOSIGNAL);
  send(fd, frame.data(), frame.size(), MSG_NOSIGNAL);
  const std::string block(1 << 16, 'z');
  *sent = 0;
  const auto deadline = Clock::now() + std::chrono::seconds(3);
  bool closed = false;
  while (!closed && Clock::now() < deadline) {
    pollfd p{fd, POLLIN | POLLOUT, 0};
    poll(&p, 1, 50);
    if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
      char buf[256];
      const ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
      closed = n == 0 || (n < 0 && errno != EAGAIN);
    }
    if (!closed && (p.revents & POLLOUT) && *sent < (64u << 20)) {
      const ssize_t n = send(fd, block.data(), block.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) *sent += static_cast<uint64_t>(n);
      if (n < 0 && errno != EAGAIN) closed = true;
    }
  }
  close(fd);
  return closed;
}

int PortOf(const std::string& endpoint) { return std::stoi(endpoint.substr(endpoint.rfind(':') + 1)); }

TEST(InboxTest, APeerThatAnnouncesA3GBFrameBeforeItsHandshakeIsCutOff) {
  zmq::context_t ctx;
  std::string plain;
  auto router = BindRouter(ctx, "tcp://127.0.0.1:0", SocketOptions{}, &plain);
  ASSERT_TRUE(router.ok());
  uint64_t sent = 0;
  EXPECT_TRUE(ServerCutsOff(PortOf(plain), "NULL", 3000000000ull, &sent));
  EXPECT_LT(sent, 64u << 20);
  // The same under CURVE, before any authentication.
  StatusOr<CurveKeyPair> keys = NewCurveKeyPair();
  ASSERT_TRUE(keys.ok());
  const CurveKeyPair& server = *keys;
  auto zap = ZapHandler::Start(ctx, {}, "[test] ");
  ASSERT_TRUE(zap.ok());
  SocketOptions so;
  so.curve.secret_key = server.secret_key;
  so.curve.public_key = server.public_key;
  std::string curve;
  auto curve_router = BindRouter(ctx, "tcp://127.0.0.1:0", so, &curve);
  ASSERT_TRUE(curve_router.ok());
  EXPECT_TRUE(ServerCutsOff(PortOf(curve), "CURVE", 3000000000ull, &sent));
  EXPECT_LT(sent, 64u << 20);
  // A frame of exactly the bound is taken (then refused by the handshake).
  EXPECT_TRUE(ServerCutsOff(PortOf(plain), "NULL", kListenerFrameBytes + kListenerFrameSlackBytes + 1, &sent));
}

TEST(InboxTest, PeerKeyIsTheCurveKeyTheZapHandlerAdmitted) {
  zmq::context_t server_ctx, client_ctx;
  StatusOr<CurveKeyPair> server = NewCurveKeyPair(), client = NewCurveKeyPair();
  ASSERT_TRUE(server.ok() && client.ok());
  auto zap = ZapHandler::Start(server_ctx, {client->public_key}, "[test] ");
  ASSERT_TRUE(zap.ok()) << zap.status().ToString();
  SocketOptions so;
  so.curve.secret_key = server->secret_key;
  std::string curve, plain;
  auto curve_router = BindRouter(server_ctx, "tcp://127.0.0.1:0", so, &curve);
  auto plain_router = BindRouter(client_ctx, "tcp://127.0.0.1:0", SocketOptions{}, &plain);
  ASSERT_TRUE(curve_router.ok() && plain_router.ok());
  SocketOptions co;
  co.curve = CurveOptions{client->secret_key, client->public_key, server->public_key};
  auto curve_dealer = ConnectDealer(client_ctx, curve, "keyed", co);
  auto plain_dealer = ConnectDealer(client_ctx, plain, "plain", SocketOptions{});
  ASSERT_TRUE(curve_dealer.ok() && plain_dealer.ok());
  Inbox inbox("test");
  Message m = Push(1, 4, 0.5f);
  ASSERT_TRUE(SendMessage(*curve_dealer, &m, nullptr, "server").ok());
  std::string id;
  ASSERT_TRUE(Next(*curve_router, inbox, &m, &id).ok());
  EXPECT_EQ(id, "keyed");
  EXPECT_EQ(inbox.peer_key(), client->public_key);
  m = Push(2, 4, 0.5f);
  ASSERT_TRUE(SendMessage(*plain_dealer, &m, nullptr, "server").ok());
  ASSERT_TRUE(Next(*plain_router, inbox, &m, &id).ok());
  EXPECT_EQ(id, "plain");
  EXPECT_EQ(inbox.peer_key(), "");
  for (zmq::socket_t* s : {&*curve_dealer, &*plain_dealer, &*curve_router, &*plain_router})
    s->set(zmq::sockopt::linger, 0);
}

// A shard's socket queues at most 16 MiB of frames per connection, whatever
// cluster.recv_hwm says: a peer that has not said HELLO cannot make a busy
// shard hold more for it.
TEST(InboxTest, AShardQueuesAtMost16MiBPerConnection) {
  static_assert(ShardQueueFrames(1000) * kShardFrameBytes == kShardQueueBytes);
  EXPECT_EQ(ShardQueueFrames(1000), 64);
  EXPECT_EQ(ShardQueueFrames(64), 64);
  EXPECT_EQ(ShardQueueFrames(10), 10);
  EXPECT_EQ(ShardQueueFrames(0), 64);   // ZeroMQ's "no limit"
  EXPECT_EQ(ShardQueueFrames(-1), 64);
}

}  // namespace
}  // namespace tether
