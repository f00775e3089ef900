#include "server/coordinator/chunk_coordinator.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <utility>
#include <vector>

namespace tether {
namespace {

using Kind = ChunkCoordinator::GrantKind;

uint64_t Rows(const DataChunk& c) { return c.end - c.begin; }

TEST(ChunkCoordinatorTest, MakeRowChunksCoversEveryRowOnce) {
  auto c = MakeRowChunks(3, 10, 4);
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0].begin, 0u);
  EXPECT_EQ(c[0].end, 4u);
  EXPECT_EQ(c[2].begin, 8u);
  EXPECT_EQ(c[2].end, 10u);
  EXPECT_EQ(c[1].file, 3u);
  EXPECT_TRUE(MakeRowChunks(0, 0, 4).empty());
}

// Streamed files: byte ranges that tile each plain file, a gzip file whole.
TEST(ChunkCoordinatorTest, MakeByteChunksTilesPlainFilesAndKeepsGzipWhole) {
  const std::vector<DataChunk> c = MakeByteChunks({250, 90, 100, 1}, {false, true, false, false}, 100, false);
  const std::vector<DataChunk> want = {
      {DataChunk::Unit::kBytes, 0, 0, 100}, {DataChunk::Unit::kBytes, 0, 100, 200},
      {DataChunk::Unit::kBytes, 0, 200, 250}, {DataChunk::Unit::kBytes, 1, 0, 90},
      {DataChunk::Unit::kBytes, 2, 0, 100}, {DataChunk::Unit::kBytes, 3, 0, 1}};
  EXPECT_EQ(c, want);
  // A gzip file larger than a chunk is still one chunk.
  EXPECT_EQ(MakeByteChunks({1000}, {true}, 10, false), (std::vector<DataChunk>{{DataChunk::Unit::kBytes, 0, 0, 1000}}));
  // Tapered: each plain file's ranges taper and still tile it.
  const std::vector<DataChunk> t = MakeByteChunks({1000, 50, 700}, {false, true, false}, 128, true);
  std::vector<uint64_t> covered(3, 0);
  for (const DataChunk& ch : t) {
    EXPECT_EQ(ch.unit, DataChunk::Unit::kBytes);
    EXPECT_EQ(ch.begin, covered[ch.file]) << "contiguous";
    EXPECT_LE(ch.end - ch.begin, ch.file == 1 ? 50u : 128u);
    covered[ch.file] = ch.end;
  }
  EXPECT_EQ(covered, (std::vector<uint64_t>{1000, 50, 700}));
  EXPECT_LT(t.back().end - t.back().begin, 128u);
}

TEST(ChunkCoordinatorTest, TaperedChunksShrinkTowardTheEndAndCoverEveryRowOnce) {
  // Bibtex's 4,880 rows in chunks of 640: a quarter of what is left each,
  // down to 640 / 8 = 80 rows, then the rest.
  std::vector<uint64_t> sizes;
  uint64_t next = 0;
  for (const DataChunk& c : MakeTaperedRowChunks(2, 4880, 640)) {
    EXPECT_EQ(c.begin, next);
    EXPECT_EQ(c.file, 2u);
    next = c.end;
    sizes.push_back(Rows(c));
  }
  EXPECT_EQ(next, 4880u);
  EXPECT_EQ(sizes, (std::vector<uint64_t>{640, 640, 640, 640, 580, 435, 327, 245, 184, 138, 103, 80, 80, 80, 68}));
  EXPECT_TRUE(MakeTaperedRowChunks(0, 0, 4).empty());
  // Chunks of 1 row stay 1 row; a set smaller than a chunk is one chunk.
  EXPECT_EQ(MakeTaperedRowChunks(0, 5, 1).size(), 5u);
  ASSERT_EQ(MakeTaperedRowChunks(0, 3, 64).size(), 1u);
  for (uint64_t rows = 1; rows < 300; rows += 7) {
    for (uint64_t chunk : {1u, 2u, 5u, 16u, 64u}) {
      const auto c = MakeTaperedRowChunks(0, rows, chunk);
      uint64_t sum = 0;
      for (const DataChunk& d : c) {
        ASSERT_GT(d.end, d.begin);
        ASSERT_LE(Rows(d), chunk);
        sum += Rows(d);
      }
      EXPECT_EQ(sum, rows) << rows << " rows, chunks of " << chunk;
      EXPECT_LE(c.size(), MakeRowChunks(0, rows, chunk).size() + 8);
    }
  }
}

TEST(ChunkCoordinatorTest, LargestFirstDealsTheTaperLastAndShufflesTies) {
  auto order = [](uint64_t seed) {
    ChunkCoordinator co(MakeTaperedRowChunks(0, 4880, 640), 1, seed, /*shuffle=*/true, /*barrier=*/true);
    co.set_deal_largest_first(true);
    std::vector<std::pair<uint64_t, uint64_t>> out;  // (rows, begin)
    for (auto g = co.Next(0); g.kind == Kind::kChunk; g = co.Next(0)) {
      out.emplace_back(Rows(g.chunk), g.chunk.begin);
      EXPECT_TRUE(co.Complete(0, g.id, static_cast<int64_t>(Rows(g.chunk))).ok());
    }
    EXPECT_TRUE(co.done());
    return out;
  };
  const auto a = order(1);
  ASSERT_EQ(a.size(), 15u);
  for (size_t i = 1; i < a.size(); ++i) EXPECT_GE(a[i - 1].first, a[i].first) << i;
  EXPECT_EQ(a.back().first, 68u);
  // The four 640-row chunks come first, in an order the seed draws.
  bool differs = false;
  for (uint64_t seed = 2; seed < 10 && !differs; ++seed) {
    const auto b = order(seed);
    for (size_t i = 0; i < 4; ++i) differs |= a[i].second != b[i].second;
  }
  EXPECT_TRUE(differs);
}

TEST(ChunkCoordinatorTest, DealsInOrderWithoutShuffleAndEndsWithDone) {
  ChunkCoordinator co(MakeRowChunks(0, 6, 2), /*epochs=*/1, /*seed=*/1, /*shuffle=*/false, /*barrier=*/true);
  auto a = co.Next(0);
  auto b = co.Next(1);
  auto c = co.Next(0);
  ASSERT_EQ(a.kind, Kind::kChunk);
  EXPECT_EQ(a.chunk.begin, 0u);
  EXPECT_EQ(b.chunk.begin, 2u);
  EXPECT_EQ(c.chunk.begin, 4u);
  EXPECT_EQ(co.Next(1).kind, Kind::kWait);  // all dealt, none completed
  ASSERT_TRUE(co.Complete(0, a.id, 2).ok());
  ASSERT_TRUE(co.Complete(1, b.id, 2).ok());
  EXPECT_FALSE(co.done());
  ASSERT_TRUE(co.Complete(0, c.id, 2).ok());
  EXPECT_TRUE(co.done());
  EXPECT_EQ(co.Next(1).kind, Kind::kDone);
  EXPECT_EQ(co.epoch_rows(0), 6);
  EXPECT_EQ(co.workers().at(0).rows_completed, 4);
  EXPECT_EQ(co.workers().at(1).rows_completed, 2);
}

TEST(ChunkCoordinatorTest, OnlyTheHolderCompletesAndOnlyOnce) {
  ChunkCoordinator co(MakeRowChunks(0, 4, 2), 1, 1, false, true);
  auto a = co.Next(0);
  EXPECT_EQ(co.Complete(1, a.id, 2).code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(co.Complete(0, 999, 2).code(), Status::Code::kFailedPrecondition);
  ASSERT_TRUE(co.Complete(0, a.id, 2).ok());
  EXPECT_EQ(co.Complete(0, a.id, 2).code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(co.epoch_rows(0), 2);
}

TEST(ChunkCoordinatorTest, ChunkOfAWorkerThatLeftIsRedealtAndItsLateCompletionRefused) {
  ChunkCoordinator co(MakeRowChunks(0, 4, 2), 1, 1, false, true);
  auto a = co.Next(0);  // rows 0..2, worker 0 dies holding it
  auto b = co.Next(1);  // rows 2..4
  EXPECT_EQ(co.Leave(0), 1);
  auto again = co.Next(1);
  ASSERT_EQ(again.kind, Kind::kChunk);
  EXPECT_TRUE(again.redealt);
  EXPECT_EQ(again.chunk, a.chunk);
  EXPECT_NE(again.id, a.id);
  EXPECT_EQ(co.redealt_chunks(), 1);
  EXPECT_EQ(co.redealt_units(), 2u);
  // The worker declared gone was only slow: its completion counts nothing.
  EXPECT_FALSE(co.Complete(0, a.id, 2).ok());
  ASSERT_TRUE(co.Complete(1, b.id, 2).ok());
  ASSERT_TRUE(co.Complete(1, again.id, 2).ok());
  EXPECT_TRUE(co.done());
  EXPECT_EQ(co.epoch_rows(0), 4);
  EXPECT_EQ(co.workers().at(0).rows_completed, 0);
}

TEST(ChunkCoordinatorTest, BarrierHoldsTheNextEpochUntilThisOneCompletes) {
  ChunkCoordinator co(MakeRowChunks(0, 4, 2), 2, 1, false, /*barrier=*/true);
  auto a = co.Next(0);
  auto b = co.Next(1);
  ASSERT_TRUE(co.Complete(0, a.id, 2).ok());
  EXPECT_EQ(co.Next(0).kind, Kind::kWait);
  ASSERT_TRUE(co.Complete(1, b.id, 2).ok());
  auto c = co.Next(0);
  ASSERT_EQ(c.kind, Kind::kChunk);
  EXPECT_EQ(c.epoch, 1);
}

TEST(ChunkCoordinatorTest, WithoutBarrierAFastWorkerRunsOneEpochAheadAtMost) {
  ChunkCoordinator co(MakeRowChunks(0, 4, 2), 3, 1, false, /*barrier=*/false);
  auto slow = co.Next(1);  // epoch 0, held for long
  std::vector<ChunkCoordinator::Grant> fast;
  for (;;) {
    auto g = co.Next(0);
    if (g.kind != Kind::kChunk) {
      EXPECT_EQ(g.kind, Kind::kWait);
      break;
    }
    fast.push_back(g);
    ASSERT_TRUE(co.Complete(0, g.id, 2).ok());
  }
  // Epoch 0's other chunk and both of epoch 1's; epoch 2 waits for epoch 0.
  ASSERT_EQ(fast.size(), 3u);
  EXPECT_EQ(fast[0].epoch, 0);
  EXPECT_EQ(fast[2].epoch, 1);
  EXPECT_EQ(co.completed_epochs(), 0);
  ASSERT_TRUE(co.Complete(1, slow.id, 2).ok());
  EXPECT_EQ(co.completed_epochs(), 2);  // epoch 1 was already complete
  EXPECT_EQ(co.Next(0).epoch, 2);
}

TEST(ChunkCoordinatorTest, ShuffledOrderIsAPermutationFixedBySeedAndEpoch) {
  auto order = [](uint64_t seed, int64_t epochs) {
    ChunkCoordinator co(MakeRowChunks(0, 100, 1), epochs, seed, true, true);
    std::vector<std::vector<uint64_t>> out(static_cast<size_t>(epochs));
    for (int64_t e = 0; e < epochs; ++e) {
      for (int i = 0; i < 100; ++i) {
        auto g = co.Next(0);
        out[static_cast<size_t>(e)].push_back(g.chunk.begin);
        EXPECT_TRUE(co.Complete(0, g.id, 1).ok());
      }
    }
    return out;
  };
  auto a = order(7, 2), b = order(7, 2), c = order(8, 2);
  EXPECT_EQ(a, b);
  EXPECT_NE(a[0], c[0]);
  EXPECT_NE(a[0], a[1]);
  std::set<uint64_t> s(a[1].begin(), a[1].end());
  EXPECT_EQ(s.size(), 100u);
}

// Three workers at speeds 1×, 1× and 4× slower (a chunk takes 1, 1 and 4
// ticks): every row is used exactly once per epoch, and the slow worker
// trains on fewer rows. The straggler case of docs/OPERATIONS.md as a pure schedule.
TEST(ChunkCoordinatorTest, SlowWorkerTrainsOnFewerRowsAndEveryRowOnce) {
  const uint64_t kRows = 1000;
  ChunkCoordinator co(MakeRowChunks(0, kRows, 10), /*epochs=*/2, 3, true, false);
  const int ticks[3] = {1, 1, 4};
  ChunkCoordinator::Grant held[3];
  int remaining[3] = {0, 0, 0};
  for (int t = 0; !co.done() && t < 100000; ++t) {
    for (int w = 0; w < 3; ++w) {
      if (remaining[w] > 0 && --remaining[w] == 0) {
        ASSERT_TRUE(co.Complete(w, held[w].id, static_cast<int64_t>(Rows(held[w].chunk))).ok());
        held[w] = {};
      }
      if (held[w].kind != Kind::kChunk) {
        auto g = co.Next(w);
        if (g.kind == Kind::kChunk) {
          held[w] = g;
          remaining[w] = ticks[w];
        }
      }
    }
  }
  ASSERT_TRUE(co.done());
  EXPECT_EQ(co.epoch_rows(0), static_cast<int64_t>(kRows));
  EXPECT_EQ(co.epoch_rows(1), static_cast<int64_t>(kRows));
  int64_t sum = 0;
  for (auto& [w, c] : co.workers()) sum += c.rows_completed;
  EXPECT_EQ(sum, 2 * static_cast<int64_t>(kRows));
  EXPECT_LT(co.workers().at(2).rows_completed, co.workers().at(0).rows_completed / 2);
  EXPECT_EQ(co.redealt_chunks(), 0);
}

// Random schedules: workers of random speeds join, leave gracefully, are
// killed holding chunks (and sometimes come back late with a completion),
// in random order. Invariants, checked exactly: each chunk of each epoch is
// completed exactly once; every epoch's rows sum to the data set; the
// per-worker rows sum to epochs × rows; re-dealt chunks are exactly the ones
// held by a worker when it left.
TEST(ChunkCoordinatorTest, RandomJoinsLeavesAndKillsKeepExactlyOncePerEpoch) {
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    std::mt19937_64 rng(seed);
    const uint64_t rows = 1 + rng() % 500;
    const uint64_t chunk_rows = 1 + rng() % 40;
    const int64_t epochs = 1 + static_cast<int64_t>(rng() % 4);
    const bool barrier = rng() % 2;
    ChunkCoordinator co(MakeRowChunks(0, rows, chunk_rows), epochs, seed, rng() % 2, barrier);
    struct W {
      bool alive = false;
      std::vector<ChunkCoordinator::Grant> held;  // at most one normally
    };
    std::map<int, W> ws;
    int next_rank = 0;
    std::map<std::pair<int64_t, uint64_t>, int> completions;  // (epoch, begin) -> count
    std::vector<std::pair<int, ChunkCoordinator::Grant>> orphans;  // held by killed workers
    int64_t expect_redealt = 0;
    int alive = 0;
    for (int step = 0; step < 200000 && !co.done(); ++step) {
      const uint64_t r = rng() % 100;
      if (alive == 0 || r < 3) {  // join
        ws[next_rank++].alive = true;
        ++alive;
        continue;
      }
      // Pick a live worker.
      auto it = ws.begin();
      do {
        it = ws.begin();
        std::advance(it, static_cast<long>(rng() % ws.size()));
      } while (!it->second.alive);
      W& w = it->second;
      const int rank = it->first;
      if (r < 6 && alive > 1) {  // killed or leaves, maybe holding a chunk
        expect_redealt += static_cast<int64_t>(w.held.size());
        EXPECT_EQ(co.Leave(rank), static_cast<int>(w.held.size()));
        for (auto& g : w.held) orphans.emplace_back(rank, g);
        w.held.clear();
        w.alive = false;
        --alive;
        continue;
      }
      if (r < 8 && !orphans.empty()) {  // a killed worker's late completion
        auto [dead, g] = orphans.back();
        orphans.pop_back();
        EXPECT_FALSE(co.Complete(dead, g.id, static_cast<int64_t>(Rows(g.chunk))).ok());
        continue;
      }
      if (!w.held.empty() && rng() % 2) {
        auto g = w.held.back();
        w.held.pop_back();
        ASSERT_TRUE(co.Complete(rank, g.id, static_cast<int64_t>(Rows(g.chunk))).ok());
        ++completions[{g.epoch, g.chunk.begin}];
      } else if (w.held.empty()) {
        auto g = co.Next(rank);
        if (g.kind == Kind::kChunk) w.held.push_back(g);
      }
    }
    ASSERT_TRUE(co.done()) << "seed " << seed;
    const uint64_t nchunks = (rows + chunk_rows - 1) / chunk_rows;
    EXPECT_EQ(completions.size(), nchunks * static_cast<uint64_t>(epochs)) << "seed " << seed;
    for (auto& [k, n] : completions) EXPECT_EQ(n, 1) << "seed " << seed;
    int64_t sum = 0;
    for (int64_t e = 0; e < epochs; ++e) EXPECT_EQ(co.epoch_rows(e), static_cast<int64_t>(rows)) << "seed " << seed;
    for (auto& [rank, c] : co.workers()) sum += c.rows_completed;
    EXPECT_EQ(sum, epochs * static_cast<int64_t>(rows)) << "seed " << seed;
    EXPECT_EQ(co.redealt_chunks(), expect_redealt) << "seed " << seed;
  }
}

}  // namespace
}  // namespace tether
