#include "worker/chunk_feed.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "server/chunk_service.h"

namespace tether {
namespace {

// An N × 1 matrix whose row r holds the value r: a gathered row says which
// training row it is.
CsrMatrix Numbered(int64_t n) {
  CsrMatrix m;
  m.rows = n;
  m.cols = 1;
  for (int64_t r = 0; r < n; ++r) {
    m.col_idx.push_back(0);
    m.values.push_back(static_cast<float>(r));
    m.row_ptr.push_back(static_cast<int64_t>(m.col_idx.size()));
  }
  return m;
}

DataOnDemandChunk Shape(uint64_t rows, uint64_t chunk, int64_t epochs) {
  DataOnDemandChunk s;
  s.set_train_rows(rows);
  s.set_chunk_rows(chunk);
  s.set_epochs(epochs);
  s.set_seed(3);
  return s;
}

// A feed of worker `rank` talking to `service` in-process.
ChunkFeedHooks Hooks(ChunkService* service, int rank, int64_t* clock, int64_t max_clock = 0) {
  ChunkFeedHooks h;
  h.ask = [=](const DataOnDemandChunk& r) { return service->Next(rank, r, max_clock); };
  h.idle = [](int) { return Status::OK(); };
  h.clock = [clock] { return *clock; };
  h.empty_clock = [clock] {
    ++*clock;
    return Status::OK();
  };
  return h;
}

TEST(ChunkFeedTest, RowOrderIsAPermutationFixedBySeedEpochAndBegin) {
  const std::vector<int64_t> a = ChunkRowOrder(1, 0, 10, 20);
  std::vector<int64_t> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 10; ++i) EXPECT_EQ(sorted[i], 10 + i);
  EXPECT_EQ(a, ChunkRowOrder(1, 0, 10, 20));
  EXPECT_NE(a, ChunkRowOrder(1, 1, 10, 20));
  EXPECT_NE(a, ChunkRowOrder(2, 0, 10, 20));
  EXPECT_TRUE(ChunkRowOrder(1, 0, 5, 5).empty());
}

TEST(ChunkFeedTest, OneWorkerTrainsEveryRowOfEveryEpochOnce) {
  ChunkService service;
  const CsrMatrix x_all = Numbered(23), y_all = Numbered(23);
  int64_t clock = 0;
  ChunkFeed feed(Shape(23, 5, 3), &x_all, &y_all, Hooks(&service, 0, &clock));
  ASSERT_EQ(*feed.FirstEpoch(), 0);
  for (int e = 0; e < 3; ++e) {
    std::multiset<int> seen;
    CsrMatrix x, y;
    while (true) {
      StatusOr<bool> more = feed.Next(e, &x, &y);
      ASSERT_TRUE(more.ok()) << more.status().message();
      if (!*more) break;
      for (int64_t i = 0; i < x.rows; ++i) {
        seen.insert(static_cast<int>(x.values[static_cast<size_t>(i)]));
        EXPECT_EQ(x.values[static_cast<size_t>(i)], y.values[static_cast<size_t>(i)]);
      }
    }
    EXPECT_EQ(seen.size(), 23u) << "epoch " << e;
    EXPECT_EQ(std::set<int>(seen.begin(), seen.end()).size(), 23u);
  }
  EXPECT_EQ(feed.epoch_rows(), (std::vector<int64_t>{23, 23, 23}));
  EXPECT_EQ(feed.chunks_completed(), 15u);  // 5 chunks × 3 epochs
  EXPECT_EQ(feed.chunks_refused(), 0u);
  EXPECT_TRUE(service.coordinator()->done());
}

TEST(ChunkFeedTest, AWorkerJoiningMidJobStartsAtTheEpochInProgress) {
  ChunkService service;
  const CsrMatrix x_all = Numbered(8), y_all = Numbered(8);
  int64_t c0 = 0, c1 = 0;
  ChunkFeed first(Shape(8, 4, 3), &x_all, &y_all, Hooks(&service, 0, &c0));
  ASSERT_EQ(*first.FirstEpoch(), 0);
  CsrMatrix x, y;
  ASSERT_TRUE(*first.Next(0, &x, &y));
  ASSERT_TRUE(*first.Next(0, &x, &y));
  ASSERT_FALSE(*first.Next(0, &x, &y));  // epoch 1's first chunk came: kept
  ChunkFeed late(Shape(8, 4, 3), &x_all, &y_all, Hooks(&service, 7, &c1));
  ASSERT_EQ(*late.FirstEpoch(), 1);
  ASSERT_TRUE(*late.Next(1, &x, &y));
  ASSERT_TRUE(*first.Next(1, &x, &y));
  EXPECT_EQ(late.epoch_rows()[0], 0);
}

TEST(ChunkFeedTest, AWaitingWorkerCatchesUpToTheFastestClockWithEmptyClocks) {
  ChunkService service;
  const CsrMatrix x_all = Numbered(8), y_all = Numbered(8);
  int64_t c0 = 0, c1 = 0;
  ChunkFeed holder(Shape(8, 4, 1), &x_all, &y_all, Hooks(&service, 0, &c0));
  ChunkFeedHooks h = Hooks(&service, 1, &c1, /*max_clock=*/5);
  int waits = 0;
  h.stop = [&] { return ++waits == 3; };  // gives up after three WAITs
  ChunkFeed waiter(Shape(8, 4, 1), &x_all, &y_all, h);
  CsrMatrix x, y;
  ASSERT_EQ(*holder.FirstEpoch(), 0);
  ASSERT_EQ(*waiter.FirstEpoch(), 0);
  ASSERT_TRUE(*holder.Next(0, &x, &y));
  ASSERT_TRUE(*waiter.Next(0, &x, &y));
  ASSERT_FALSE(*waiter.Next(0, &x, &y));  // all dealt; holder still has its chunk
  EXPECT_TRUE(waiter.stopped());
  EXPECT_EQ(c1, 5);
  EXPECT_EQ(waiter.empty_clocks(), 5);
  EXPECT_EQ(waiter.epoch_rows()[0], 4);  // its chunk counted before it waited
}

}  // namespace
}  // namespace tether
