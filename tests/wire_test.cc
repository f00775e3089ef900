// 16-bit wire encodings end to end (core/wire_codec.h): real ServerShards on
// 127.0.0.1 in threads and a WorkerClient. A BF16 or FP16 table's pushes
// reach the shard as the rounded gradients plus their residuals, the shard
// keeps float32, and pulls come back rounded: the frames are half of
// float32's, counted per table and direction.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
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

// Tables of one shape in each pull encoding, pushed the same float32
// gradients (push wire FP32: the shards hold the same values).
std::vector<TableSpec> PullWireTables(uint32_t dim, bool dense, bool cache) {
  std::vector<TableSpec> out;
  for (const WireEncoding wire : {FP32, BF16, FP16}) {
    TableSpec t = SumTable(static_cast<uint32_t>(out.size()), FP32, dense);
    if (dense) t.set_size(37);
    else t.set_dim(dim);
    t.set_pull_wire(wire);
    t.mutable_consistency()->set_cache(cache);
    t.mutable_consistency()->set_refresh_on_push(false);  // the first pull after the pushes goes to the shards
    out.push_back(t);
  }
  return out;
}

// Gradients of every size the codecs treat apart: FP16 subnormals, values
// FP16 saturates (70000) and ties.
std::vector<float> Gradients(size_t n) {
  std::vector<float> g(n);
  for (size_t i = 0; i < n; ++i)
    g[i] = std::sin(0.77f * static_cast<float>(i)) * std::pow(10.0f, static_cast<float>(i % 11) - 6.0f);
  if (n > 5) g[5] = 70000.0f;
  if (n > 2) g[2] = 1.0f + 0x1p-8f;  // a bf16 tie
  return g;
}

float Rounded(float v, WireEncoding e) {
  bool sat = false;
  return e == BF16 ? Bf16ToFloat(FloatToBf16(v, &sat)) : Fp16ToFloat(FloatToFp16(v, &sat));
}

uint32_t Bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof(x));
  return x;
}

// Every pull path (the shard narrowing rows of 16 floats and more straight
// from the table, narrower ones gathered first; on the worker, one shard:
// one block; two: rows scattered; the cache: widened once for both;
// PullRowsAt: rows at positions; dense slices) returns for a 16-bit table the float32 table's values rounded once,
// bit for bit, and leaves the caller's other rows alone.
void ExpectPullsRoundedOnce(int servers, uint32_t dim, bool dense, bool cache) {
  JobConfig c = Job(servers);
  c.mutable_consistency()->set_cache(cache);
  std::vector<std::unique_ptr<testing::ShardThread>> shards;
  ClientOptions o;
  for (int s = 0; s < servers; ++s) {
    shards.push_back(std::make_unique<testing::ShardThread>(c, s));
    o.servers.push_back(shards.back()->endpoint());
  }
  o.job_id = JobId(c);
  o.request_timeout_ms = 20000;
  o.tables = PullWireTables(dim, dense, cache);
  auto client = testing::ConnectClient(o);
  ASSERT_NE(client, nullptr);
  std::vector<uint64_t> keys;
  for (uint64_t k = 0; k < 41; ++k) keys.push_back(k * 7919 + 3);
  const size_t n = dense ? 37 : keys.size() * dim;
  const std::vector<float> g = Gradients(n);
  // Two rows made first: the shards' rows are not in key order, so a pull
  // reads them in several runs.
  const std::vector<uint64_t> first = {keys[20], keys[40]};
  const std::vector<float> g_first(2 * dim, 3.0e-3f);
  for (uint32_t t = 0; t < 3; ++t) {
    if (dense) {
      client->PushDense(t, g.data());
    } else {
      client->PushRows(t, first, g_first.data());
      client->PushRows(t, keys, g.data());
    }
  }
  ASSERT_TRUE(client->WaitAll().ok());
  // Twice: with the cache on, the second read is served from what the
  // first reply left there.
  for (int round = 0; round < 2; ++round) {
    std::vector<std::vector<float>> got(3, std::vector<float>(n, -7.0f));
    const uint64_t pulls = client->stats().pulls, cache_hits = client->stats().cache_hits;
    for (uint32_t t = 0; t < 3; ++t) {
      if (dense) ASSERT_TRUE(client->PullDense(t, got[t].data()).Wait().ok());
      else ASSERT_TRUE(client->PullRows(t, keys, got[t].data()).Wait().ok());
    }
    // Read from the shards the first time; with the cache, the second time
    // from what the replies left in it.
    const bool hits = cache && round == 1;
    EXPECT_EQ(client->stats().pulls - pulls, hits ? 0u : 3u * servers);
    EXPECT_EQ(client->stats().cache_hits - cache_hits, !hits ? 0u : (dense ? 3u * servers : 3u * keys.size()));
    for (uint32_t t = 1; t < 3; ++t) {
      const WireEncoding e = o.tables[t].pull_wire();
      for (size_t i = 0; i < n; ++i)
        ASSERT_EQ(Bits(got[t][i]), Bits(Rounded(got[0][i], e)))
            << WireEncodingName(e) << " value " << i << " servers " << servers << " dim " << dim << " round " << round;
    }
    if (dense) continue;
    // Rows at positions, reversed, in a buffer one row longer: the spare
    // row keeps its values.
    std::vector<uint32_t> at(keys.size());
    for (size_t i = 0; i < at.size(); ++i) at[i] = static_cast<uint32_t>(at.size() - i);
    for (uint32_t t = 1; t < 3; ++t) {
      std::vector<float> rows(n + dim, -7.0f);
      ASSERT_TRUE(client->PullRowsAt(t, keys, at.data(), rows.data(), -1).Wait().ok());
      for (uint32_t j = 0; j < dim; ++j) EXPECT_EQ(rows[j], -7.0f);
      for (size_t i = 0; i < keys.size(); ++i)
        for (uint32_t j = 0; j < dim; ++j)
          ASSERT_EQ(Bits(rows[size_t{at[i]} * dim + j]), Bits(got[t][i * dim + j])) << "row " << i << " col " << j;
    }
  }
  EXPECT_TRUE(JobSession(client.get()).Bye().ok());
  for (auto& s : shards) EXPECT_TRUE(s->WaitForExit(10000).ok());
}

TEST(WireTest, HalfWidthPullsAreTheFloat32ValuesRoundedOnce) {
  for (const int servers : {1, 2})
    for (const uint32_t dim : {1u, 3u, 16u, 17u})
      for (const bool cache : {false, true}) ExpectPullsRoundedOnce(servers, dim, /*dense=*/false, cache);
}

TEST(WireTest, HalfWidthDensePullsAreTheFloat32ValuesRoundedOnce) {
  for (const int servers : {1, 2})
    for (const bool cache : {false, true}) ExpectPullsRoundedOnce(servers, 1, /*dense=*/true, cache);
}

}  // namespace
}  // namespace tether
