#include "server/chunk_service.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace tether {
namespace {

DataOnDemandChunk Ask(uint64_t rows, uint64_t chunk, int64_t epochs, uint64_t seed = 7) {
  DataOnDemandChunk r;
  r.set_train_rows(rows);
  r.set_chunk_rows(chunk);
  r.set_epochs(epochs);
  r.set_seed(seed);
  return r;
}

DataOnDemandChunk Completing(DataOnDemandChunk r, const DataOnDemandChunk& done) {
  r.set_completed_id(done.id());
  r.set_completed_rows(static_cast<int64_t>(done.end() - done.begin()));
  return r;
}

TEST(ChunkServiceTest, InactiveUntilTheFirstRequest) {
  ChunkService s;
  EXPECT_FALSE(s.active());
  EXPECT_EQ(s.Leave(3), 0);
  ShardStats stats;
  s.FillStats(&stats);
  EXPECT_EQ(stats.chunks_dealt(), 0u);
  EXPECT_EQ(stats.rows_redealt(), 0u);
}

TEST(ChunkServiceTest, DealsEveryRowOncePerEpochThenDone) {
  ChunkService s;
  const DataOnDemandChunk shape = Ask(10, 4, 2);
  std::map<int64_t, std::set<uint64_t>> rows_seen;  // epoch → rows
  DataOnDemandChunk held = *s.Next(0, shape, 0);
  ASSERT_TRUE(s.active());
  int64_t total = 0;
  while (held.kind() == DataOnDemandChunk::CHUNK) {
    for (uint64_t r = held.begin(); r < held.end(); ++r) EXPECT_TRUE(rows_seen[held.epoch()].insert(r).second);
    total += static_cast<int64_t>(held.end() - held.begin());
    StatusOr<DataOnDemandChunk> next = s.Next(0, Completing(shape, held), 0);
    ASSERT_TRUE(next.ok()) << next.status().message();
    EXPECT_TRUE(next->completion_counted());
    held = *next;
  }
  EXPECT_EQ(held.kind(), DataOnDemandChunk::DONE);
  EXPECT_EQ(total, 20);
  EXPECT_EQ(rows_seen[0].size(), 10u);
  EXPECT_EQ(rows_seen[1].size(), 10u);
  EXPECT_EQ(s.WorkerEpochRows(0, 0), 10);
  EXPECT_EQ(s.WorkerEpochRows(0, 1), 10);
  ShardStats stats;
  s.FillStats(&stats);
  EXPECT_EQ(stats.chunks_dealt(), 6u);  // 3 chunks (4, 4, 2 rows) × 2 epochs
  EXPECT_EQ(stats.chunks_redealt(), 0u);
}

TEST(ChunkServiceTest, RefusesAnotherShapeNamingBoth) {
  ChunkService s;
  ASSERT_TRUE(s.Next(0, Ask(10, 4, 2), 0).ok());
  StatusOr<DataOnDemandChunk> bad = s.Next(1, Ask(11, 4, 2), 0);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("worker 1 has 11 training rows"), std::string::npos)
      << bad.status().message();
  EXPECT_NE(bad.status().message().find("the job has 10 training rows"), std::string::npos);
  EXPECT_FALSE(s.Next(1, Ask(10, 4, 3), 0).ok());
  EXPECT_FALSE(s.Next(1, Ask(10, 4, 2, 8), 0).ok());
  EXPECT_FALSE(s.Next(2, Ask(0, 4, 2), 0).ok());
  EXPECT_FALSE(s.Next(-1, Ask(10, 4, 2), 0).ok());
}

TEST(ChunkServiceTest, TaperedShapeDealsLargestFirstAndMustMatch) {
  ChunkService s;
  DataOnDemandChunk shape = Ask(4880, 640, 1);
  shape.set_taper(true);
  std::vector<uint64_t> sizes;
  DataOnDemandChunk req = shape;
  for (;;) {
    StatusOr<DataOnDemandChunk> r = s.Next(0, req, 0);
    ASSERT_TRUE(r.ok()) << r.status().message();
    if (r->kind() != DataOnDemandChunk::CHUNK) break;
    sizes.push_back(r->end() - r->begin());
    req = Completing(shape, *r);
  }
  EXPECT_EQ(sizes, (std::vector<uint64_t>{640, 640, 640, 640, 580, 435, 327, 245, 184, 138, 103, 80, 80, 80, 68}));
  EXPECT_EQ(s.WorkerEpochRows(0, 0), 4880);
  StatusOr<DataOnDemandChunk> other = s.Next(1, Ask(4880, 640, 1), 0);  // no taper
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("train.chunk_taper"), std::string::npos) << other.status().message();
  EXPECT_NE(other.status().message().find("tapering"), std::string::npos) << other.status().message();
}

TEST(ChunkServiceTest, WaitCarriesTheMaxClockAndALeaverIsRedealt) {
  ChunkService s;
  const DataOnDemandChunk shape = Ask(8, 4, 1);
  DataOnDemandChunk a = *s.Next(0, shape, 0);
  DataOnDemandChunk b = *s.Next(5, shape, 0);  // any rank: no worker count
  ASSERT_EQ(a.kind(), DataOnDemandChunk::CHUNK);
  ASSERT_EQ(b.kind(), DataOnDemandChunk::CHUNK);
  DataOnDemandChunk w = *s.Next(0, Completing(shape, a), 12);
  EXPECT_TRUE(w.completion_counted());
  EXPECT_EQ(w.kind(), DataOnDemandChunk::WAIT);  // b is held by 5
  EXPECT_EQ(w.max_clock(), 12);
  EXPECT_EQ(s.Leave(5), 1);
  DataOnDemandChunk again = *s.Next(0, shape, 0);
  ASSERT_EQ(again.kind(), DataOnDemandChunk::CHUNK);
  EXPECT_TRUE(again.redealt());
  EXPECT_EQ(again.begin(), b.begin());
  // 5 comes back and completes the chunk it lost: not counted.
  DataOnDemandChunk late = *s.Next(5, Completing(shape, b), 0);
  EXPECT_FALSE(late.completion_counted());
  DataOnDemandChunk done = *s.Next(0, Completing(shape, again), 0);
  EXPECT_TRUE(done.completion_counted());
  EXPECT_EQ(done.kind(), DataOnDemandChunk::DONE);
  EXPECT_EQ(s.WorkerEpochRows(0, 0), 8);
  EXPECT_EQ(s.WorkerEpochRows(5, 0), 0);
  ShardStats stats;
  s.FillStats(&stats);
  EXPECT_EQ(stats.chunks_dealt(), 3u);
  EXPECT_EQ(stats.chunks_redealt(), 1u);
  EXPECT_EQ(stats.rows_redealt(), 4u);
}

// Random speeds, leaves and rejoins through the service, as the server
// drives it: per epoch the counted rows of every worker sum to the set.
TEST(ChunkServiceTest, RandomLeavesCountEveryRowOncePerEpoch) {
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    std::mt19937_64 rng(seed);
    ChunkService s;
    const uint64_t rows = 1 + rng() % 200;
    const int64_t epochs = 1 + static_cast<int64_t>(rng() % 4);
    DataOnDemandChunk shape = Ask(rows, 1 + rng() % 17, epochs, seed);
    shape.set_taper(seed > 20);  // train.chunk_taper: the same guarantees
    std::map<int, DataOnDemandChunk> holding;  // rank → its chunk
    bool done = false;
    for (int step = 0; step < 100000 && !done; ++step) {
      const int rank = static_cast<int>(rng() % 5);
      if (rng() % 20 == 0) {  // dies or leaves; comes back later afresh
        s.Leave(rank);
        holding.erase(rank);
        continue;
      }
      DataOnDemandChunk req = shape;
      auto h = holding.find(rank);
      if (h != holding.end()) req = Completing(shape, h->second);
      StatusOr<DataOnDemandChunk> r = s.Next(rank, req, 0);
      ASSERT_TRUE(r.ok()) << r.status().message();
      if (h != holding.end()) {
        EXPECT_TRUE(r->completion_counted());
      }
      holding.erase(rank);
      if (r->kind() == DataOnDemandChunk::CHUNK) holding[rank] = *r;
      done = r->kind() == DataOnDemandChunk::DONE;
    }
    ASSERT_TRUE(done) << "seed " << seed;
    for (int64_t e = 0; e < epochs; ++e) {
      int64_t sum = 0;
      for (int r = 0; r < 5; ++r) sum += s.WorkerEpochRows(r, e);
      EXPECT_EQ(sum, static_cast<int64_t>(rows)) << "seed " << seed << " epoch " << e;
    }
  }
}

}  // namespace
}  // namespace tether
