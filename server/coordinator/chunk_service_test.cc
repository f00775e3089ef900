#include "server/coordinator/chunk_service.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
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

// A worker killed mid-epoch for good and a worker with a new rank joining
// in the same epoch, step by step with exact counts:
// 11 rows in chunks of 2 (5 of 2 rows and one of 1, shuffled), 2 epochs,
// ranks 0, 1, 2, then 2 dies holding a chunk of epoch 2 and rank 7 (never
// seen before) takes it. Every row once per epoch; per-worker rows exact;
// exactly the held chunk is re-dealt, once.
TEST(ChunkServiceTest, KillThenJoinOfANewRankInTheSameEpochCountsExactly) {
  ChunkService s;
  const DataOnDemandChunk shape = Ask(11, 2, 2);
  const auto rows = [](const DataOnDemandChunk& c) { return static_cast<int64_t>(c.end() - c.begin()); };
  std::map<int, int64_t> epoch1;  // rank → rows of the chunks it completed in epoch 1
  // Epoch 1: ranks 0, 1, 2 take two chunks each (the 6 chunks of the epoch).
  std::map<int, DataOnDemandChunk> held;
  for (int r = 0; r < 3; ++r) held[r] = *s.Next(r, shape, 0);
  for (int r = 0; r < 3; ++r) {
    epoch1[r] += rows(held[r]);
    held[r] = *s.Next(r, Completing(shape, held[r]), 0);
    ASSERT_EQ(held[r].kind(), DataOnDemandChunk::CHUNK);
    EXPECT_EQ(held[r].epoch(), 0);
  }
  // 0 and 1 complete theirs and wait: rank 2 still holds one of epoch 1.
  for (int r = 0; r < 2; ++r) {
    epoch1[r] += rows(held[r]);
    DataOnDemandChunk w = *s.Next(r, Completing(shape, held[r]), 5);
    EXPECT_TRUE(w.completion_counted());
    EXPECT_EQ(w.kind(), DataOnDemandChunk::WAIT) << "rank " << r;
    held.erase(r);
  }
  // Rank 2 completes the last of epoch 1 and is dealt the first of epoch 2.
  epoch1[2] += rows(held[2]);
  held[2] = *s.Next(2, Completing(shape, held[2]), 0);
  ASSERT_EQ(held[2].kind(), DataOnDemandChunk::CHUNK);
  EXPECT_EQ(held[2].epoch(), 1);
  EXPECT_EQ(epoch1[0] + epoch1[1] + epoch1[2], 11);
  for (int r = 0; r < 3; ++r) EXPECT_EQ(s.WorkerEpochRows(r, 0), epoch1[r]) << "rank " << r;
  ASSERT_EQ(s.coordinator()->completed_epochs(), 1);

  // Epoch 2: 0 and 1 take one each; 2 completes its first and takes another,
  // then is killed holding it (declared gone: Leave).
  held[0] = *s.Next(0, shape, 0);
  held[1] = *s.Next(1, shape, 0);
  const int64_t killed_rows = rows(held[2]);
  const DataOnDemandChunk lost = *s.Next(2, Completing(shape, held[2]), 0);
  ASSERT_EQ(lost.kind(), DataOnDemandChunk::CHUNK);
  EXPECT_EQ(lost.epoch(), 1);
  held.erase(2);
  EXPECT_EQ(s.Leave(2), 1);
  EXPECT_EQ(s.Leave(2), 0);  // once is all: a second declaration finds nothing
  // Rank 7 joins: it is dealt the lost chunk first, marked re-dealt.
  DataOnDemandChunk joined = *s.Next(7, shape, 0);
  ASSERT_EQ(joined.kind(), DataOnDemandChunk::CHUNK);
  EXPECT_TRUE(joined.redealt());
  EXPECT_EQ(joined.epoch(), 1);
  EXPECT_EQ(joined.begin(), lost.begin());
  EXPECT_EQ(joined.end(), lost.end());
  EXPECT_NE(joined.id(), lost.id());
  held[7] = joined;
  // Ranks 0, 1 and 7 finish the job in turn.
  std::map<int, int64_t> epoch2;
  bool done = false;
  for (int turn = 0; turn < 100 && !done; ++turn) {
    for (int r : {0, 1, 7}) {
      auto h = held.find(r);
      DataOnDemandChunk req = shape;
      if (h != held.end()) {
        req = Completing(shape, h->second);
        epoch2[r] += rows(h->second);
        held.erase(h);
      }
      DataOnDemandChunk g = *s.Next(r, req, 0);
      if (req.completed_id() != 0) {
        EXPECT_TRUE(g.completion_counted()) << "rank " << r;
      }
      if (g.kind() == DataOnDemandChunk::CHUNK) {
        EXPECT_EQ(g.epoch(), 1);
        EXPECT_FALSE(g.redealt());
        held[r] = g;
      }
      done = done || g.kind() == DataOnDemandChunk::DONE;
    }
  }
  ASSERT_TRUE(done);
  ASSERT_TRUE(held.empty());
  EXPECT_EQ(epoch2[0] + epoch2[1] + epoch2[7] + killed_rows, 11);
  for (int r : {0, 1, 7}) EXPECT_EQ(s.WorkerEpochRows(r, 1), epoch2[r]) << "rank " << r;
  EXPECT_EQ(s.WorkerEpochRows(2, 1), killed_rows);
  EXPECT_GE(s.WorkerEpochRows(7, 1), rows(lost));
  EXPECT_EQ(s.WorkerEpochRows(7, 0), 0);
  ShardStats stats;
  s.FillStats(&stats);
  EXPECT_EQ(stats.chunks_dealt(), 13u);  // 6 chunks × 2 epochs, one of them twice
  EXPECT_EQ(stats.chunks_redealt(), 1u);
  EXPECT_EQ(stats.rows_redealt(), static_cast<uint64_t>(rows(lost)));
  ASSERT_EQ(stats.chunk_epoch_rows_size(), 2);
  EXPECT_EQ(stats.chunk_epoch_rows(0), 11);
  EXPECT_EQ(stats.chunk_epoch_rows(1), 11);
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

// A copy of the dealing (Snapshot, Restore into a fresh service) deals
// exactly as the original from then on, on random schedules of requests,
// completions (some stale), leaves and rejoins: same replies, same counts.
// In rows (plain and tapered) and in bytes of streamed files.
void CheckCopyDealsAlike(const DataOnDemandChunk& shape, uint32_t seed) {
  std::mt19937 rng(seed);
  ChunkService a;
  std::unique_ptr<ChunkService> b;
  std::map<int, DataOnDemandChunk> held;  // rank → its last reply
  const int copy_at = 5 + static_cast<int>(rng() % 40);
  int compared = 0;
  for (int step = 0; step < 400; ++step) {
    if (step == copy_at || (step > copy_at && step % 29 == 0)) {  // copied again now and then
      ChunkDealingState state;
      a.Snapshot(&state);
      b = std::make_unique<ChunkService>();
      ASSERT_TRUE(b->Restore(state).ok());
      ChunkDealingState again;
      b->Snapshot(&again);
      ASSERT_EQ(again.SerializeAsString(), state.SerializeAsString());
    }
    const int rank = static_cast<int>(rng() % 4);
    if (rng() % 13 == 0) {
      const int n = a.Leave(rank);
      if (b) {
        EXPECT_EQ(b->Leave(rank), n);
      }
      held.erase(rank);
      continue;
    }
    DataOnDemandChunk req = shape;
    auto it = held.find(rank);
    if (it != held.end() && it->second.kind() == DataOnDemandChunk::CHUNK) {
      req.set_completed_id(rng() % 17 == 0 ? it->second.id() + 1000 : it->second.id());  // now and then a stale one
      req.set_completed_rows(static_cast<int64_t>(it->second.end() - it->second.begin()) % 50 + 1);
    }
    const int64_t max_clock = static_cast<int64_t>(rng() % 9);
    StatusOr<DataOnDemandChunk> ra = a.Next(rank, req, max_clock);
    ASSERT_TRUE(ra.ok()) << ra.status().message();
    held[rank] = *ra;
    if (!b) continue;
    StatusOr<DataOnDemandChunk> rb = b->Next(rank, req, max_clock);
    ASSERT_TRUE(rb.ok()) << rb.status().message();
    EXPECT_EQ(rb->SerializeAsString(), ra->SerializeAsString()) << "step " << step;
    ++compared;
  }
  ASSERT_TRUE(b);
  EXPECT_GT(compared, 300);
  ShardStats sa, sb;
  a.FillStats(&sa);
  b->FillStats(&sb);
  EXPECT_EQ(sb.SerializeAsString(), sa.SerializeAsString());
  EXPECT_GT(sa.chunks_redealt(), 0u) << "the schedule never re-dealt a chunk";
  ChunkDealingState ea, eb;
  a.Snapshot(&ea);
  b->Snapshot(&eb);
  EXPECT_EQ(eb.SerializeAsString(), ea.SerializeAsString());
}

TEST(ChunkServiceTest, ACopyDealsExactlyAsTheOriginal) {
  for (uint32_t seed = 1; seed <= 4; ++seed) CheckCopyDealsAlike(Ask(300, 16, 3, seed), seed);
}

TEST(ChunkServiceTest, ACopyOfTaperedChunksDealsExactlyAsTheOriginal) {
  DataOnDemandChunk shape = Ask(500, 40, 2, 9);
  shape.set_taper(true);
  CheckCopyDealsAlike(shape, 21);
}

TEST(ChunkServiceTest, ACopyOfStreamedChunksDealsExactlyAsTheOriginal) {
  DataOnDemandChunk shape = Ask(0, 100, 2, 5);
  for (uint64_t bytes : {4000, 900, 2500}) shape.add_file_bytes(bytes);
  for (bool gz : {false, true, false}) shape.add_file_gzip(gz);
  shape.set_chunk_bytes(300);
  CheckCopyDealsAlike(shape, 33);
}

TEST(ChunkServiceTest, ACopyKeepsACheckpointStateNotYetApplied) {
  // A resumed job copied before its first request: the copy applies the
  // checkpoint's state at that request as the original does.
  ChunkService first;
  const DataOnDemandChunk shape = Ask(100, 10, 2);
  DataOnDemandChunk held = *first.Next(0, shape, 0);
  held = *first.Next(0, Completing(shape, held), 0);
  ChunkCoordinatorState saved;
  ASSERT_TRUE(first.SaveState(4, &saved));
  ChunkService a;
  ASSERT_TRUE(a.Resume(saved).ok());
  ChunkDealingState state;
  a.Snapshot(&state);
  EXPECT_TRUE(state.has_resume());
  ChunkService b;
  ASSERT_TRUE(b.Restore(state).ok());
  const StatusOr<DataOnDemandChunk> ra = a.Next(1, shape, 0), rb = b.Next(1, shape, 0);
  ASSERT_TRUE(ra.ok() && rb.ok());
  EXPECT_TRUE(ra->redealt());  // the held chunk, dealt again first
  EXPECT_EQ(rb->SerializeAsString(), ra->SerializeAsString());
}

TEST(ChunkServiceTest, ACopyThatDoesNotFitItsShapeIsRefused) {
  ChunkService a;
  const DataOnDemandChunk shape = Ask(100, 10, 2);
  (void)*a.Next(0, shape, 0);
  ChunkDealingState state;
  a.Snapshot(&state);
  state.mutable_open(0)->add_undealt(10);  // chunk 10 of 10
  ChunkService b;
  const Status st = b.Restore(state);
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(st.message().find("chunk 10 outside the 10 chunks"), std::string::npos) << st.message();
  EXPECT_FALSE(b.active());
}

}  // namespace
}  // namespace tether
