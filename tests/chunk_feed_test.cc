#include "worker/train/chunk_feed.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "server/coordinator/chunk_service.h"
#include "tests/testing/temp_dir.h"

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

// A request the worker must carry on a CLOCK (a stop's checkpoint clock)
// goes out on one empty clock at once, ahead of the fastest worker; the
// stop then ends the wait only when the worker's stop hook says so (its
// checkpoint taken).
TEST(ChunkFeedTest, AWaitingWorkerWithARequestCompletesOneClockAheadAtOnce) {
  ChunkService service;
  const CsrMatrix x_all = Numbered(8), y_all = Numbered(8);
  int64_t c0 = 0, c1 = 0;
  ChunkFeed holder(Shape(8, 4, 1), &x_all, &y_all, Hooks(&service, 0, &c0));
  ChunkFeedHooks h = Hooks(&service, 1, &c1, /*max_clock=*/2);
  bool want = false;
  int polls = 0, waits_begun = 0;
  h.on_wait = [&] { ++waits_begun; };
  h.want_clock = [&] { return want; };
  h.empty_clock = [&] {
    ++c1;
    want = false;  // the request went out on this clock
    return Status::OK();
  };
  // The stop is noticed at the first poll (a request to carry); the wait
  // ends at the fourth (its checkpoint taken).
  h.stop = [&] {
    if (++polls == 1) want = true;
    return polls == 4;
  };
  ChunkFeed waiter(Shape(8, 4, 1), &x_all, &y_all, h);
  CsrMatrix x, y;
  ASSERT_EQ(*holder.FirstEpoch(), 0);
  ASSERT_EQ(*waiter.FirstEpoch(), 0);
  ASSERT_TRUE(*holder.Next(0, &x, &y));
  ASSERT_TRUE(*waiter.Next(0, &x, &y));
  ASSERT_FALSE(*waiter.Next(0, &x, &y));
  EXPECT_TRUE(waiter.stopped());
  EXPECT_EQ(c1, 3);  // caught up to 2, then one ahead for the request
  EXPECT_EQ(waiter.empty_clocks(), 3);
  EXPECT_EQ(waits_begun, 1);  // one wait, logged once
}

// ---- Streamed files (data.streaming): chunks are byte ranges of files.

constexpr int kFeatures = 50, kLabels = 9;

// An XMC file of `rows` rows; row i holds feature i % 50 with the value
// tag * 100000 + i (so each row names its file and number) and a random
// padding, so line lengths vary and ranges cut lines anywhere.
std::string XmcText(int rows, int tag, std::mt19937* rng) {
  std::string s = std::to_string(rows) + " " + std::to_string(kFeatures) + " " + std::to_string(kLabels) + "\n";
  std::uniform_int_distribution<int> pad(0, 60);
  for (int i = 0; i < rows; ++i)
    s += std::to_string(i % kLabels) + " " + std::to_string(i % kFeatures) + ":" + std::to_string(tag * 100000 + i) +
         std::string(static_cast<size_t>(pad(*rng)), ' ') + "\n";
  return s;
}

ReadOptions XmcOpts() {
  ReadOptions o;
  o.format = DataFormat::kXmc;
  o.index_base = 0;
  o.num_features = kFeatures;
  o.num_labels = kLabels;
  return o;
}

// Four files of 1000, 300 (gzip), 37 and 513 rows: 1850 rows.
struct StreamedSet {
  testing::ScopedTempDir dir;
  std::vector<DataFile> files;
  std::set<int> all_rows;  // every row's tag * 100000 + i
  StreamedSet() {
    std::mt19937 rng(11);
    const int rows[] = {1000, 300, 37, 513};
    std::vector<std::string> paths;
    for (int f = 0; f < 4; ++f) {
      const std::string text = XmcText(rows[f], f + 1, &rng);
      const std::string path = dir.path() + "/part-" + std::to_string(f) + (f == 1 ? ".txt.gz" : ".txt");
      if (f == 1) {
        gzFile g = gzopen(path.c_str(), "wb");
        gzwrite(g, text.data(), static_cast<unsigned>(text.size()));
        gzclose(g);
      } else {
        std::ofstream(path, std::ios::binary) << text;
      }
      paths.push_back(path);
      for (int i = 0; i < rows[f]; ++i) all_rows.insert((f + 1) * 100000 + i);
    }
    files = *StatDataFiles(paths);
  }
};

DataOnDemandChunk StreamedShape(const std::vector<DataFile>& files, uint64_t chunk_bytes, int64_t epochs) {
  DataOnDemandChunk s;
  s.set_chunk_rows(64);
  s.set_epochs(epochs);
  s.set_seed(9);
  SetStreamedShape(files, chunk_bytes, &s);
  return s;
}

std::unique_ptr<StreamedChunkSource> Source(const std::vector<DataFile>& files) {
  RowStreamOptions so;
  so.block_rows = 16;
  so.buffer_bytes = 1024;
  return std::make_unique<StreamedChunkSource>(files, XmcOpts(), so, nullptr, nullptr);
}

// The row ids (feature values) of a block; each row has one feature.
std::vector<int> Ids(const CsrMatrix& x) {
  std::vector<int> ids;
  for (int64_t r = 0; r < x.rows; ++r) {
    EXPECT_EQ(x.row_ptr[static_cast<size_t>(r) + 1] - x.row_ptr[static_cast<size_t>(r)], 1);
    ids.push_back(static_cast<int>(x.values[static_cast<size_t>(x.row_ptr[static_cast<size_t>(r)])]));
  }
  return ids;
}

TEST(ChunkFeedStreamedTest, ShardZeroCutsPlainFilesIntoByteRangesAndDealsGzipWhole) {
  const StreamedSet set;
  const uint64_t chunk_bytes = 700;
  size_t expected = 0;
  for (const DataFile& f : set.files) expected += f.gzip ? 1 : (f.bytes + chunk_bytes - 1) / chunk_bytes;
  ChunkService service;
  int64_t clock = 0;
  ChunkFeed feed(StreamedShape(set.files, chunk_bytes, 1), Source(set.files), Hooks(&service, 0, &clock));
  ASSERT_EQ(*feed.FirstEpoch(), 0);
  ASSERT_EQ(service.coordinator()->chunks_per_epoch(), expected);
  EXPECT_GT(expected, 10u);
  std::multiset<int> seen;
  CsrMatrix x, y;
  while (true) {
    StatusOr<bool> more = feed.Next(0, &x, &y);
    ASSERT_TRUE(more.ok()) << more.status().message();
    if (!*more) break;
    EXPECT_LE(x.rows, 16);  // a block at a time: the memory bound
    for (int id : Ids(x)) seen.insert(id);
  }
  EXPECT_EQ(seen.size(), 1850u);
  EXPECT_EQ(std::set<int>(seen.begin(), seen.end()), set.all_rows);
  EXPECT_EQ(feed.epoch_rows(), (std::vector<int64_t>{1850}));
  EXPECT_EQ(feed.chunks_completed(), expected);
  ShardStats stats;
  service.FillStats(&stats);
  EXPECT_EQ(stats.chunk_epoch_rows(0), 1850);
}

// Three workers, each on its own thread, draw byte-range chunks of four
// files (one gzip) over three epochs: every row of every epoch is trained
// exactly once, the workers' counted rows sum to 1850 per epoch, and shard
// 0 counted 1850 per epoch.
TEST(ChunkFeedStreamedTest, ThreeWorkersUseEveryRowOfEveryEpochExactlyOnce) {
  const StreamedSet set;
  constexpr int kWorkers = 3, kEpochs = 3;
  ChunkService service;
  std::mutex mu;
  std::vector<std::map<int, std::multiset<int>>> seen(kWorkers);  // worker → epoch → ids
  std::vector<std::vector<int64_t>> counted(kWorkers);
  std::vector<std::string> errors(kWorkers);
  std::vector<std::thread> threads;
  for (int w = 0; w < kWorkers; ++w) {
    threads.emplace_back([&, w] {
      int64_t clock = 0;
      ChunkFeedHooks h;
      h.ask = [&](const DataOnDemandChunk& r) {
        std::lock_guard<std::mutex> lock(mu);
        return service.Next(w, r, 0);
      };
      h.idle = [](int ms) {
        std::this_thread::sleep_for(std::chrono::milliseconds(ms));
        return Status::OK();
      };
      h.clock = [&clock] { return clock; };
      h.empty_clock = [&clock] {
        ++clock;
        return Status::OK();
      };
      ChunkFeed feed(StreamedShape(set.files, 500, kEpochs), Source(set.files), h);
      StatusOr<int> first = feed.FirstEpoch();
      if (!first.ok()) {
        errors[w] = first.status().message();
        return;
      }
      CsrMatrix x, y;
      for (int e = *first; e < kEpochs; ++e) {
        while (true) {
          StatusOr<bool> more = feed.Next(e, &x, &y);
          if (!more.ok()) {
            errors[w] = more.status().message();
            return;
          }
          if (!*more) break;
          for (int id : Ids(x)) seen[w][e].insert(id);
          if (w == 2) std::this_thread::sleep_for(std::chrono::microseconds(200));  // a slow worker
        }
      }
      counted[w] = feed.epoch_rows();
    });
  }
  for (std::thread& t : threads) t.join();
  for (int w = 0; w < kWorkers; ++w) ASSERT_EQ(errors[w], "") << "worker " << w;
  for (int e = 0; e < kEpochs; ++e) {
    std::multiset<int> all;
    int64_t sum = 0;
    for (int w = 0; w < kWorkers; ++w) {
      all.insert(seen[w][e].begin(), seen[w][e].end());
      sum += counted[w][static_cast<size_t>(e)];
      EXPECT_EQ(counted[w][static_cast<size_t>(e)], static_cast<int64_t>(seen[w][e].size()));
    }
    EXPECT_EQ(all.size(), 1850u) << "epoch " << e;
    EXPECT_EQ(std::set<int>(all.begin(), all.end()), set.all_rows) << "epoch " << e;
    EXPECT_EQ(sum, 1850) << "epoch " << e;
  }
  ShardStats stats;
  service.FillStats(&stats);
  EXPECT_EQ(std::vector<int64_t>(stats.chunk_epoch_rows().begin(), stats.chunk_epoch_rows().end()),
            (std::vector<int64_t>{1850, 1850, 1850}));
  EXPECT_EQ(stats.chunks_redealt(), 0u);
}

// A worker that leaves mid-chunk: its chunk is dealt again, its completion
// is refused, and the epoch still counts each row once.
TEST(ChunkFeedStreamedTest, AChunkHeldByAWorkerThatLeftIsDealtAgainAndCountedOnce) {
  const StreamedSet set;
  ChunkService service;
  int64_t c0 = 0, c1 = 0;
  ChunkFeed gone(StreamedShape(set.files, 900, 1), Source(set.files), Hooks(&service, 0, &c0));
  ChunkFeed other(StreamedShape(set.files, 900, 1), Source(set.files), Hooks(&service, 1, &c1));
  CsrMatrix x, y;
  ASSERT_EQ(*gone.FirstEpoch(), 0);
  ASSERT_TRUE(*gone.Next(0, &x, &y));  // one block of its chunk read
  const std::vector<int> partial = Ids(x);
  EXPECT_EQ(service.Leave(0), 1);
  ASSERT_EQ(*other.FirstEpoch(), 0);
  std::multiset<int> seen;
  while (true) {
    StatusOr<bool> more = other.Next(0, &x, &y);
    ASSERT_TRUE(more.ok()) << more.status().message();
    if (!*more) break;
    for (int id : Ids(x)) seen.insert(id);
  }
  EXPECT_EQ(std::set<int>(seen.begin(), seen.end()), set.all_rows);
  EXPECT_EQ(seen.size(), 1850u);
  for (int id : partial) EXPECT_EQ(seen.count(id), 1u);
  EXPECT_EQ(other.epoch_rows()[0], 1850);
  EXPECT_EQ(other.chunks_redealt(), 1u);
  ShardStats stats;
  service.FillStats(&stats);
  EXPECT_EQ(stats.chunk_epoch_rows(0), 1850);
  EXPECT_EQ(stats.chunks_redealt(), 1u);
  EXPECT_GT(stats.rows_redealt(), 0u);  // the re-dealt chunk's rows, counted at its completion
  // The worker that left finishes its chunk: not counted.
  StatusOr<bool> late = gone.Next(0, &x, &y);
  ASSERT_TRUE(late.ok());
  while (*late) late = gone.Next(0, &x, &y);
  EXPECT_EQ(gone.chunks_refused(), 1u);
  service.FillStats(&stats);
  EXPECT_EQ(stats.chunk_epoch_rows(0), 1850);
}

TEST(ChunkFeedStreamedTest, ShardZeroRefusesAWorkerWithOtherFilesNamingBoth) {
  const StreamedSet set;
  ChunkService service;
  ASSERT_TRUE(service.Next(0, StreamedShape(set.files, 700, 2), 0).ok());
  std::vector<DataFile> fewer(set.files.begin(), set.files.end() - 1);
  StatusOr<DataOnDemandChunk> r = service.Next(1, StreamedShape(fewer, 700, 2), 0);
  ASSERT_FALSE(r.ok());
  const std::string msg = r.status().message();
  EXPECT_NE(msg.find("worker 1 has 3 streamed training file(s) of "), std::string::npos) << msg;
  EXPECT_NE(msg.find("but the job has 4 streamed training file(s) of "), std::string::npos) << msg;
  EXPECT_NE(msg.find(std::to_string(set.files[1].bytes) + " (gzip)"), std::string::npos) << msg;
  std::vector<DataFile> bigger = set.files;
  bigger[2].bytes += 1;
  EXPECT_FALSE(service.Next(1, StreamedShape(bigger, 700, 2), 0).ok());
  EXPECT_FALSE(service.Next(1, StreamedShape(set.files, 701, 2), 0).ok());
  DataOnDemandChunk in_memory = Shape(1850, 64, 2);
  EXPECT_FALSE(service.Next(1, in_memory, 0).ok());
  // An empty file is malformed.
  ChunkService fresh;
  std::vector<DataFile> empty = set.files;
  empty[3].bytes = 0;
  StatusOr<DataOnDemandChunk> e = fresh.Next(0, StreamedShape(empty, 700, 2), 0);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("training file 4 is empty"), std::string::npos) << e.status().message();
  EXPECT_FALSE(fresh.active());
}

TEST(ChunkFeedStreamedTest, AChunkOutsideTheFilesIsAnError) {
  const StreamedSet set;
  StreamedChunkSource source(set.files, XmcOpts(), RowStreamOptions{}, nullptr, nullptr);
  DataOnDemandChunk c;
  c.set_file(1);  // gzip: whole only
  c.set_begin(0);
  c.set_end(set.files[1].bytes);
  EXPECT_EQ(source.Outside(c), "");
  c.set_end(10);
  EXPECT_NE(source.Outside(c).find("is gzip, read whole"), std::string::npos) << source.Outside(c);
  c.set_file(0);
  c.set_end(set.files[0].bytes + 1);
  EXPECT_NE(source.Outside(c).find("has " + std::to_string(set.files[0].bytes) + " bytes"), std::string::npos);
  c.set_file(4);
  EXPECT_NE(source.Outside(c).find("this worker has 4 training file(s)"), std::string::npos);
}

}  // namespace
}  // namespace tether
