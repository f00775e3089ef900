#include "checkpoint/chunk_state.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <vector>

#include "server/coordinator/chunk_coordinator.h"
#include "server/coordinator/chunk_service.h"

namespace tether {
namespace {

using Kind = ChunkCoordinator::GrantKind;

// The index of a chunk of MakeRowChunks(0, rows, chunk) by its first row.
uint32_t Index(const DataChunk& c, uint64_t chunk_rows) { return static_cast<uint32_t>(c.begin / chunk_rows); }
int64_t Rows(const DataChunk& c) { return static_cast<int64_t>(c.end - c.begin); }

std::set<uint32_t> AsSet(const google::protobuf::RepeatedField<uint32_t>& f) { return {f.begin(), f.end()}; }

// 98 rows in chunks of 10: 10 chunks, the last of 8 rows.
constexpr uint64_t kRows = 98, kChunk = 10;

TEST(ChunkStateTest, SaveListsTheExactCompletedAndHeldChunksAndRestoreDealsTheRestOnce) {
  ChunkCoordinator a(MakeRowChunks(0, kRows, kChunk), /*epochs=*/3, /*seed=*/11, /*shuffle=*/true,
                     /*epoch_barrier=*/true);
  // Epoch 0 whole.
  for (;;) {
    auto g = a.Next(0);
    if (g.kind != Kind::kChunk || g.epoch != 0) {
      ASSERT_EQ(g.kind, Kind::kChunk);  // the first chunk of epoch 1: keep it as held by rank 0
      break;
    }
    ASSERT_TRUE(a.Complete(0, g.id, Rows(g.chunk)).ok());
  }
  ASSERT_EQ(a.completed_epochs(), 1);
  // Epoch 1: rank 0 holds the chunk above; deal 5 more: 3 completed, one
  // held by rank 2, one by rank 3 who leaves (given back, not re-dealt yet).
  std::set<uint32_t> completed, held;
  auto first = a.Next(1);  // held by rank 1
  held.insert(Index(first.chunk, kChunk));
  for (int i = 0; i < 3; ++i) {
    auto g = a.Next(1);
    ASSERT_EQ(g.kind, Kind::kChunk);
    ASSERT_TRUE(a.Complete(1, g.id, Rows(g.chunk)).ok());
    completed.insert(Index(g.chunk, kChunk));
  }
  auto h2 = a.Next(2);
  held.insert(Index(h2.chunk, kChunk));
  auto h3 = a.Next(3);
  held.insert(Index(h3.chunk, kChunk));
  EXPECT_EQ(a.Leave(3), 1);
  // The chunk rank 0 got at the end of epoch 0 is epoch 1's first: held too.
  ChunkCoordinatorState s;
  a.SaveState(&s);
  EXPECT_EQ(s.completed_epochs(), 1);
  EXPECT_EQ(s.epochs(), 3);
  EXPECT_EQ(s.chunks_per_epoch(), 10u);
  ASSERT_EQ(s.epoch_rows_size(), 3);
  EXPECT_EQ(s.epoch_rows(0), 98);
  int64_t completed_rows = 0;
  for (uint32_t c : completed) completed_rows += c == 9 ? 8 : 10;
  EXPECT_EQ(s.epoch_rows(1), completed_rows);
  ASSERT_EQ(s.open_size(), 1);
  EXPECT_EQ(s.open(0).epoch(), 1);
  EXPECT_EQ(AsSet(s.open(0).completed()), completed);
  std::set<uint32_t> all_held = held;
  // Rank 0's chunk (dealt when epoch 0 completed) is held as well.
  EXPECT_EQ(s.open(0).held_size(), 4);
  for (uint32_t c : s.open(0).held()) all_held.insert(c);
  EXPECT_EQ(all_held.size(), 4u);
  EXPECT_EQ(AsSet(s.open(0).held()), all_held);

  // Restore: the held chunks go out first (re-dealt), then the undealt
  // ones; every chunk of epoch 1 not completed is dealt exactly once.
  ChunkCoordinator b(MakeRowChunks(0, kRows, kChunk), 3, 11, true, true);
  ASSERT_TRUE(b.RestoreState(s).ok());
  EXPECT_EQ(b.completed_epochs(), 1);
  EXPECT_EQ(b.epoch_rows(0), 98);
  std::set<uint32_t> dealt_after;
  int redealt = 0;
  for (;;) {
    auto g = b.Next(5);
    ASSERT_EQ(g.kind, Kind::kChunk);
    if (g.epoch != 1) break;
    EXPECT_TRUE(dealt_after.insert(Index(g.chunk, kChunk)).second) << "dealt twice";
    if (g.redealt) {
      ++redealt;
      EXPECT_TRUE(all_held.count(Index(g.chunk, kChunk))) << "only held chunks are re-dealt";
      EXPECT_EQ(dealt_after.size(), static_cast<size_t>(redealt)) << "held chunks go out first";
    }
    EXPECT_FALSE(completed.count(Index(g.chunk, kChunk))) << "a completed chunk dealt again";
    ASSERT_TRUE(b.Complete(5, g.id, Rows(g.chunk)).ok());
  }
  EXPECT_EQ(redealt, 4);
  EXPECT_EQ(dealt_after.size() + completed.size(), 10u);
  EXPECT_EQ(b.epoch_rows(1), 98);
  EXPECT_EQ(b.completed_epochs(), 2);
  EXPECT_EQ(b.redealt_chunks(), a.redealt_chunks() + 4);
  EXPECT_EQ(b.workers().at(1).chunks_completed, 3);  // carried over
}

TEST(ChunkStateTest, SaveRestoreSaveIsTheSameStateWhenNothingIsHeld) {
  ChunkCoordinator a(MakeRowChunks(0, kRows, kChunk), 4, 3, true, true);
  for (int i = 0; i < 14; ++i) {  // epoch 0 and 4 chunks of epoch 1
    auto g = a.Next(i % 3);
    ASSERT_EQ(g.kind, Kind::kChunk);
    ASSERT_TRUE(a.Complete(i % 3, g.id, Rows(g.chunk)).ok());
  }
  ChunkCoordinatorState s1, s2;
  a.SaveState(&s1);
  ChunkCoordinator b(MakeRowChunks(0, kRows, kChunk), 4, 3, true, true);
  ASSERT_TRUE(b.RestoreState(s1).ok());
  b.SaveState(&s2);
  EXPECT_EQ(s1.SerializeAsString(), s2.SerializeAsString()) << s1.DebugString() << "\nvs\n" << s2.DebugString();
  // And both deal the same chunks from here on.
  for (int i = 0; i < 30; ++i) {
    auto ga = a.Next(0), gb = b.Next(0);
    ASSERT_EQ(static_cast<int>(ga.kind), static_cast<int>(gb.kind));
    if (ga.kind != Kind::kChunk) break;
    EXPECT_EQ(ga.chunk, gb.chunk);
    EXPECT_EQ(ga.id, gb.id);
    ASSERT_TRUE(a.Complete(0, ga.id, Rows(ga.chunk)).ok());
    ASSERT_TRUE(b.Complete(0, gb.id, Rows(gb.chunk)).ok());
  }
}

// Random schedules of deals, completions and leaves (no barrier too), cut
// by a checkpoint at a random step and continued in a new coordinator:
// each epoch's completed rows are the training set exactly once, counting
// the completions before the checkpoint; completions after the checkpoint
// but before the "kill" are lost with the killed coordinator.
TEST(ChunkStateTest, RandomSchedulesWithACheckpointAndAKillCountEveryRowOncePerEpoch) {
  for (int trial = 0; trial < 200; ++trial) {
    std::mt19937 rng(static_cast<uint32_t>(trial));
    const bool barrier = trial % 2 == 0;
    const int64_t epochs = 1 + trial % 3;
    const uint64_t rows = 30 + rng() % 70, chunk = 3 + rng() % 9;
    auto make = [&] { return ChunkCoordinator(MakeRowChunks(0, rows, chunk), epochs, 17, true, barrier); };
    ChunkCoordinator co = make();
    // Completed chunks per epoch over the job (the survivor's history).
    std::map<int64_t, std::multiset<uint32_t>> done, done_at_cut;
    std::map<uint64_t, std::pair<int, ChunkCoordinator::Grant>> holding;
    const int cut = static_cast<int>(rng() % 200), kill = cut + static_cast<int>(rng() % 40);
    std::optional<ChunkCoordinatorState> saved;
    for (int step = 0; step < 5000 && !co.done(); ++step) {
      if (step == cut) {
        saved.emplace();
        co.SaveState(&*saved);
        done_at_cut = done;
      }
      if (step == kill && saved) {
        co = make();
        ASSERT_TRUE(co.RestoreState(*saved).ok()) << "trial " << trial;
        done = done_at_cut;
        holding.clear();
        saved.reset();
        continue;
      }
      const int rank = static_cast<int>(rng() % 4);
      const uint32_t action = rng() % 10;
      if (action < 5) {
        auto g = co.Next(rank);
        if (g.kind == Kind::kChunk) holding[g.id] = {rank, g};
      } else if (action < 9 && !holding.empty()) {
        auto it = holding.begin();
        std::advance(it, rng() % holding.size());
        const auto [r, g] = it->second;
        ASSERT_TRUE(co.Complete(r, g.id, Rows(g.chunk)).ok());
        done[g.epoch].insert(Index(g.chunk, chunk));
        holding.erase(it);
      } else {
        co.Leave(rank);
        for (auto it = holding.begin(); it != holding.end();)
          it = it->second.first == rank ? holding.erase(it) : std::next(it);
      }
    }
    // Drain.
    for (int step = 0; step < 10000 && !co.done(); ++step) {
      auto g = co.Next(0);
      ASSERT_EQ(g.kind, Kind::kChunk) << "trial " << trial;
      ASSERT_TRUE(co.Complete(0, g.id, Rows(g.chunk)).ok());
      done[g.epoch].insert(Index(g.chunk, chunk));
    }
    ASSERT_TRUE(co.done()) << "trial " << trial;
    const size_t n = (rows + chunk - 1) / chunk;
    for (int64_t e = 0; e < epochs; ++e) {
      EXPECT_EQ(co.epoch_rows(e), static_cast<int64_t>(rows)) << "trial " << trial << " epoch " << e;
      ASSERT_EQ(done[e].size(), n) << "trial " << trial << " epoch " << e;
      for (uint32_t c = 0; c < n; ++c) EXPECT_EQ(done[e].count(c), 1u) << "trial " << trial << " chunk " << c;
    }
  }
}

TEST(ChunkStateTest, AStateThatDoesNotFitIsRefusedNamingTheFieldAndNothingChanges) {
  ChunkCoordinator a(MakeRowChunks(0, kRows, kChunk), 2, 5, true, true);
  auto g = a.Next(0);
  ASSERT_TRUE(a.Complete(0, g.id, Rows(g.chunk)).ok());
  ChunkCoordinatorState good;
  a.SaveState(&good);
  auto refused = [&](ChunkCoordinatorState s, const std::string& field, uint64_t rows = kRows, uint64_t seed = 5) {
    ChunkCoordinator b(MakeRowChunks(0, rows, kChunk), 2, seed, true, true);
    const Status st = b.RestoreState(s);
    EXPECT_EQ(st.code(), Status::Code::kInvalidArgument) << field;
    EXPECT_NE(st.message().find("field " + field), std::string::npos) << st.message();
    // Unchanged: it deals epoch 0 from its start, all 10 chunks.
    int n = 0;
    for (auto x = b.Next(0); x.kind == Kind::kChunk && x.epoch == 0; x = b.Next(0)) ++n;
    EXPECT_EQ(n, static_cast<int>((rows + kChunk - 1) / kChunk)) << field;
    EXPECT_EQ(b.epoch_rows(0), 0) << field;
    EXPECT_EQ(b.redealt_chunks(), 0) << field;
  };
  refused(good, "chunks_per_epoch", /*rows=*/120);
  refused(good, "seed", kRows, /*seed=*/6);
  ChunkCoordinatorState s = good;
  s.mutable_open(0)->add_completed(s.open(0).completed(0));
  refused(s, "open (epoch 0)");
  s = good;
  s.mutable_open(0)->add_held(10);
  refused(s, "open (epoch 0)");
  s = good;
  s.set_completed_epochs(3);
  refused(s, "completed_epochs");
  s = good;
  s.add_epoch_rows(5);
  refused(s, "epoch_rows");
  s = good;
  s.set_shuffle(false);
  refused(s, "shuffle");
  // After dealing, no restore.
  ChunkCoordinator c(MakeRowChunks(0, kRows, kChunk), 2, 5, true, true);
  (void)c.Next(0);
  EXPECT_EQ(c.RestoreState(good).code(), Status::Code::kFailedPrecondition);
}

TEST(ChunkStateTest, ResumeMayChangeTheNumberOfEpochs) {
  ChunkCoordinator a(MakeRowChunks(0, kRows, kChunk), 2, 5, true, true);
  for (int i = 0; i < 13; ++i) {
    auto g = a.Next(0);
    ASSERT_TRUE(a.Complete(0, g.id, Rows(g.chunk)).ok());
  }
  ChunkCoordinatorState s;
  a.SaveState(&s);
  ChunkCoordinator more(MakeRowChunks(0, kRows, kChunk), 4, 5, true, true);
  ASSERT_TRUE(more.RestoreState(s).ok());
  EXPECT_EQ(more.completed_epochs(), 1);
  int dealt = 0;
  for (auto g = more.Next(0); g.kind == Kind::kChunk; g = more.Next(0), ++dealt)
    ASSERT_TRUE(more.Complete(0, g.id, Rows(g.chunk)).ok());
  EXPECT_EQ(dealt, 7 + 2 * 10);  // the rest of epoch 1, then epochs 2 and 3
  for (int e = 0; e < 4; ++e) EXPECT_EQ(more.epoch_rows(e), 98) << e;
  ChunkCoordinator fewer(MakeRowChunks(0, kRows, kChunk), 1, 5, true, true);
  ASSERT_TRUE(fewer.RestoreState(s).ok());
  EXPECT_TRUE(fewer.done());
  EXPECT_EQ(fewer.Next(0).kind, Kind::kDone);
}

DataOnDemandChunk Shape(uint64_t rows, uint64_t chunk, int64_t epochs, uint64_t seed) {
  DataOnDemandChunk r;
  r.set_train_rows(rows);
  r.set_chunk_rows(chunk);
  r.set_epochs(epochs);
  r.set_seed(seed);
  return r;
}

TEST(ChunkStateTest, ServiceResumesFromAStateAndRefusesAnotherShapeNamingTheField) {
  ChunkService a;
  const DataOnDemandChunk shape = Shape(kRows, kChunk, 2, 9);
  std::vector<int64_t> rank_rows(2, 0);
  // 11 chunks completed (epoch 0's 10, one of epoch 1), each by alternating
  // ranks, who then leave holding the next (given back), and one held.
  for (int i = 0; i < 11; ++i) {
    auto r = a.Next(i % 2, shape, 0);
    ASSERT_TRUE(r.ok());
    ASSERT_EQ(r->kind(), DataOnDemandChunk::CHUNK);
    DataOnDemandChunk done = shape;
    done.set_completed_id(r->id());
    done.set_completed_rows(static_cast<int64_t>(r->end() - r->begin()));
    auto next = a.Next(i % 2, done, 0);
    ASSERT_TRUE(next.ok());
    ASSERT_TRUE(next->completion_counted());
    rank_rows[i % 2] += static_cast<int64_t>(r->end() - r->begin());
    (void)a.Leave(i % 2);
  }
  ASSERT_TRUE(a.Next(0, shape, 0).ok());  // held at the checkpoint
  ChunkCoordinatorState s;
  ChunkService none;
  EXPECT_FALSE(none.SaveState(40, &s));
  ASSERT_TRUE(a.SaveState(40, &s));
  EXPECT_EQ(s.clock(), 40);
  EXPECT_EQ(s.train_rows(), kRows);
  EXPECT_EQ(s.chunk_rows(), kChunk);
  EXPECT_EQ(s.format_version(), kChunkStateFormatVersion);
  EXPECT_EQ(s.completed_epochs(), 1);
  EXPECT_EQ(s.epoch_rows(0) + s.epoch_rows(1), rank_rows[0] + rank_rows[1]);

  ChunkService b;
  ASSERT_TRUE(b.Resume(s).ok());
  for (const auto& [bad, field] : std::vector<std::pair<DataOnDemandChunk, std::string>>{
           {Shape(kRows + 1, kChunk, 2, 9), "train_rows (rows of the training set)"},
           {Shape(kRows, kChunk + 1, 2, 9), "train.chunk_rows"},
           {Shape(kRows, kChunk, 2, 8), "train.seed"}}) {
    auto r = b.Next(0, bad, 0);
    ASSERT_FALSE(r.ok()) << field;
    EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument);
    EXPECT_NE(r.status().message().find(field + ": the checkpoint has"), std::string::npos) << r.status().message();
    EXPECT_FALSE(b.active()) << "nothing created by a refused request";
  }
  // The right shape continues: epoch 1's remaining rows, once each.
  std::set<uint64_t> rows_after;
  DataOnDemandChunk r2 = shape;
  for (;;) {
    auto r = b.Next(3, r2, 0);
    ASSERT_TRUE(r.ok()) << r.status().message();
    if (r->kind() == DataOnDemandChunk::DONE) break;
    ASSERT_EQ(r->kind(), DataOnDemandChunk::CHUNK);
    EXPECT_EQ(r->epoch(), 1);
    for (uint64_t x = r->begin(); x < r->end(); ++x) EXPECT_TRUE(rows_after.insert(x).second);
    r2 = shape;
    r2.set_completed_id(r->id());
    r2.set_completed_rows(static_cast<int64_t>(r->end() - r->begin()));
  }
  EXPECT_EQ(static_cast<int64_t>(rows_after.size()) + s.epoch_rows(1), static_cast<int64_t>(kRows));
  ShardStats stats;
  b.FillStats(&stats);
  ASSERT_EQ(stats.chunk_epoch_rows_size(), 2);
  EXPECT_EQ(stats.chunk_epoch_rows(0), 98);
  EXPECT_EQ(stats.chunk_epoch_rows(1), 98);
  EXPECT_EQ(b.WorkerEpochRows(0, 0) + b.WorkerEpochRows(1, 0), 98) << "per-rank rows carried over";
  EXPECT_EQ(b.Resume(s).code(), Status::Code::kFailedPrecondition);
}

// train.chunk_taper: the state records it, a resume without it (or with it
// where the checkpoint had none) is refused naming the field, and a tapered
// resume deals the same tapered chunk list: every row of each epoch once.
TEST(ChunkStateTest, TaperedChunksResumeTaperedAndAnotherTaperIsRefused) {
  constexpr uint64_t kTaperRows = 1000, kTaperChunk = 64;
  DataOnDemandChunk shape = Shape(kTaperRows, kTaperChunk, 2, 3);
  shape.set_taper(true);
  const size_t tapered = MakeTaperedRowChunks(0, kTaperRows, kTaperChunk).size();
  ASSERT_GT(tapered, MakeRowChunks(0, kTaperRows, kTaperChunk).size()) << "the taper adds chunks";
  ChunkService a;
  std::set<uint64_t> rows_before;
  DataOnDemandChunk req = shape;
  for (int i = 0; i < 5; ++i) {  // 5 chunks of epoch 0 completed
    auto r = a.Next(0, req, 0);
    ASSERT_TRUE(r.ok());
    ASSERT_EQ(r->kind(), DataOnDemandChunk::CHUNK);
    for (uint64_t x = r->begin(); x < r->end(); ++x) ASSERT_TRUE(rows_before.insert(x).second);
    req = shape;
    req.set_completed_id(r->id());
    req.set_completed_rows(static_cast<int64_t>(r->end() - r->begin()));
  }
  ASSERT_TRUE(a.Next(0, req, 0).ok());  // the fifth completed, a sixth held at the checkpoint
  ChunkCoordinatorState s;
  ASSERT_TRUE(a.SaveState(20, &s));
  EXPECT_TRUE(s.taper());
  EXPECT_EQ(s.chunks_per_epoch(), tapered);
  EXPECT_EQ(s.epoch_rows(0), static_cast<int64_t>(rows_before.size()));

  ChunkService b;
  ASSERT_TRUE(b.Resume(s).ok());
  DataOnDemandChunk plain = shape;
  plain.set_taper(false);
  auto refused = b.Next(0, plain, 0);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("train.chunk_taper: the checkpoint has true, the job has false"),
            std::string::npos)
      << refused.status().message();
  EXPECT_FALSE(b.active());
  std::map<int64_t, std::set<uint64_t>> after;
  req = shape;
  for (;;) {
    auto r = b.Next(1, req, 0);
    ASSERT_TRUE(r.ok()) << r.status().message();
    if (r->kind() == DataOnDemandChunk::DONE) break;
    ASSERT_EQ(r->kind(), DataOnDemandChunk::CHUNK);
    for (uint64_t x = r->begin(); x < r->end(); ++x) EXPECT_TRUE(after[r->epoch()].insert(x).second);
    req = shape;
    req.set_completed_id(r->id());
    req.set_completed_rows(static_cast<int64_t>(r->end() - r->begin()));
  }
  EXPECT_EQ(rows_before.size() + after[0].size(), kTaperRows);
  for (uint64_t x : rows_before) EXPECT_EQ(after[0].count(x), 0u) << "row " << x << " trained twice in epoch 0";
  EXPECT_EQ(after[1].size(), kTaperRows);
}

}  // namespace
}  // namespace tether
