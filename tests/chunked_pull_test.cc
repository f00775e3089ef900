// A shard's large float32 pull replies travel to the worker in chunks over
// tcp:// (each chunk's rows copied just before it is queued) and whole over
// inproc://: real ServerShards in threads and a WorkerClient. Rows (by keys
// and by a key list) and dense slices pulled over either transport are the
// values pushed, bit for bit, and the client counts the same bytes
// received; a push made after a pull does not reach that pull's reply.
// Over tcp://, the values of dense slices and of rows that land in the
// order asked are written straight into the caller's buffer, chunk by
// chunk; rows scattered by position are joined first.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/wire_limits.h"
#include "server/server.h"
#include "tests/testing/cluster.h"
#include "worker/client/client.h"
#include "worker/client/job_session.h"

namespace tether {
namespace {

constexpr uint32_t kDim = 64;
constexpr uint64_t kRows = 10000;      // 2.56 MB of rows: 3 chunks on one shard
constexpr uint64_t kDense = 600000;    // 2.4 MB: over one chunk on each of two shards

JobConfig Job(int servers) {
  JobConfig c;
  c.set_name("chunked-pull-test");
  c.mutable_cluster()->set_num_servers(servers);
  c.mutable_cluster()->set_num_workers(1);
  c.mutable_cluster()->set_idle_timeout_ms(60000);
  c.mutable_cluster()->set_startup_timeout_ms(60000);
  c.mutable_cluster()->set_worker_timeout_ms(60000);
  c.mutable_consistency()->set_cache(false);
  return c;
}

TableSpec SumTable(uint32_t id, bool dense) {
  TableSpec t;
  t.set_id(id);
  t.set_name("t" + std::to_string(id));
  t.set_kind(dense ? TableSpec::DENSE : TableSpec::ROW);
  if (dense) {
    t.set_size(kDense);
  } else {
    t.set_dim(kDim);
  }
  t.mutable_init()->set_kind(TableInitializer::ZEROS);
  t.mutable_optimizer()->set_type(SUM);
  t.mutable_consistency()->set_cache(false);
  return t;
}

struct Result {
  std::vector<float> by_keys, by_list, dense, after;
  uint64_t bytes_received = 0, bytes_placed = 0;
};

// Pushes g once to every row and the dense table, pulls the rows twice
// (keys, then the key list the first defined) and the dense table, pushes
// again and pulls the dense table once more.
Result RunJob(int servers, bool tcp, const std::vector<uint64_t>& keys, const std::vector<float>& rows,
              const std::vector<float>& dense) {
  const JobConfig c = Job(servers);
  zmq::context_t ctx;
  std::vector<std::unique_ptr<testing::ShardThread>> shards;
  std::vector<std::string> endpoints;
  for (int s = 0; s < servers; ++s) {
    testing::ShardOptions so;
    so.context = &ctx;
    if (!tcp) so.endpoint = "inproc://chunked-pull-" + std::to_string(servers) + "-" + std::to_string(s);
    shards.push_back(std::make_unique<testing::ShardThread>(c, s, so));
    endpoints.push_back(shards.back()->endpoint());
  }
  ClientOptions o;
  o.servers = endpoints;
  o.job_id = JobId(c);
  o.request_timeout_ms = 20000;
  o.context = &ctx;
  o.tables = {SumTable(0, false), SumTable(1, true)};
  Result r;
  auto client = testing::ConnectClient(o);
  if (client == nullptr) return r;
  client->PushRows(0, keys, rows.data());
  client->PushDense(1, dense.data());
  EXPECT_TRUE(client->WaitAll().ok());
  r.by_keys.assign(rows.size(), 0.0f);
  r.by_list.assign(rows.size(), 0.0f);
  r.dense.assign(kDense, 0.0f);
  r.after.assign(kDense, 0.0f);
  EXPECT_TRUE(client->PullRows(0, keys, r.by_keys.data()).Wait().ok());
  EXPECT_TRUE(client->PullRows(0, keys, r.by_list.data()).Wait().ok());
  RequestHandle pull = client->PullDense(1, r.dense.data());
  client->PushDense(1, dense.data());  // after the pull in the shard's order
  EXPECT_TRUE(pull.Wait().ok());
  EXPECT_TRUE(client->WaitAll().ok());
  EXPECT_TRUE(client->PullDense(1, r.after.data()).Wait().ok());
  r.bytes_received = client->stats().bytes_received;
  r.bytes_placed = client->stats().bytes_placed;
  EXPECT_TRUE(JobSession(client.get()).Bye().ok());
  for (auto& s : shards) EXPECT_TRUE(s->WaitForExit(10000).ok());
  return r;
}

TEST(ChunkedPullTest, LargeFloat32PullsArriveAsPushedOverTcpAndInproc) {
  std::vector<uint64_t> keys(kRows);
  for (uint64_t i = 0; i < kRows; ++i) keys[i] = 3 + 7 * i;
  std::vector<float> rows(kRows * kDim), dense(kDense), twice(kDense);
  for (uint64_t i = 0; i < rows.size(); ++i) rows[i] = 0.001f * static_cast<float>(i % 9973) - 3.0f;
  for (uint64_t i = 0; i < kDense; ++i) {
    dense[i] = 0.5f * static_cast<float>(i % 1021) + 0.25f;
    twice[i] = dense[i] + dense[i];
  }
  ASSERT_GT(kDense * sizeof(float) / 2, kReplyChunkBytes);
  for (const int servers : {1, 2}) {
    const Result tcp = RunJob(servers, true, keys, rows, dense);
    const Result inproc = RunJob(servers, false, keys, rows, dense);
    for (const Result* r : {&tcp, &inproc}) {
      EXPECT_EQ(r->by_keys, rows) << "servers " << servers;
      EXPECT_EQ(r->by_list, rows) << "servers " << servers;
      EXPECT_EQ(r->dense, dense) << "servers " << servers;
      EXPECT_EQ(r->after, twice) << "servers " << servers;
    }
    EXPECT_EQ(tcp.bytes_received, 2 * rows.size() * sizeof(float) + 2 * kDense * sizeof(float));
    EXPECT_EQ(tcp.bytes_received, inproc.bytes_received) << "servers " << servers;
    // One shard: every reply is a dense slice or rows in the order asked,
    // written straight into the caller's buffer as its chunks came. Two:
    // the dense slices only (each shard's rows scatter by position, and
    // are joined first). Nothing is chunked over inproc://.
    const uint64_t dense_bytes = 2 * kDense * sizeof(float);
    EXPECT_EQ(tcp.bytes_placed, servers == 1 ? tcp.bytes_received : dense_bytes) << "servers " << servers;
    EXPECT_EQ(inproc.bytes_placed, 0u) << "servers " << servers;
  }
}

}  // namespace
}  // namespace tether
