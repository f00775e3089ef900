// Evaluation pulls (WorkerClient::PullRowsIfPresent) in slices: through one
// and two real shards, a pull of 100 keys, half of them held, with slices of 10 rows
// (ClientOptions::eval_pull_bytes) reads every held row exactly and every
// other key as zeros, creates nothing, sends one message per slice and shard
// (no reply holds more than a slice), has every slice but the last answered
// when the call returns, and stops at the first slice a shard refuses.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "core/partition.h"
#include "worker/client/client.h"
#include "worker/client/job_session.h"
#include "tests/testing/cluster.h"

namespace tether {
namespace {

constexpr uint32_t kW1 = 0;
constexpr int kDim = 16;
constexpr uint64_t kSliceRows = 10;

// w1 (dim kDim) starts at zero and takes pushed gradients as they are (SUM),
// so a held row reads exactly what was pushed; no cache, no clock bound.
JobConfig ExactJob(int shards) {
  JobConfig c = testing::SgdJob(shards, 1, 1000, 3, kDim, 1.0f, 60000);
  c.mutable_optimizer()->set_type(SUM);
  c.mutable_consistency()->set_staleness(-1);
  c.mutable_consistency()->set_model(ASP);
  c.mutable_consistency()->set_cache(false);
  TableConfig* w1 = c.add_table();
  w1->set_name("w1");
  w1->set_init(INIT_ZEROS);
  return c;
}

// Messages a pull of `keys` in slices of kSliceRows sends: per slice, one
// per shard that owns one of its keys.
uint64_t SliceMessages(const std::vector<uint64_t>& keys, size_t slices, int shards) {
  uint64_t messages = 0;
  for (size_t b = 0; b < keys.size() && b / kSliceRows < slices; b += kSliceRows) {
    const std::vector<uint64_t> part(keys.begin() + b, keys.begin() + std::min(keys.size(), b + kSliceRows));
    std::vector<std::vector<uint64_t>> per_shard;
    std::vector<std::vector<uint32_t>> pos;
    SplitKeysByShard(part, shards, &per_shard, &pos);
    for (const auto& s : per_shard) messages += s.empty() ? 0 : 1;
  }
  return messages;
}

// One shard (a reply's rows land as one block) and two (scattered by
// position).
void CheckSlicedPull(int shards) {
  SCOPED_TRACE(std::to_string(shards) + " shard(s)");
  testing::InProcessCluster cluster(ExactJob(shards));
  ClientOptions o = cluster.Options(0);
  o.eval_pull_bytes = kSliceRows * kDim * sizeof(float);
  auto w = testing::ConnectClient(o);
  ASSERT_TRUE(w);
  // Odd keys 1 .. 99 are held, with a gradient of their own.
  std::vector<uint64_t> held, keys;
  for (uint64_t k = 0; k < 100; ++k) (k % 2 == 1 ? held : keys).push_back(k);
  keys.insert(keys.end(), held.begin(), held.end());
  std::sort(keys.begin(), keys.end());
  std::vector<float> grad(held.size() * kDim);
  for (size_t i = 0; i < grad.size(); ++i) grad[i] = 0.5f + static_cast<float>(i);
  w->PushRows(kW1, held, grad.data());
  ASSERT_TRUE(w->WaitAll().ok());

  const uint64_t pulls_before = w->stats().pulls, rows_before = w->stats().rows_pulled;
  std::vector<float> got(keys.size() * kDim, -1.0f);
  RequestHandle h = w->PullRowsIfPresent(kW1, keys, got.data());
  // The call waited for slices 1 .. 9: their rows are in place already.
  std::vector<float> want(keys.size() * kDim, 0.0f);
  for (size_t i = 0; i < keys.size(); ++i)
    if (keys[i] % 2 == 1)
      for (int j = 0; j < kDim; ++j) want[i * kDim + j] = grad[(keys[i] / 2) * kDim + j];
  const size_t answered = (keys.size() - kSliceRows) * kDim;
  EXPECT_EQ(std::vector<float>(got.begin(), got.begin() + answered),
            std::vector<float>(want.begin(), want.begin() + answered));
  ASSERT_TRUE(h.Wait().ok());
  EXPECT_EQ(got, want);
  EXPECT_EQ(w->stats().pulls - pulls_before, SliceMessages(keys, 10, shards));
  EXPECT_EQ(w->stats().rows_pulled - rows_before, keys.size());
  // Nothing was created: the shards hold the 50 pushed rows only (read
  // after a reply that follows every request counted).
  uint64_t rows = 0;
  for (int s = 0; s < shards; ++s) rows += cluster.server(s).table(kW1).num_rows();
  EXPECT_EQ(rows, held.size());

  // A slice a shard refuses (a repeated key in the second slice) fails the
  // handle with the shard's reason; the slices after it are not sent.
  std::vector<uint64_t> bad = keys;
  bad[kSliceRows + 1] = bad[kSliceRows];
  const uint64_t before_bad = w->stats().pulls;
  const Status st = w->PullRowsIfPresent(kW1, bad, got.data()).Wait();
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("keys not sorted and unique"), std::string::npos) << st.ToString();
  EXPECT_EQ(w->stats().pulls - before_bad, SliceMessages(bad, 2, shards)) << st.ToString();
  ASSERT_TRUE(JobSession(w.get()).Bye().ok());
}

TEST(EvalPullTest, SlicesReadHeldRowsAndZerosOneSliceAtATime) {
  CheckSlicedPull(1);
  CheckSlicedPull(2);
}

}  // namespace
}  // namespace tether
