// Transport against peers that break the protocol, in one process (same
// binary as transport_test.cc): a server keeps serving one worker, with
// unchanged results, while another peer sends it malformed messages of every
// kind; HELLOs of another job, generation, protocol version, shard order or
// table specs are refused naming what differs (C26); a worker's ABORT, a
// removed worker that never returns, a second claim on a live rank and a
// server started again on its address each end as stated.
#include <gtest/gtest.h>
#include <zlib.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <functional>
#include <iostream>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <glog/logging.h>
#include <google/protobuf/unknown_field_set.h>
#include <zmq.hpp>

#include "core/net/chunk_wire.h"
#include "core/net/message.h"
#include "core/net/transport.h"
#include "core/partition.h"
#include "server/server.h"
#include "input/reader.h"
#include "worker/client/client.h"
#include "worker/client/job_session.h"
#include "worker/models/model_registry.h"
#include "worker/trainer.h"
#include "tests/testing/cluster.h"
#include "tests/transport_test.h"

namespace tether {
namespace {

using namespace transport_testing;  // NOLINT(build/namespaces): the tests' shared helpers
using testing::ConnectClient;
using testing::ShardThread;

// ------------------------------------------------------------------ malformed

// A peer that sends malformed messages of every kind. Each gets one
// ERROR_REPLY naming its fault; none changes anything.
class BadPeer {
 public:
  explicit BadPeer(const std::string& endpoint) : socket_(ctx_, zmq::socket_type::dealer) {
    socket_.set(zmq::sockopt::linger, 0);
    socket_.set(zmq::sockopt::rcvtimeo, 10000);
    socket_.connect(endpoint);
  }

  struct Bad {
    const char* what;
    std::vector<std::string> frames;
    const char* error;  // a part of the ERROR_REPLY's text
  };

  static std::vector<Bad> All() {
    const uint64_t two_keys[2] = {1, 5}, unsorted[2] = {9, 3}, dup[2] = {4, 4}, one[1] = {1};
    const float four[4] = {1, 2, 3, 4}, nan4[4] = {1, std::numeric_limits<float>::quiet_NaN(), 1, 1};
    const auto raw = [](const void* p, size_t n) { return std::string(static_cast<const char*>(p), n); };
    MessageHeader unknown_type;
    unknown_type.set_sender_rank(1);
    return {
        {"truncated: header and keys only", {Header(PULL, 1, 1, kW1, 2, 2, 0), raw(two_keys, 16)},
         "has 2 frames, expected 3"},
        {"an extra frame", {Header(PULL, 1, 2, kW1, 2, 2, 0), raw(two_keys, 16), "", "extra"},
         "has 4 frames, expected 3"},
        {"wrong key count", {Header(PULL, 1, 3, kW1, 3, 2, 0), raw(two_keys, 16), ""},
         "keys frame has 16 bytes but the header says 3 keys"},
        {"key count that overflows", {Header(PULL, 1, 4, kW1, uint64_t{1} << 61, 2, 0), "", ""},
         "keys frame has 0 bytes but the header says 2305843009213693952 keys"},
        {"wrong value count", {Header(PUSH, 1, 5, kW1, 2, 2, 5), raw(two_keys, 16), raw(four, 16)},
         "values frame has 16 bytes but the header says 5 floats"},
        {"unknown table", {Header(PULL, 1, 6, 99, 2, 2, 0), raw(two_keys, 16), ""}, "unknown table id 99"},
        {"unsorted keys", {Header(PULL, 1, 7, kW1, 2, 2, 0), raw(unsorted, 16), ""},
         "keys not sorted and unique at position 1"},
        {"repeated keys", {Header(PUSH, 1, 8, kW1, 2, 2, 4), raw(dup, 16), raw(four, 16)},
         "keys not sorted and unique at position 1"},
        {"wrong value width", {Header(PULL, 1, 9, kW1, 2, 3, 0), raw(two_keys, 16), ""},
         "value_dim 3 but the table has dim 2"},
        {"garbage bytes", {"garbage"}, "has 1 frames, expected 3"},
        {"garbage header", {std::string("\xff\xff\xff\xff\x0f\x01", 6), "", ""}, "header does not parse"},
        {"unknown type", {unknown_type.SerializeAsString(), "", ""}, "unknown message type 0"},
        {"rank out of range", {Header(PULL, 7, 12, kW1, 1, 2, 0), raw(one, 8), ""}, "sender rank 7 outside [0, 2)"},
        {"another worker's rank", {Header(PULL, 0, 13, kW1, 1, 2, 0), raw(one, 8), ""},
         "claims to come from worker 0, which joined from another connection"},
        {"no HELLO first", {Header(PULL, 1, 14, kW1, 1, 2, 0), raw(one, 8), ""}, "PULL from worker 1 before its HELLO"},
        {"non-finite gradient", {Header(PUSH, 1, 15, kW1, 2, 2, 4), raw(two_keys, 16), raw(nan4, 16)},
         "value 1 (key 1, column 1) is NaN"},
        {"empty message", {""}, "has 1 frames, expected 3"},
        // (A frame above 256 KiB never reaches the shard: ZeroMQ cuts the
        // connection at its size, inbox_test.)
    };
  }

  // Sends `bad` and returns the text of the ERROR_REPLY it gets. Frames
  // above a shard's 256 KiB go as one chunk stream (core/net/chunk_wire.h),
  // as a worker's SendMessage sends them.
  std::string SendAndGetError(const Bad& bad) {
    bool large = false;
    for (const std::string& f : bad.frames) large = large || f.size() > kShardFrameBytes;
    if (large && bad.frames.size() == 3) {
      const std::string stream = bad.frames[0] + bad.frames[1] + bad.frames[2];
      for (size_t off = 0; off < stream.size(); off += kShardFrameBytes) {
        const std::string tag = off == 0 ? ChunkLeadTag(bad.frames[0].size(), bad.frames[1].size(), bad.frames[2].size())
                                         : std::string(kChunkContinueTag, kChunkTagBytes);
        socket_.send(zmq::buffer(tag), zmq::send_flags::sndmore);
        socket_.send(zmq::buffer(stream.substr(off, kShardFrameBytes)), zmq::send_flags::none);
      }
    }
    for (size_t i = 0; i < bad.frames.size() && !(large && bad.frames.size() == 3); ++i) {
      const bool more = i + 1 < bad.frames.size();
      socket_.send(zmq::buffer(bad.frames[i]), more ? zmq::send_flags::sndmore : zmq::send_flags::none);
    }
    zmq::message_t header;
    if (!socket_.recv(header)) return "(no reply)";
    MessageHeader h;
    const bool parsed = h.ParseFromArray(header.data(), static_cast<int>(header.size()));
    while (header.more() && socket_.recv(header)) {}
    if (!parsed || h.type() != ERROR_REPLY) return "(not an ERROR_REPLY)";
    return h.error_reply().error();
  }

  // Sends `frames`; the reply's header as the peer receives it (empty when
  // none came or it does not parse).
  MessageHeader Exchange(const std::vector<std::string>& frames) {
    for (size_t i = 0; i < frames.size(); ++i)
      socket_.send(zmq::buffer(frames[i]), i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
    zmq::message_t header;
    MessageHeader h;
    if (!socket_.recv(header) || !h.ParseFromArray(header.data(), static_cast<int>(header.size()))) h.Clear();
    while (header.more() && socket_.recv(header)) {}
    return h;
  }

 private:
  zmq::context_t ctx_;
  zmq::socket_t socket_;
};

// The server's key and value checks scan a whole request before looking for
// the exact fault, so the fault must still be found and named wherever it
// is: deep in a long request, for 2 shards (owner by bit mask) and 3 (by
// division), and a NaN past the first block of the value scan.
TEST(TransportTest, LongRequestsWithOneBadKeyOrValueAreRefusedNamingIt) {
  const auto raw = [](const void* p, size_t n) { return std::string(static_cast<const char*>(p), n); };
  for (int servers : {2, 3}) {
    SCOPED_TRACE("servers " + std::to_string(servers));
    JobConfig c = ExactJob(servers, 1, 2);
    c.mutable_data()->set_num_features(1 << 20);
    ShardThread s0(c, 0);
    BadPeer peer(s0.endpoint());
    // The peer joins as worker 0, whose HELLO defines the tables.
    ASSERT_EQ(peer.SendAndGetError({"hello", {HelloHeader(c, 0, 0), "", ""}, ""}), "(not an ERROR_REPLY)");
    // 10,000 sorted keys of shard 0; then, from position 7,000 on, the first
    // key replaced by one of another shard that keeps the order.
    std::vector<uint64_t> keys;
    for (uint64_t k = 0; keys.size() < 10000; ++k)
      if (ShardForKey(k, servers) == 0) keys.push_back(k);
    size_t at = 7000;
    uint64_t stranger = 0;
    for (; at + 1 < keys.size(); ++at) {
      for (stranger = keys[at - 1] + 1; stranger < keys[at + 1] && ShardForKey(stranger, servers) == 0;) ++stranger;
      if (stranger < keys[at + 1]) break;
    }
    ASSERT_LT(at + 1, keys.size());
    std::vector<uint64_t> misowned = keys;
    misowned[at] = stranger;
    const std::string owner = std::to_string(ShardForKey(stranger, servers));
    EXPECT_NE(peer.SendAndGetError({"misowned", {Header(PULL, 0, 1, kW1, 10000, 2, 0), raw(misowned.data(), 80000), ""}, ""})
                  .find("PULL from worker 0: key " + std::to_string(stranger) + " of table w1 belongs to shard " + owner),
              std::string::npos);
    std::vector<uint64_t> unsorted = keys;
    std::swap(unsorted[8000], unsorted[8001]);
    EXPECT_NE(peer.SendAndGetError({"unsorted", {Header(PULL, 0, 2, kW1, 10000, 2, 0), raw(unsorted.data(), 80000), ""}, ""})
                  .find("keys not sorted and unique at position 8001"),
              std::string::npos);
    std::vector<float> grads(20000, 0.5f);
    grads[13001] = -std::numeric_limits<float>::infinity();  // key index 6500, column 1
    EXPECT_NE(peer.SendAndGetError({"inf", {Header(PUSH, 0, 3, kW1, 10000, 2, 20000), raw(keys.data(), 80000),
                                            raw(grads.data(), 80000)}, ""})
                  .find("value 13001 (key " + std::to_string(keys[6500]) + ", column 1) is infinite"),
              std::string::npos);
    EXPECT_EQ(s0.stats().bad_messages, 3u);
  }
}

// What the good worker reads: 12 rounds of push then pull on three keys
// (w1) and the dense b1, all exact sums under SUM.
std::vector<float> GoodWorkerRun(WorkerClient* w, const std::function<void(int)>& between) {
  std::vector<float> seen;
  const std::vector<uint64_t> keys = {1, 5, 9};
  for (int round = 0; round < 12; ++round) {
    std::vector<float> g(6), b(2);
    for (int i = 0; i < 6; ++i) g[i] = static_cast<float>(round + 1) * (i % 2 == 0 ? 0.5f : -0.25f) + i;
    b[0] = static_cast<float>(round);
    b[1] = -1.0f;
    w->PushRows(kW1, keys, g.data());
    w->PushDense(kB1, b.data());
    between(round);
    std::vector<float> rows(6, -1.0f), b1(2, -1.0f);
    EXPECT_TRUE(w->PullRows(kW1, keys, rows.data()).Wait().ok());
    EXPECT_TRUE(w->PullDense(kB1, b1.data()).Wait().ok());
    seen.insert(seen.end(), rows.begin(), rows.end());
    seen.insert(seen.end(), b1.begin(), b1.end());
  }
  return seen;
}

TEST(TransportTest, ServerKeepsServingAGoodWorkerUnchangedWhileAnotherPeerSendsGarbage) {
  JobConfig c = ExactJob(1, 2, 2);
  std::vector<float> reference;
  {
    ShardThread server(c, 0);
    auto good = ConnectClient(OptionsFor(c, 0, {server.endpoint()}));
    ASSERT_TRUE(good);
    reference = GoodWorkerRun(good.get(), [](int) {});
    EXPECT_EQ(server.stats().bad_messages, 0u);
  }
  ShardThread server(c, 0);
  auto good = ConnectClient(OptionsFor(c, 0, {server.endpoint()}));
  ASSERT_TRUE(good);
  BadPeer bad(server.endpoint());
  const std::vector<BadPeer::Bad> all = BadPeer::All();
  size_t sent = 0;
  const std::vector<float> with_bad_peer = GoodWorkerRun(good.get(), [&](int round) {
    // Every kind, spread over the rounds, between the good worker's push
    // and its pull.
    for (size_t i = round; i < all.size(); i += 12) {
      const std::string error = bad.SendAndGetError(all[i]);
      EXPECT_NE(error.find(all[i].error), std::string::npos) << all[i].what << ": " << error;
      ++sent;
    }
  });
  EXPECT_EQ(sent, all.size());
  EXPECT_EQ(with_bad_peer, reference);
  EXPECT_EQ(server.stats().bad_messages, all.size());
  EXPECT_EQ(server.stats().updates_applied, 48u);  // 12 rounds × (3 rows + 1 dense slice)
  ASSERT_TRUE(JobSession(good.get()).Bye().ok());
}

// ------------------------------------------------------------------ C26

// The handshake proves which shard a server is: a worker whose
// --server_addresses swaps two servers is refused at HELLO, naming the
// server, its real index and the listed one, before any table is touched.
TEST(TransportTest, C26SwappedServerAddressesAreRefusedAtHello) {
  JobConfig c = ExactJob(2, 1, 2);
  ShardThread s0(c, 0), s1(c, 1);
  const Status refused = testing::HelloRefusal(OptionsFor(c, 0, {s1.endpoint(), s0.endpoint()}));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.code(), Status::Code::kFailedPrecondition);
  const std::string& m = refused.message();
  // Both servers refuse; whichever answer comes first is the one reported.
  const bool names_s1 = m.find("server " + s1.endpoint() + " is shard 1 of 2 but worker 0 lists it as shard 0 of 2 "
                               "in --server_addresses") != std::string::npos;
  const bool names_s0 = m.find("server " + s0.endpoint() + " is shard 0 of 2 but worker 0 lists it as shard 1 of 2 "
                               "in --server_addresses") != std::string::npos;
  EXPECT_TRUE(names_s1 || names_s0) << m;
  // In the right order the same worker pairs with both.
  auto right = WorkerClient::Connect(OptionsFor(c, 0, {s0.endpoint(), s1.endpoint()}));
  ASSERT_TRUE(right.ok()) << right.status().ToString();
  EXPECT_EQ(s0.stats().updates_applied + s1.stats().updates_applied, 0u);
  ASSERT_TRUE(JobSession(right->get()).Bye().ok());
}

// A worker of another job (or another generation of the same job) never
// pairs with a server: both identities are named.
TEST(TransportTest, ServerOfAnotherJobOrGenerationIsRefusedAtHello) {
  JobConfig c = ExactJob(1, 1, 2);
  c.mutable_cluster()->set_job_id("bibtex-a");
  ShardThread server(c, 0);
  JobConfig other = c;
  other.mutable_cluster()->set_job_id("bibtex-b");
  ClientOptions o = OptionsFor(other, 0, {server.endpoint()});
  o.request_timeout_ms = 5000;
  auto refused = WorkerClient::Connect(o);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("job differs: worker 0 is of job 'bibtex-b' generation 0, server 0 "
                                            "serves job 'bibtex-a' generation 0"),
            std::string::npos) << refused.status().message();
  other = c;
  other.mutable_cluster()->set_generation(1);  // a requeued job's worker meets the old server
  o = OptionsFor(other, 0, {server.endpoint()});
  o.request_timeout_ms = 5000;
  refused = WorkerClient::Connect(o);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("job differs: worker 0 is of job 'bibtex-a' generation 1, server 0 "
                                            "serves job 'bibtex-a' generation 0"),
            std::string::npos) << refused.status().message();
  // The job id defaults to the config's name.
  JobConfig named = ExactJob(1, 1, 2);
  named.set_name("a9a");
  EXPECT_EQ(JobId(named), "a9a");
}

// A peer speaking another protocol version is refused at HELLO, both
// versions named, and the server goes on serving.
TEST(TransportTest, AnotherProtocolVersionIsRefusedAtHello) {
  JobConfig c = ExactJob(1, 1, 2);
  ShardThread server(c, 0);
  BadPeer peer(server.endpoint());
  MessageHeader h;
  ASSERT_TRUE(h.ParseFromString(HelloHeader(c, 0, 0)));
  h.set_protocol_version(kProtocolVersion + 1);
  EXPECT_EQ(peer.SendAndGetError({"version", {h.SerializeAsString(), "", ""}, ""}),
            "[server 0] protocol version differs: worker 0 speaks version " + std::to_string(kProtocolVersion + 1) +
                ", server 0 speaks version " + std::to_string(kProtocolVersion) +
                " (run the same Tether build on both sides)");
  auto good = ConnectClient(OptionsFor(c, 0, {server.endpoint()}));
  ASSERT_TRUE(good);
  ASSERT_TRUE(JobSession(good.get()).Bye().ok());
}

// A worker of protocol version 3 (every field in the header, at the numbers
// version 4 reserves) is refused at HELLO naming both versions; the refusal
// also travels at the error's old field number, where that worker reads it.
// Shard 0 is the one that hosts the job coordinator.
TEST(TransportTest, AHelloOfTheOldProtocolIsRefusedNamingBothVersions) {
  JobConfig c = ExactJob(1, 1, 2);
  ShardThread server(c, 0);
  BadPeer peer(server.endpoint());
  MessageHeader h;
  h.set_type(HELLO);
  h.set_sender_rank(0);
  h.set_request_id(1);
  h.set_protocol_version(3);
  google::protobuf::UnknownFieldSet* old = h.GetReflection()->MutableUnknownFields(&h);
  old->AddVarint(10, static_cast<uint64_t>(EffectiveStaleness(c.consistency())));  // staleness
  old->AddLengthDelimited(30, JobId(c));                                          // job_id
  old->AddVarint(33, 0);                                                          // shard
  old->AddVarint(34, 1);                                                          // num_shards
  const MessageHeader reply = peer.Exchange({h.SerializeAsString(), "", ""});
  const std::string want = "[server 0] protocol version differs: worker 0 speaks version 3, server 0 speaks version " +
                           std::to_string(kProtocolVersion) + " (run the same Tether build on both sides)";
  ASSERT_EQ(reply.type(), ERROR_REPLY);
  EXPECT_EQ(reply.error_reply().error(), want);
  MessageHeader without_body = reply;
  without_body.clear_body();
  EXPECT_EQ(ErrorText(without_body), want) << "the text at field " << kLegacyErrorField;
  auto good = ConnectClient(OptionsFor(c, 0, {server.endpoint()}));
  ASSERT_TRUE(good);
  ASSERT_TRUE(JobSession(good.get()).Bye().ok());
}

// Worker 0 defines the tables: another worker's HELLO that arrives first
// waits for it (so two shards can never adopt different tables), then pairs.
TEST(TransportTest, HelloBeforeWorkerZerosWaitsForItsTables) {
  JobConfig c = ExactJob(1, 2, 2);
  ShardThread server(c, 0);
  StatusOr<std::unique_ptr<WorkerClient>> second = Status::Unavailable("not connected");
  std::atomic<bool> connected{false};
  std::thread t([&] {
    second = WorkerClient::Connect(OptionsFor(c, 1, {server.endpoint()}));
    connected.store(true);
  });
  // Worker 1's HELLO is held: no reply can come before worker 0's.
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  while (std::chrono::steady_clock::now() < until) {
    ASSERT_FALSE(connected.load());
    std::this_thread::yield();
  }
  auto first = ConnectClient(OptionsFor(c, 0, {server.endpoint()}));
  ASSERT_TRUE(first);
  t.join();
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  ASSERT_TRUE(JobSession(second->get()).Bye().ok());
  ASSERT_TRUE(JobSession(first.get()).Bye().ok());
  EXPECT_EQ(server.stats().bad_messages, 0u);
}

// The shard re-checks the tables worker 0 declares (a peer may skip the
// worker's own checks): a bad spec gets an ERROR_REPLY naming the table and
// the field, nothing is defined, and a good worker 0 can still define them.
TEST(TransportTest, BadTableSpecsInHelloAreRefusedNamingTheField) {
  JobConfig c = ExactJob(1, 1, 2);
  ShardThread server(c, 0);
  BadPeer peer(server.endpoint());
  MessageHeader h;
  ASSERT_TRUE(h.ParseFromString(HelloHeader(c, 0, 0)));
  h.mutable_hello()->mutable_tables(0)->set_dim(0);
  EXPECT_EQ(peer.SendAndGetError({"dim 0", {h.SerializeAsString(), "", ""}, ""}),
            "[server 0] worker 0 declared a bad table: table 'w1': field dim: must be ≥ 1, got 0");
  ASSERT_TRUE(h.ParseFromString(HelloHeader(c, 0, 0)));
  h.mutable_hello()->mutable_tables(1)->set_size(700000000);  // C15: one slice above the message limit
  const std::string big = peer.SendAndGetError({"C15", {h.SerializeAsString(), "", ""}, ""});
  EXPECT_NE(big.find("dense table 'b1' is 2800000000 bytes (700000000 floats); split over cluster.num_servers=1"),
            std::string::npos) << big;
  h.mutable_hello()->clear_tables();
  EXPECT_EQ(peer.SendAndGetError({"none", {h.SerializeAsString(), "", ""}, ""}),
            "[server 0] worker 0 declared no tables");
  auto good = ConnectClient(OptionsFor(c, 0, {server.endpoint()}));
  ASSERT_TRUE(good);
  ASSERT_TRUE(JobSession(good.get()).Bye().ok());
}

// ZeroMQ would take a TCP port modulo 2^16 and bind another one: a port
// outside [0, 65535] is refused at bind and at connect, naming it.
TEST(TransportTest, TcpPortOutsideTheRangeIsRefused) {
  zmq::context_t ctx;
  std::string bound;
  StatusOr<zmq::socket_t> s = BindRouter(ctx, "tcp://127.0.0.1:99999", SocketOptions(), &bound);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(), "endpoint tcp://127.0.0.1:99999: port 99999 outside [0, 65535]");
  EXPECT_FALSE(ConnectDealer(ctx, "tcp://127.0.0.1:65536", "w", SocketOptions()).ok());
  EXPECT_TRUE(BindRouter(ctx, "tcp://127.0.0.1:0", SocketOptions(), &bound).ok());
}

// C22: the server's own step may make a non-finite value from finite
// gradients (here SUM overflowing float). That row is left as it was (the
// row before it in the push keeps its update), the push fails, and the
// worker's error names the table, the key, the optimizer and its settings,
// not the worker's gradients.
TEST(TransportTest, C22ServerStepThatOverflowsFailsThePushAndNamesTheKey) {
  JobConfig c = ExactJob(1, 1, 2);
  ShardThread server(c, 0);
  auto w = ConnectClient(OptionsFor(c, 0, {server.endpoint()}));
  ASSERT_TRUE(w);
  const float first[4] = {1, 2, 3e38f, 4};
  ASSERT_TRUE(w->PushRows(kW1, kTwoKeys, first).Wait().ok());
  const float second[4] = {1, 1, 3e38f, 1};  // finite, but 6e38 is not a float
  const Status st = w->PushRows(kW1, kTwoKeys, second).Wait();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("table w1: the server's SUM (w += g) step made key 7, column 0 infinite; that row "
                              "was left as it was, and the push's 1 earlier row(s) kept their updates (the "
                              "gradients pushed by worker 0 were finite)"),
            std::string::npos)
      << st.message();
  float rows[4] = {-1, -1, -1, -1};
  ASSERT_TRUE(w->PullRows(kW1, kTwoKeys, rows).Wait().ok());
  EXPECT_EQ(rows[0], 2.0f);  // key 3 took its step
  EXPECT_EQ(rows[1], 3.0f);
  EXPECT_EQ(rows[2], 3e38f);  // key 7 as it was
  EXPECT_EQ(rows[3], 4.0f);
  EXPECT_EQ(w->Clock().message(), st.message());  // the run fails
  EXPECT_EQ(server.stats().updates_applied, 2u);
  EXPECT_EQ(server.stats().bad_messages, 1u);
}

// A job that failed tells its servers so. A worker's ABORT ends
// the shard's Run() with the worker's reason (tether-server exits 1).
TEST(TransportTest, AbortFromAWorkerEndsTheShardWithItsReason) {
  JobConfig c = ExactJob(1, 2, 4);
  ShardThread server(c, 0);
  auto w0 = ConnectClient(OptionsFor(c, 0, {server.endpoint()}));
  ASSERT_TRUE(w0);
  JobSession(w0.get()).Abort("worker 0 failed: disk full", 500);
  const Status st = server.WaitForExit(5000);
  EXPECT_EQ(st.code(), Status::Code::kUnavailable) << st.ToString();
  EXPECT_EQ(st.message(), "[server 0] job aborted: worker 0 failed: disk full");
}

// A shard whose workers are all gone, one of them removed for
// silence and never back, did not finish its job: Run() says so (exit 1)
// instead of OK.
TEST(TransportTest, ShardWhoseRemovedWorkerNeverCameBackEndsWithAnError) {
  JobConfig c = ExactJob(1, 2, 4);
  c.mutable_cluster()->set_worker_timeout_ms(300);
  ShardThread server(c, 0);
  ClientOptions o0 = OptionsFor(c, 0, {server.endpoint()});
  o0.heartbeat_interval_ms = 50;
  auto w0 = ConnectClient(o0);
  auto w1 = ConnectClient(OptionsFor(c, 1, {server.endpoint()}));
  ASSERT_TRUE(w0 && w1);
  w1.reset();  // dies: no BYE, no heartbeats
  for (int i = 0; i < 100 && server.stats().workers_timed_out == 0; ++i) ASSERT_TRUE(w0->Idle(50).ok());
  ASSERT_EQ(server.stats().workers_timed_out, 1u);
  ASSERT_TRUE(JobSession(w0.get()).Bye().ok());
  const Status st = server.WaitForExit(5000);
  EXPECT_EQ(st.code(), Status::Code::kUnavailable) << st.ToString();
  EXPECT_NE(st.message().find("the job did not finish: worker(s) 1 fell silent (cluster.worker_timeout_ms=300)"),
            std::string::npos)
      << st.message();
}

// A worker removed for silence in the middle of a chunked push leaves
// nothing of it on the shard: the push's buffer is dropped with the worker
// (a worker that says BYE, or comes back from another connection, is
// forgotten the same way).
TEST(TransportTest, AWorkerRemovedMidPushLeavesNothingBeingJoined) {
  JobConfig c = ExactJob(1, 2, 4);
  c.mutable_cluster()->set_worker_timeout_ms(300);
  ShardThread server(c, 0);
  ClientOptions o0 = OptionsFor(c, 0, {server.endpoint()});
  o0.heartbeat_interval_ms = 50;
  auto w0 = ConnectClient(o0);
  ASSERT_TRUE(w0);
  {
    zmq::context_t ctx;
    zmq::socket_t w1(ctx, zmq::socket_type::dealer);
    w1.set(zmq::sockopt::linger, 0);
    w1.set(zmq::sockopt::rcvtimeo, 10000);
    w1.set(zmq::sockopt::routing_id, "raw-worker-1");
    w1.connect(server.endpoint());
    w1.send(zmq::buffer(HelloHeader(c, 1, 0)), zmq::send_flags::sndmore);
    w1.send(zmq::str_buffer(""), zmq::send_flags::sndmore);
    w1.send(zmq::str_buffer(""), zmq::send_flags::none);
    zmq::message_t reply;
    ASSERT_TRUE(w1.recv(reply));
    MessageHeader h;
    ASSERT_TRUE(h.ParseFromArray(reply.data(), static_cast<int>(reply.size())));
    ASSERT_EQ(h.type(), HELLO_REPLY);
    while (reply.more()) (void)w1.recv(reply);
    // The first chunk of a 4 MiB push, and then the process is gone.
    const std::string push = Header(PUSH, 1, 5, kW1, 1, 4, 1u << 20);
    w1.send(zmq::buffer(ChunkLeadTag(push.size(), 8, 4u << 20)), zmq::send_flags::sndmore);
    w1.send(zmq::buffer(push), zmq::send_flags::none);
  }
  for (int i = 0; i < 100 && server.stats().workers_timed_out == 0; ++i) ASSERT_TRUE(w0->Idle(50).ok());
  ASSERT_EQ(server.stats().workers_timed_out, 1u);
  ASSERT_TRUE(JobSession(w0.get()).Bye().ok());
  EXPECT_EQ(server.WaitForExit(5000).code(), Status::Code::kUnavailable);  // worker 1 never finished
  EXPECT_EQ(server.shard().messages_being_joined(), 0u);
}

// A peer that never said HELLO and sends message after message the shard
// refuses gets an answer to each, but floods neither the shard's log (its
// first 10 refusals are logged, then every 1,000th) nor keeps the shard
// from its idle timeout; a worker is served as before.
TEST(TransportTest, RefusalsOfAPeerWithoutHelloAreLoggedSparingly) {
  JobConfig c = ExactJob(1, 1, 2);
  ShardThread server(c, 0);
  LogCapture log;
  BadPeer peer(server.endpoint());
  const std::string big(kListenerFrameBytes + 1, 'x');
  for (int i = 0; i < 25; ++i)
    ASSERT_NE(peer.SendAndGetError({"large", {Header(PULL, 0, 100 + i, kW1, 1, 2, 0), big, ""}, ""})
                  .find("bytes a server takes from a peer whose HELLO it has not accepted"),
              std::string::npos);
  EXPECT_EQ(log.Count(google::GLOG_ERROR, "message(s) refused from peers not admitted so far)"), 10u);
  EXPECT_EQ(log.Count(google::GLOG_ERROR, "(10 message(s) refused from peers not admitted so far)"), 1u);
  EXPECT_EQ(server.stats().bad_messages, 25u);
  auto good = ConnectClient(OptionsFor(c, 0, {server.endpoint()}));
  ASSERT_TRUE(good);
  ASSERT_TRUE(JobSession(good.get()).Bye().ok());
}

// One rank, one connection. A peer that says HELLO as a working
// rank (here a raw socket, as a process on another host would) is refused
// while that rank's connection is live, the server names both connections,
// and the real worker goes on unharmed (it drops the server's liveness
// probe silently). Once the worker's process is gone (its context closed,
// and its TCP connection with it), a HELLO on a new connection is that
// worker restarted, and it rejoins.
TEST(TransportTest, SecondClaimOnALiveRankIsRefusedAndARestartedWorkerRejoins) {
  JobConfig c = ExactJob(1, 2, 2);
  ShardThread server(c, 0);
  LogCapture log;
  auto real = ConnectClient(OptionsFor(c, 0, {server.endpoint()}));
  ASSERT_TRUE(real);
  const std::vector<uint64_t> key = {7};
  const float ones[2] = {1.0f, 1.0f};
  float row[2] = {0, 0};
  ASSERT_TRUE(real->PushRows(kW1, key, ones).Wait().ok());
  {
    BadPeer intruder(server.endpoint());
    EXPECT_EQ(intruder.SendAndGetError({"claim", {HelloHeader(c, 0, 0), "", ""}, ""}),
              "[server 0] worker 0 is already connected to server 0 from another connection that is still live: a "
              "second claim on a rank is refused (a restarted worker rejoins once its old connection is gone, within "
              "cluster.liveness_timeout_ms=5000 for a vanished host)");
  }
  // Both connections named: the intruder's ZeroMQ-made identity (binary,
  // in hex) with its address, and the worker's own.
  EXPECT_EQ(log.Count(google::GLOG_ERROR, "second claim on worker 0 refused: connection 0x"), 1u);
  EXPECT_EQ(log.Count(google::GLOG_ERROR, "(from 127.0.0.1"), 1u);
  EXPECT_EQ(log.Count(google::GLOG_ERROR, "which connection 'w0-"), 1u);
  // The real worker still holds rank 0: its push after the claim lands
  // (SUM from 0: two pushes of 1), and the probe it got was no reply.
  ASSERT_TRUE(real->PushRows(kW1, key, ones).Wait().ok());
  ASSERT_TRUE(real->PullRows(kW1, key, row).Wait().ok());
  EXPECT_EQ(row[0], 2.0f);
  EXPECT_EQ(row[1], 2.0f);
  EXPECT_EQ(log.Count(google::GLOG_WARNING, "for unknown request"), 0u);
  EXPECT_EQ(server.stats().workers_rejoined, 0u);
  EXPECT_EQ(server.stats().updates_applied, 2u);

  // The worker crashes (no BYE): destroying its client closes its context,
  // which returns only once the TCP connection is closed.
  real.reset();
  BadPeer restarted(server.endpoint());
  EXPECT_EQ(restarted.SendAndGetError({"rejoin", {HelloHeader(c, 0, 0), "", ""}, ""}), "(not an ERROR_REPLY)");
  EXPECT_EQ(server.stats().workers_rejoined, 1u);
  EXPECT_EQ(log.Count(google::GLOG_WARNING, "worker 0 rejoined at clock 0"), 1u);
  EXPECT_EQ(log.Count(google::GLOG_ERROR, "second claim"), 1u);
}

// A server killed and started again on its address while its worker runs
// (here: the shard's ZeroMQ context closed, and a new shard bound to the
// same port). The worker, idle with nothing in flight, reconnects and
// learns from the new process's first answer (to a heartbeat it sends on
// reconnecting) that the shard is another process holding no tables: every
// wait then fails naming the shard, not with the new process's "before its
// HELLO". Its ABORT names the process it joined, so the new shard, which
// no worker said HELLO to, ends too; an ABORT naming the shard's own start
// id (or none) before HELLO is refused as before.
TEST(TransportTest, AServerStartedAgainOnItsAddressIsNamedAndEndsOnTheWorkersAbort) {
  JobConfig c = ExactJob(1, 2, 2);
  auto first = std::make_unique<ShardThread>(c, 0);
  const std::string endpoint = first->endpoint();
  auto w0 = ConnectClient(OptionsFor(c, 0, {endpoint}));
  ASSERT_TRUE(w0);
  const std::vector<uint64_t> key = {7};
  const float ones[2] = {1.0f, 1.0f};
  ASSERT_TRUE(w0->PushRows(kW1, key, ones).Wait().ok());
  const uint64_t joined = first->shard().incarnation();
  first.reset();
  testing::ShardOptions same_address;
  same_address.endpoint = endpoint;
  ShardThread again(c, 0, same_address);
  ASSERT_NE(again.shard().incarnation(), joined);
  {
    // Before HELLO, an ABORT naming this process (or no process) is a
    // stray's: refused, the shard goes on.
    BadPeer stray(endpoint);
    MessageHeader h;
    h.set_type(ABORT);
    h.set_sender_rank(1);
    h.set_request_id(1);
    h.mutable_job_abort()->set_job_id(JobId(c));
    h.mutable_job_abort()->set_reason("worker 1 failed: nothing");
    h.mutable_job_abort()->set_known_server_incarnation(again.shard().incarnation());
    EXPECT_EQ(stray.SendAndGetError({"own id", {h.SerializeAsString(), "", ""}, ""}),
              "[server 0] ABORT from worker 1 before its HELLO");
  }
  Status st;
  for (int i = 0; i < 100 && st.ok(); ++i) st = w0->Idle(50);
  char now_id[24], joined_id[24];
  std::snprintf(now_id, sizeof(now_id), "%016llx", static_cast<unsigned long long>(again.shard().incarnation()));
  std::snprintf(joined_id, sizeof(joined_id), "%016llx", static_cast<unsigned long long>(joined));
  EXPECT_EQ(st.message(), "[worker 0] server shard 0 at " + endpoint + " restarted (new process, start id " + now_id +
                              "; this worker joined " + joined_id + ") and holds none of the job's tables; resume the job from a checkpoint (start every "
                              "server and worker again, the workers with --resume_from=CHECKPOINT_DIR; a job without "
                              "checkpoint.dir starts over)");
  JobSession(w0.get()).Abort("worker 0 failed: " + st.message(), 500);
  const Status ended = again.WaitForExit(5000);
  EXPECT_EQ(ended.code(), Status::Code::kUnavailable) << ended.ToString();
  EXPECT_EQ(ended.message(), "[server 0] job aborted: worker 0 failed: " + st.message() +
                                 " (this server, process start id " + now_id +
                                 ", replaced the one worker 0 had joined, start id " + joined_id + ")");
}

}  // namespace
}  // namespace tether
