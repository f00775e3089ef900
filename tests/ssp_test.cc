// Multi-rank tests in one process: a real ServerShard on 127.0.0.1 (port 0)
// in a thread, and WorkerClients standing in for workers.
#include <gtest/gtest.h>

#include <thread>

#include <zmq.hpp>

#include "core/net/message.h"
#include "server/server.h"
#include "worker/client/client.h"
#include "worker/client/job_session.h"
#include "worker/models/model_registry.h"
#include "worker/trainer.h"
#include "tests/testing/cluster.h"

namespace tether {
namespace {

constexpr uint32_t kW1 = 0;

JobConfig SmallJob(int workers, int64_t staleness) {
  JobConfig c = testing::SgdJob(/*servers=*/1, workers, /*features=*/10, /*labels=*/3, /*hidden=*/2,
                                /*learning_rate=*/1.0f, /*timeout_ms=*/20000);
  c.mutable_consistency()->set_staleness(staleness);
  return c;
}

TEST(SspTest, FastWorkerBlocksExactlyPastSlowestPlusStalenessAndIsReleased) {
  const int64_t s = 2;
  JobConfig c = SmallJob(2, s);
  testing::InProcessCluster cluster(c);
  auto fast = cluster.Connect(0);
  auto slow = cluster.Connect(1);
  ASSERT_TRUE(fast && slow);
  const std::vector<uint64_t> key = {5};
  float initial[2], row[2];
  ASSERT_TRUE(fast->PullRows(kW1, key, initial).Wait().ok());

  // The slow worker pushes −1 (SGD, lr 1 → +1) to key 5 during its clock 0.
  const float grad[2] = {-1.0f, -1.0f};
  slow->PushRows(kW1, key, grad);
  ASSERT_TRUE(slow->WaitAll().ok());

  // The fast worker clocks ahead; its pulls at clocks 1..s are answered at once.
  for (int64_t c_fast = 1; c_fast <= s; ++c_fast) {
    ASSERT_TRUE(fast->Clock().ok());
    ASSERT_EQ(fast->clock(), c_fast);
    EXPECT_TRUE(fast->PullRows(kW1, key, row).Wait(2000).ok()) << "clock " << c_fast;
  }
  // At clock s + 1 = slowest (0) + s + 1 the pull must wait.
  ASSERT_TRUE(fast->Clock().ok());
  const RequestHandle blocked = fast->PullRows(kW1, key, row);
  Status st = blocked.Wait(500);
  EXPECT_EQ(st.code(), Status::Code::kDeadlineExceeded) << st.ToString();

  // The slow worker clocks: min clock 1 ≥ 3 − 2, the pull is released and
  // includes the slow worker's clock-0 update.
  ASSERT_TRUE(slow->Clock().ok());
  st = blocked.Wait(5000);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_FLOAT_EQ(row[0], initial[0] + 1.0f);
  EXPECT_FLOAT_EQ(row[1], initial[1] + 1.0f);
  EXPECT_EQ(cluster.server(0).stats().deferred_pulls, 1u);
  ASSERT_TRUE(JobSession(fast.get()).Bye().ok());
  ASSERT_TRUE(JobSession(slow.get()).Bye().ok());
}

TEST(SspTest, ReadMyWritesAndAspNeverBlocks) {
  JobConfig c = SmallJob(2, -1);
  testing::InProcessCluster cluster(c);
  auto w = cluster.Connect(0);
  ASSERT_TRUE(w);
  const std::vector<uint64_t> keys = {1, 2, 3};
  std::vector<float> before(6), after(6), g(6, 0.5f);
  ASSERT_TRUE(w->PullRows(kW1, keys, before.data()).Wait().ok());
  w->PushRows(kW1, keys, g.data());
  // Pull right after the push, without waiting for the push reply.
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(w->Clock().ok());
  ASSERT_TRUE(w->PullRows(kW1, keys, after.data()).Wait(2000).ok()) << "ASP must not block";
  for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(after[i], before[i] - 0.5f);
  ASSERT_TRUE(JobSession(w.get()).Bye().ok());
}

// PullRowsAt (train.pipeline's read ahead): rows land at the rows named,
// and a read for a later clock waits for that clock's bound, not the
// current one's.
TEST(SspTest, PullRowsAtLandsAtItsRowsAndReadsAheadUnderTheLaterClocksBound) {
  JobConfig c = SmallJob(2, 1);
  testing::InProcessCluster cluster(c);
  auto fast = cluster.Connect(0);
  auto slow = cluster.Connect(1);
  ASSERT_TRUE(fast && slow);
  const std::vector<uint64_t> keys = {1, 2, 3};
  std::vector<float> plain(6);
  ASSERT_TRUE(fast->PullRows(kW1, keys, plain.data()).Wait().ok());  // and keeps keys 1..3 in the cache

  // Now, at clock 0: key i lands at row out_rows[i] of 5 (dim 2); rows 1
  // and 3 are not written. Keys 1..3 are cache hits, key 4 a miss.
  const std::vector<uint64_t> more = {1, 2, 3, 4};
  const uint32_t out_rows[] = {4, 0, 2, 3};
  std::vector<float> out(10, -7.0f);
  ASSERT_TRUE(fast->PullRowsAt(kW1, {1, 2, 3}, out_rows, out.data()).Wait(2000).ok());
  for (int d = 0; d < 2; ++d) {
    EXPECT_EQ(out[4 * 2 + d], plain[0 * 2 + d]);
    EXPECT_EQ(out[0 * 2 + d], plain[1 * 2 + d]);
    EXPECT_EQ(out[2 * 2 + d], plain[2 * 2 + d]);
    EXPECT_EQ(out[1 * 2 + d], -7.0f);
    EXPECT_EQ(out[3 * 2 + d], -7.0f);
  }
  std::vector<float> mixed(10, -7.0f);
  ASSERT_TRUE(fast->PullRowsAt(kW1, more, out_rows, mixed.data()).Wait(2000).ok());
  std::vector<float> key4(2);
  ASSERT_TRUE(fast->PullRows(kW1, {4}, key4.data()).Wait(2000).ok());
  EXPECT_EQ(mixed[3 * 2], key4[0]);
  EXPECT_EQ(mixed[3 * 2 + 1], key4[1]);
  EXPECT_EQ(mixed[4 * 2], plain[0]);

  // Ahead, for clock 2 (bound s = 1: min clock ≥ 1) while both are at clock
  // 0: the shard holds it, though a read at clock 0 or 1 would be answered.
  // Key 5 is not cached, so the read goes to the shard.
  std::vector<float> ahead(4, -7.0f);
  const uint32_t ahead_rows[] = {1};
  const RequestHandle held = fast->PullRowsAt(kW1, {5}, ahead_rows, ahead.data(), /*read_clock=*/2);
  EXPECT_EQ(held.Wait(500).code(), Status::Code::kDeadlineExceeded);
  // The slow worker's clock-0 update of key 5, then both clock: min clock 1.
  float before5[2];
  ASSERT_TRUE(slow->PullRows(kW1, {5}, before5).Wait().ok());
  const float grad[2] = {-1.0f, -1.0f};
  slow->PushRows(kW1, {5}, grad);
  ASSERT_TRUE(slow->Clock().ok());
  EXPECT_EQ(held.Wait(300).code(), Status::Code::kDeadlineExceeded);  // the fast worker is still at 0
  ASSERT_TRUE(fast->Clock().ok());
  const Status st = held.Wait(5000);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_FLOAT_EQ(ahead[2], before5[0] + 1.0f);
  EXPECT_FLOAT_EQ(ahead[3], before5[1] + 1.0f);
  EXPECT_EQ(ahead[0], -7.0f);
  EXPECT_EQ(cluster.server(0).stats().deferred_pulls, 1u);
  ASSERT_TRUE(JobSession(fast.get()).Bye().ok());
  ASSERT_TRUE(JobSession(slow.get()).Bye().ok());
}

// train.pipeline's read versions: a read ahead (PullRowsAt for a clock,
// after StartReadAhead) does not tag the pushes sent before UseReadAhead,
// which carry the version of the read their gradients came from; after it
// the pushes carry the read ahead's. The shard's τ = its table version −
// the push's, one version per applied push.
TEST(SspTest, ReadAheadVersionsTagPushesOnlyOnceUsed) {
  JobConfig c = SmallJob(1, 2);
  testing::InProcessCluster cluster(c);
  auto w = cluster.Connect(0);
  ASSERT_TRUE(w);
  float row[2], ahead[2];
  const float g[2] = {0.5f, 0.5f};
  const uint32_t at[] = {0};
  ASSERT_TRUE(w->PullRows(kW1, {1}, row).Wait().ok());  // the current read, at version 0
  w->PushRows(kW1, {1}, g);                             // τ 0 - 0 = 0; version 1
  ASSERT_TRUE(w->WaitAll().ok());
  w->StartReadAhead(kW1);
  ASSERT_TRUE(w->PullRowsAt(kW1, {2}, at, ahead, /*read_clock=*/1).Wait(2000).ok());  // read ahead at version 1
  w->PushRows(kW1, {1}, g);  // still from the read at 0: τ 1 - 0 = 1; version 2
  w->PushRows(kW1, {3}, g);  // τ 2 - 0 = 2; version 3
  ASSERT_TRUE(w->WaitAll().ok());
  w->UseReadAhead(kW1);
  w->PushRows(kW1, {2}, g);  // from the read ahead at 1: τ 3 - 1 = 2; version 4
  ASSERT_TRUE(w->WaitAll().ok());
  const StalenessHistogram& tau = cluster.server(0).stats().staleness;
  EXPECT_EQ(tau.pushes, 4u);
  EXPECT_EQ(tau.count[0], 1u);
  EXPECT_EQ(tau.count[1], 1u);
  EXPECT_EQ(tau.count[2], 2u);
  EXPECT_EQ(tau.sum, 5u);
  EXPECT_EQ(tau.max, 2u);
  ASSERT_TRUE(JobSession(w.get()).Bye().ok());
}

TEST(SspTest, DenseTableIsSplitAcrossShardsAndSummedOnPush) {
  JobConfig c = SmallJob(1, 0);
  testing::InProcessCluster cluster(c);
  auto w = cluster.Connect(0);
  ASSERT_TRUE(w);
  float b1[2] = {7, 7};
  ASSERT_TRUE(w->PullDense(1, b1).Wait().ok());
  EXPECT_EQ(b1[0], 0.0f);  // b1 starts at zero
  const float g[2] = {0.25f, -0.5f};
  w->PushDense(1, g);
  ASSERT_TRUE(w->PullDense(1, b1).Wait().ok());
  EXPECT_FLOAT_EQ(b1[0], -0.25f);
  EXPECT_FLOAT_EQ(b1[1], 0.5f);
  ASSERT_TRUE(JobSession(w.get()).Bye().ok());
}

TEST(SspTest, ServerRefusesWorkerWithDifferentStalenessNamingBoth) {
  JobConfig c = SmallJob(1, 2);
  testing::InProcessCluster cluster(c);
  JobConfig other = c;
  other.mutable_consistency()->set_staleness(5);
  const Status refused = testing::HelloRefusal(ClientOptionsFor(other, 0, cluster.endpoints()));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(refused.message().find("5 (SSP)"), std::string::npos) << refused.message();
  EXPECT_NE(refused.message().find("2 (SSP)"), std::string::npos) << refused.message();
}

TEST(SspTest, MalformedMessagesGetErrorRepliesAndServerKeepsServing) {
  JobConfig c = SmallJob(2, -1);
  testing::InProcessCluster cluster(c);
  auto good = cluster.Connect(0);
  ASSERT_TRUE(good);
  const std::vector<uint64_t> key = {4};
  float ref[2];
  ASSERT_TRUE(good->PullRows(kW1, key, ref).Wait().ok());

  zmq::context_t ctx;
  zmq::socket_t bad(ctx, zmq::socket_type::dealer);
  bad.set(zmq::sockopt::linger, 0);
  bad.set(zmq::sockopt::rcvtimeo, 5000);
  bad.connect(cluster.endpoints()[0]);
  auto expect_error = [&](const std::string& what) -> std::string {
    zmq::message_t header, k, v;
    if (!bad.recv(header)) {
      ADD_FAILURE() << what << ": no reply";
      return "";
    }
    MessageHeader h;
    EXPECT_TRUE(h.ParseFromArray(header.data(), static_cast<int>(header.size())));
    EXPECT_EQ(h.type(), ERROR_REPLY) << what;
    while (header.more() && bad.recv(k) && k.more()) {}
    return h.error_reply().error();
  };
  // Garbage bytes in one frame.
  bad.send(zmq::str_buffer("garbage"), zmq::send_flags::none);
  expect_error("garbage");
  // Header says 3 keys, keys frame holds 2.
  {
    MessageHeader h;
    h.set_type(PULL);
    h.set_sender_rank(1);
    h.set_num_keys(3);
    h.set_value_dim(2);
    std::string hb = h.SerializeAsString();
    uint64_t keys[2] = {1, 2};
    bad.send(zmq::buffer(hb), zmq::send_flags::sndmore);
    bad.send(zmq::buffer(keys, sizeof(keys)), zmq::send_flags::sndmore);
    bad.send(zmq::message_t(), zmq::send_flags::none);
    EXPECT_NE(expect_error("count").find("header says 3 keys"), std::string::npos);
  }
  // Unknown table; unsorted keys.
  for (int variant = 0; variant < 2; ++variant) {
    MessageHeader h;
    h.set_type(PULL);
    h.set_sender_rank(1);
    h.set_table_id(variant == 0 ? 99 : 0);
    h.set_num_keys(2);
    h.set_value_dim(2);
    std::string hb = h.SerializeAsString();
    uint64_t keys[2] = {9, 3};
    bad.send(zmq::buffer(hb), zmq::send_flags::sndmore);
    bad.send(zmq::buffer(keys, sizeof(keys)), zmq::send_flags::sndmore);
    bad.send(zmq::message_t(), zmq::send_flags::none);
    std::string err = expect_error("variant");
    EXPECT_NE(err.find(variant == 0 ? "unknown table id 99" : "not sorted"), std::string::npos) << err;
  }
  float again[2];
  ASSERT_TRUE(good->PullRows(kW1, key, again).Wait().ok());
  EXPECT_EQ(again[0], ref[0]);
  EXPECT_EQ(again[1], ref[1]);
  EXPECT_EQ(cluster.server(0).stats().bad_messages, 4u);
}

}  // namespace
}  // namespace tether
