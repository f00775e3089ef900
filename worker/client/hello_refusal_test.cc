// WorkerClient::Connect when one shard goes and another refuses: the
// refusal is the reason given. Two ROUTER sockets on 127.0.0.1 (port 0)
// play shards 0 and 1 on the test's thread while Connect runs on another;
// closing shard 0's socket is its process ending (as a shard does when
// another worker told it why the job cannot run), and shard 1 then
// refuses this worker's HELLO. Every wait polls with a bound.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <zmq.hpp>

#include "core/net/message.h"
#include "worker/client/client.h"

namespace tether {
namespace {

zmq::socket_t Bind(zmq::context_t& ctx, std::string* endpoint) {
  zmq::socket_t s(ctx, zmq::socket_type::router);
  s.set(zmq::sockopt::linger, 0);
  s.bind("tcp://127.0.0.1:0");
  *endpoint = s.get(zmq::sockopt::last_endpoint);
  return s;
}

// The next message of `type` on `router` within `ms` (others skipped);
// false when none came.
bool Next(zmq::socket_t& router, MessageType type, int ms, std::string* identity, MessageHeader* h) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (std::chrono::steady_clock::now() < deadline) {
    zmq::pollitem_t item = {router.handle(), 0, ZMQ_POLLIN, 0};
    if (zmq::poll(&item, 1, std::chrono::milliseconds(20)) != 1) continue;
    std::vector<zmq::message_t> frames;
    zmq::message_t f;
    do {
      if (!router.recv(f, zmq::recv_flags::none)) break;
      frames.push_back(std::move(f));
      f = zmq::message_t();
    } while (frames.back().more());
    if (frames.size() != 4 || !h->ParseFromString(frames[1].to_string())) continue;
    if (h->type() != type) continue;
    *identity = frames[0].to_string();
    return true;
  }
  return false;
}

TEST(HelloRefusalTest, AShardThatWentDoesNotHideAnotherShardsRefusal) {
  zmq::context_t ctx;
  std::string e0, e1;
  zmq::socket_t shard0 = Bind(ctx, &e0), shard1 = Bind(ctx, &e1);
  ClientOptions o;
  o.servers = {e0, e1};
  o.request_timeout_ms = 10000;
  o.liveness_timeout_ms = 5000;
  Status connected;
  std::thread worker([&] {
    StatusOr<std::unique_ptr<WorkerClient>> c = WorkerClient::Connect(o);
    connected = c.ok() ? Status::OK() : c.status();
  });
  std::string id0, id1;
  MessageHeader hello0, hello1;
  ASSERT_TRUE(Next(shard0, HELLO, 5000, &id0, &hello0));
  ASSERT_TRUE(Next(shard1, HELLO, 5000, &id1, &hello1));
  shard0.close();  // shard 0 ends without answering
  // A worker that took shard 0's end for the reason would abort the job
  // with it now; this one waits for shard 1's answer. (Polled with a
  // bound: the refusal goes out either way.)
  std::string ignored;
  MessageHeader abort;
  EXPECT_FALSE(Next(shard1, ABORT, 300, &ignored, &abort)) << abort.job_abort().reason();
  Message refusal;
  refusal.header.set_type(ERROR_REPLY);
  refusal.header.set_request_id(hello1.request_id());
  refusal.header.mutable_error_reply()->set_error("cannot resume: shard-1.tables is corrupt");
  ASSERT_TRUE(SendMessage(shard1, &refusal, &id1, "worker").ok());
  worker.join();
  EXPECT_EQ(connected.code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(connected.message(),
            "server " + e1 + " (listed as shard 1) refused to pair: cannot resume: shard-1.tables is corrupt");
}

}  // namespace
}  // namespace tether
