// 16-bit wire encodings end to end (core/wire_codec.h): real ServerShards on
// 127.0.0.1 in threads and a WorkerClient. A BF16 or FP16 table's pushes
// reach the shard as the rounded gradients plus their residuals, the shard
// keeps float32, and pulls come back rounded: the frames are half of
// float32's, counted per table and direction.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/wire_codec.h"
#include "server/server.h"
#include "tests/testing/cluster.h"
#include "worker/client/client.h"
#include "worker/client/job_session.h"

namespace tether {
namespace {

JobConfig Job(int servers) {
  JobConfig c;
  c.set_name("wire-test");
  c.mutable_cluster()->set_num_servers(servers);
  c.mutable_cluster()->set_num_workers(1);
  c.mutable_cluster()->set_idle_timeout_ms(60000);
  c.mutable_cluster()->set_startup_timeout_ms(60000);
  c.mutable_cluster()->set_worker_timeout_ms(60000);
  c.mutable_consistency()->set_cache(false);
  return c;
}

TableSpec SumTable(uint32_t id, WireEncoding wire, bool dense) {
  TableSpec t;
  t.set_id(id);
  t.set_name("t" + std::to_string(id));
  t.set_kind(dense ? TableSpec::DENSE : TableSpec::ROW);
  if (dense) t.set_size(10);
  else t.set_dim(4);
  t.mutable_init()->set_kind(TableInitializer::ZEROS);
  t.mutable_optimizer()->set_type(SUM);
  t.mutable_consistency()->set_cache(false);
  if (wire != FP32) {
    t.set_pull_wire(wire);
    t.set_push_wire(wire);
  }
  return t;
}

struct Result {
  std::vector<float> rows, dense;  // pulled after the pushes
  ClientStats stats;
};

// 200 pushes of 1.001 to every value of 3 rows and of a dense table of 10,
// then a pull of both.
Result RunJob(int servers, WireEncoding wire, bool feedback) {
  const JobConfig c = Job(servers);
  std::vector<std::unique_ptr<testing::ShardThread>> shards;
  std::vector<std::string> endpoints;
  for (int s = 0; s < servers; ++s) {
    shards.push_back(std::make_unique<testing::ShardThread>(c, s));
    endpoints.push_back(shards.back()->endpoint());
  }
  ClientOptions o;
  o.servers = endpoints;
  o.job_id = JobId(c);
  o.request_timeout_ms = 20000;
  o.tables = {SumTable(0, wire, false), SumTable(1, wire, true)};
  o.error_feedback = {feedback, feedback};
  Result r;
  auto client = testing::ConnectClient(o);
  if (client == nullptr) return r;
  const std::vector<uint64_t> keys = {3, 17, 1000};
  const std::vector<float> g(12, 1.001f), d(10, 1.001f);
  for (int k = 0; k < 200; ++k) {
    client->PushRows(0, keys, g.data());
    client->PushDense(1, d.data());
    EXPECT_TRUE(client->WaitAll().ok());
  }
  r.rows.assign(12, 0.0f);
  r.dense.assign(10, 0.0f);
  EXPECT_TRUE(client->PullRows(0, keys, r.rows.data()).Wait().ok());
  EXPECT_TRUE(client->PullDense(1, r.dense.data()).Wait().ok());
  r.stats = client->stats();
  EXPECT_TRUE(JobSession(client.get()).Bye().ok());
  for (auto& s : shards) EXPECT_TRUE(s->WaitForExit(10000).ok());
  return r;
}

TEST(WireTest, HalfWidthPushesWithErrorFeedbackSumLikeFloat32) {
  for (const int servers : {1, 2}) {
    for (const WireEncoding wire : {BF16, FP16}) {
      const Result r = RunJob(servers, wire, /*feedback=*/true);
      ASSERT_EQ(r.rows.size(), 12u);
      // Σ of 200 × 1.001 = 200.2; the shard's sum is off by at most one
      // final rounding, and the pull rounds once more (bf16 ulp at 200: 1;
      // fp16: 0.125).
      const float tol = wire == BF16 ? 1.0f : 0.125f;
      for (float v : r.rows) EXPECT_NEAR(v, 200.2f, tol) << WireEncodingName(wire) << " servers " << servers;
      for (float v : r.dense) EXPECT_NEAR(v, 200.2f, tol) << WireEncodingName(wire) << " servers " << servers;
    }
  }
}

TEST(WireTest, WithoutErrorFeedbackBf16LosesTheRounding) {
  const Result r = RunJob(1, BF16, /*feedback=*/false);
  // bf16(1.001) = 1: every push loses 0.001; the shard holds 200.
  for (float v : r.rows) EXPECT_EQ(v, 200.0f);
}

TEST(WireTest, FramesAreHalfOfFloat32) {
  const Result half = RunJob(1, BF16, true);
  const Result full = RunJob(1, FP32, true);
  ASSERT_EQ(half.stats.wire.size(), 2u);
  ASSERT_EQ(full.stats.wire.size(), 2u);
  for (size_t t = 0; t < 2; ++t) {
    const TableWireBytes& h = half.stats.wire[t];
    const TableWireBytes& f = full.stats.wire[t];
    EXPECT_EQ(h.sent.messages, f.sent.messages);
    EXPECT_EQ(2 * h.sent.value_bytes, f.sent.value_bytes) << t;
    EXPECT_EQ(h.sent.fp32_value_bytes, f.sent.value_bytes) << t;
    EXPECT_EQ(2 * h.received.value_bytes, f.received.value_bytes) << t;
    EXPECT_EQ(f.sent.ratio(), 1.0);
  }
  // Row pushes: 200 × (3 keys × 8 bytes + 12 values), then the pull's keys.
  EXPECT_EQ(full.stats.wire[0].sent.bytes, 200u * (24 + 48) + 24);
  EXPECT_EQ(half.stats.wire[0].sent.bytes, 200u * (24 + 24) + 24);
  EXPECT_DOUBLE_EQ(half.stats.wire[1].sent.ratio(), 2.0);  // dense: values only
}

}  // namespace
}  // namespace tether
