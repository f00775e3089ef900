// Consistency tests with a real ServerShard (threads, 127.0.0.1, port 0) and
// WorkerClients driven from the test thread: the SSP invariant on a
// randomised schedule, BSP with one worker against sequential SGD, ASP,
// read-my-writes, the worker cache, and membership under the bound (C18).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <random>
#include <thread>

#include "core/env.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/trained_model.h"
#include "optim/optimizer.h"
#include "server/server.h"
#include "compute/cpu_backend.h"
#include "worker/client/client.h"
#include "worker/client/job_session.h"
#include "worker/models/model_registry.h"
#include "worker/trainer.h"
#include "worker/models/xmc_mlp.h"
#include "tests/testing/cluster.h"
#include "tests/testing/temp_dir.h"

namespace tether {
namespace {

constexpr uint32_t kW1 = 0, kB1 = 1, kW2 = 2;

JobConfig Job(int servers, int workers, int64_t staleness, int hidden = 1) {
  JobConfig c = testing::SgdJob(servers, workers, /*features=*/50, /*labels=*/4, hidden, /*learning_rate=*/1.0f,
                                /*timeout_ms=*/30000);
  c.mutable_consistency()->set_staleness(staleness);
  if (staleness < 0) c.mutable_consistency()->set_model(ASP);
  return c;
}

using Cluster = testing::InProcessCluster;

// Connects workers 0 and 1 of `cluster` and reads `key` of w1 through worker
// 0 into *before; a fatal failure unless all of it succeeds.
void ConnectPairAndRead(const Cluster& cluster, const std::vector<uint64_t>& key, std::unique_ptr<WorkerClient>* a,
                        std::unique_ptr<WorkerClient>* b, float* before) {
  *a = cluster.Connect(0);
  *b = cluster.Connect(1);
  ASSERT_TRUE(*a && *b);
  ASSERT_TRUE((*a)->PullRows(kW1, key, before).Wait().ok());
}

// W workers; worker w owns key w and pushes +1 to it once per clock. On a
// random schedule every read is checked: a read at clock c includes at least
// the c − s pushes each worker made in clocks ≤ c − s − 1, includes every push
// of the reader itself (read-my-writes), and completes without waiting
// whenever every worker's clock is ≥ c − s; when the bound does not hold the
// read waits until it does. `capacity`: each worker's cache capacity in
// bytes (0: unbounded); a tiny one evicts rows all the time, and the
// invariant must hold all the same.
//
// Elastic membership (`max_workers` > `workers`): at random steps a worker
// with a new rank joins (cluster.max_workers) or a live one leaves (BYE).
// A joiner must start at the slowest live clock (within the one CLOCK each
// worker may have in flight), and from then on counts: a read at clock c
// includes at least c − s − c0 pushes of a live worker that joined at c0,
// those of one that left up to where it left, none of a rank not yet
// joined; the joiner's
// first read, at its start clock, is checked at once, and the bound is
// computed over the live workers only (one that left holds nobody back).
void RunRandomSchedule(int64_t s, bool cache, int workers, int steps, uint32_t seed, uint64_t capacity = 0,
                       bool refresh_on_push = true, int max_workers = 0, bool parking = false) {
  const bool elastic = max_workers > workers;
  const int ranks = elastic ? max_workers : workers;
  JobConfig job = Job(2, workers, s);
  job.mutable_consistency()->set_cache(cache);
  job.mutable_consistency()->set_refresh_on_push(refresh_on_push);
  if (elastic) job.mutable_cluster()->set_max_workers(max_workers);
  Cluster cluster(job);
  std::vector<std::unique_ptr<WorkerClient>> w(ranks);
  for (int r = 0; r < workers; ++r) w[r] = cluster.Connect(r, capacity);
  for (int r = 0; r < workers; ++r) ASSERT_TRUE(w[r]);
  std::vector<uint64_t> keys(ranks);
  for (int r = 0; r < ranks; ++r) keys[r] = r;
  std::vector<float> init(ranks);
  ASSERT_TRUE(w[0]->PullRows(kW1, keys, init.data()).Wait().ok());

  // live: joined and not left. start: the clock a rank joined at.
  std::vector<bool> live(ranks, false), left(ranks, false), parked(ranks, false);
  for (int r = 0; r < workers; ++r) live[r] = true;
  std::vector<int64_t> clocks(ranks, 0), pushes(ranks, 0), start(ranks, 0);
  std::vector<RequestHandle> last_push(ranks);  // each rank's latest push, answered once applied
  int next_rank = workers, joins = 0, leaves = 0, joiner_first_reads = 0;
  // `issued`: every rank's clock when the read was sent; `saw_park`: a
  // worker was parked while it waited (ClockTracker::Park), so a parked
  // worker's updates are due only as far as its clock then.
  struct PendingRead {
    bool active = false, saw_park = false;
    RequestHandle pull;
    int64_t clock = 0;
    std::vector<float> out;
    std::vector<int64_t> issued;
  };
  std::vector<PendingRead> pending(ranks);
  std::mt19937 rng(seed);
  int reads_checked = 0, reads_blocked = 0, parks = 0, reads_past_parked = 0;
  auto min_live = [&](bool skip_parked) {
    int64_t m = std::numeric_limits<int64_t>::max();
    for (int r = 0; r < ranks; ++r)
      if (live[r] && !(skip_parked && parked[r])) m = std::min(m, clocks[r]);
    return m;
  };
  // The bound's minimum: over the workers not parked, or every live one
  // when all are parked.
  auto min_clock = [&] {
    const int64_t m = min_live(true);
    return m == std::numeric_limits<int64_t>::max() ? min_live(false) : m;
  };
  auto any_parked = [&] { return std::count(parked.begin(), parked.end(), true) > 0; };
  auto check = [&](int r, const PendingRead& p) {
    for (int k = 0; k < ranks; ++k) {
      const int64_t seen = std::lround(p.out[k] - init[k]);
      const int64_t required = s < 0 ? 0 : std::max<int64_t>(0, p.clock - s - start[k]);
      if (k == r) {
        EXPECT_EQ(seen, pushes[r]) << "read-my-writes: worker " << r << " at clock " << p.clock;
      } else if (left[k]) {
        // It pushed once per clock from start[k] to clocks[k] (when it left):
        // those of clocks < c − s are due, its later ones may be.
        const int64_t due = s < 0 ? 0 : std::max<int64_t>(0, std::min(p.clock - s, clocks[k]) - start[k]);
        EXPECT_GE(seen, due) << "worker " << r << " at clock " << p.clock << " misses updates of worker " << k
                             << ", which left at clock " << clocks[k];
        EXPECT_LE(seen, pushes[k]);
      } else if (!live[k]) {
        EXPECT_EQ(seen, 0) << "worker " << r << ": rank " << k << " has not joined";
      } else {
        const int64_t due =
            p.saw_park && s >= 0 ? std::max<int64_t>(0, std::min(p.clock - s, p.issued[k]) - start[k]) : required;
        if (due < required) ++reads_past_parked;
        EXPECT_GE(seen, due) << "worker " << r << " at clock " << p.clock << " misses updates of worker " << k
                             << " (joined at clock " << start[k] << ")";
        EXPECT_LE(seen, pushes[k]);
      }
    }
    ++reads_checked;
  };
  auto live_count = [&] { return static_cast<int>(std::count(live.begin(), live.end(), true)); };
  for (int step = 0; step < steps; ++step) {
    if (elastic && rng() % 16 == 0) {
      if (next_rank < ranks && rng() % 2 == 0) {
        // A worker with a new rank joins at the slowest live clock.
        const int r = next_rank++;
        const int64_t slowest = min_live(false);
        w[r] = cluster.Connect(r, capacity);
        ASSERT_TRUE(w[r]) << "join of rank " << r;
        start[r] = clocks[r] = w[r]->clock();
        EXPECT_LE(start[r], slowest) << "joiner " << r << " starts ahead of the slowest live worker";
        EXPECT_GE(start[r], slowest - 1) << "joiner " << r << " starts behind the slowest live worker";
        live[r] = true;
        ++joins;
        // Its first read: every update older than its clock minus s.
        PendingRead first;
        first.clock = clocks[r];
        first.out.assign(ranks, 0.0f);
        first.issued = clocks;
        first.saw_park = any_parked();
        Status st = w[r]->PullRows(kW1, keys, first.out.data()).Wait(5000);
        ASSERT_TRUE(st.ok()) << "joiner " << r << "'s first read: " << st.ToString();
        check(r, first);
        ++joiner_first_reads;
        continue;
      }
      // A live worker with no read outstanding leaves (one stays at least).
      std::vector<int> can;
      for (int r = 0; r < ranks; ++r)
        if (live[r] && !pending[r].active && !parked[r]) can.push_back(r);
      if (live_count() > 1 && !can.empty()) {
        const int r = can[rng() % can.size()];
        ASSERT_TRUE(JobSession(w[r].get()).Bye().ok()) << "worker " << r << " leaving";
        live[r] = false;
        left[r] = true;
        ++leaves;
        continue;
      }
    }
    std::vector<int> alive;
    for (int r = 0; r < ranks; ++r)
      if (live[r]) alive.push_back(r);
    const int r = alive[rng() % alive.size()];
    PendingRead& p = pending[r];
    if (parking && parked[r]) {
      // The round is over for it: it counts again, before its next clock.
      ASSERT_TRUE(w[r]->ParkClock(false).ok());
      // STATS follows it on the same connection: once answered, every
      // shard holds the bound for it again.
      ASSERT_TRUE(JobSession(w[r].get()).FetchServerStats().ok());
      parked[r] = false;
      continue;
    }
    if (parking && !p.active && rng() % 8 == 0) {
      // It waits at a round: its pushes applied, it stops holding the bound.
      ASSERT_TRUE(w[r]->WaitAll().ok());
      ASSERT_TRUE(w[r]->ParkClock(true).ok());
      parked[r] = true;
      ++parks;
      for (PendingRead& q : pending)
        if (q.active) q.saw_park = true;
      continue;
    }
    const bool bound_holds = [&] { return s < 0 || min_clock() >= p.clock - s; }();
    if (p.active) {
      if (bound_holds) {
        Status st = p.pull.Wait(5000);
        ASSERT_TRUE(st.ok()) << "released read of worker " << r << ": " << st.ToString();
        check(r, p);
        p.active = false;
      } else if (!p.saw_park) {
        EXPECT_EQ(p.pull.Wait(20).code(), Status::Code::kDeadlineExceeded)
            << "worker " << r << " read at clock " << p.clock << " past the bound (min clock " << min_clock() << ")";
      }  // else a park may have released it already; checked once the bound holds
      continue;
    }
    // One clock of work: push, clock, then read every key at the new clock.
    const float g = -1.0f;  // SGD, lr 1: w -= g → +1
    last_push[r] = w[r]->PushRows(kW1, {keys[r]}, &g);
    ++pushes[r];
    ASSERT_TRUE(w[r]->Clock().ok());
    ++clocks[r];
    p.clock = clocks[r];
    p.out.assign(ranks, 0.0f);
    p.issued = clocks;
    p.saw_park = any_parked();
    p.pull = w[r]->PullRows(kW1, keys, p.out.data());
    p.active = true;
    if (s < 0 || min_clock() >= p.clock - s) {
      Status st = p.pull.Wait(5000);
      ASSERT_TRUE(st.ok()) << "read within the bound must not wait: " << st.ToString();
      check(r, p);
      p.active = false;
    } else {
      ++reads_blocked;
    }
  }
  EXPECT_GT(reads_checked, steps / 4);
  if (s >= 0 && workers > 1) {
    EXPECT_GT(reads_blocked, 0) << "the schedule never exercised the bound";
  }
  if (s < 0) {
    EXPECT_EQ(reads_blocked, 0);
  }
  if (parking) {
    ::testing::Test::RecordProperty("parks", parks);
    EXPECT_GT(parks, 0) << "the schedule never parked a worker";
    if (s >= 0) {
      EXPECT_GT(reads_past_parked, 0) << "no read went past a parked worker's clock";
    }
  }
  if (elastic) {
    ::testing::Test::RecordProperty("joins", joins);
    ::testing::Test::RecordProperty("leaves", leaves);
    ::testing::Test::RecordProperty("reads_checked", reads_checked);
    ::testing::Test::RecordProperty("reads_blocked", reads_blocked);
    EXPECT_GT(joins, 0) << "the schedule never added a worker";
    EXPECT_GT(leaves, 0) << "the schedule never removed a worker";
    EXPECT_EQ(joiner_first_reads, joins);
    for (int sh = 0; sh < 2; ++sh) EXPECT_EQ(cluster.server(sh).stats().workers_joined, static_cast<uint64_t>(joins));
  }
  for (int sh = 0; sh < 2; ++sh) EXPECT_EQ(cluster.server(sh).stats().bound_violations, 0u);
  // Read exactly once the shards stopped. Every push reached the one shard
  // that owns its key and was applied there (a CLOCK's answer follows it);
  // and the job coordinator, which learns membership only from the events
  // its shard forwards, knows every rank as the test does: joined, and left
  // when it said BYE.
  // A push is known applied once answered: the CLOCK after it is answered
  // by shard 0 only, so a rank's last push to another shard may still be in
  // flight here.
  for (int r = 0; r < ranks; ++r)
    if (live[r] && !last_push[r].empty()) {
      ASSERT_TRUE(last_push[r].Wait(5000).ok()) << "worker " << r << "'s last push";
    }
  cluster.Stop();
  uint64_t applied = 0, rows = 0, made = 0;
  for (int sh = 0; sh < 2; ++sh) {
    applied += cluster.server(sh).stats().pushes;
    rows += cluster.server(sh).stats().updates_applied;
  }
  for (int r = 0; r < ranks; ++r) made += static_cast<uint64_t>(pushes[r]);
  EXPECT_EQ(applied, made);
  EXPECT_EQ(rows, made);
  ASSERT_NE(cluster.server(0).coordinator(), nullptr);
  EXPECT_EQ(cluster.server(1).coordinator(), nullptr);
  const CoordinatorState state = cluster.server(0).coordinator()->Snapshot();
  std::vector<bool> joined(ranks, false), said_bye(ranks, false);
  for (const CoordinatorRank& c : state.ranks()) {
    ASSERT_LT(c.rank(), ranks);
    joined[c.rank()] = c.joined();
    said_bye[c.rank()] = c.left();
    EXPECT_FALSE(c.removed()) << "rank " << c.rank();
  }
  for (int r = 0; r < ranks; ++r) {
    EXPECT_EQ(joined[r], live[r] || left[r]) << "rank " << r;
    EXPECT_EQ(said_bye[r], left[r]) << "rank " << r;
  }
  if (capacity > 0 && cache && s >= 0) {
    uint64_t evictions = 0, hits = 0;
    for (auto& c : w) {
      if (!c) continue;
      EXPECT_LE(c->stats().cache_peak_bytes, capacity);
      EXPECT_EQ(c->stats().cache_capacity_bytes, capacity);
      evictions += c->stats().cache_evictions;
      hits += c->stats().cache_hits;
    }
    EXPECT_GT(evictions, 0u) << "the capacity never bound";
    EXPECT_GT(hits, 0u) << "the cache never served";
  }
}

TEST(ConsistencyTest, SspInvariantOnRandomScheduleS0) { RunRandomSchedule(0, true, 3, 300, 1); }
TEST(ConsistencyTest, SspInvariantOnRandomScheduleS2) { RunRandomSchedule(2, true, 3, 400, 2); }
// Room for two of the three rows (dim 1: 4 bytes + the entry overhead).
constexpr uint64_t kTwoRows = 2 * (sizeof(float) + ParamCache::kEntryOverheadBytes);
TEST(ConsistencyTest, SspInvariantOnRandomScheduleS2TinyCache) { RunRandomSchedule(2, true, 3, 400, 5, kTwoRows); }
TEST(ConsistencyTest, SspInvariantOnRandomScheduleS3TinyCacheNoRefresh) {
  RunRandomSchedule(3, true, 3, 400, 6, kTwoRows, /*refresh_on_push=*/false);
}
TEST(ConsistencyTest, SspInvariantOnRandomScheduleS3NoCache) { RunRandomSchedule(3, false, 4, 400, 3); }
TEST(ConsistencyTest, AspNeverBlocks) { RunRandomSchedule(-1, true, 3, 300, 4); }
// Elastic membership: 2 initial workers, up to 6 ranks, random joins and
// leaves (BYE) between the clocks.
TEST(ConsistencyTest, SspInvariantWithJoinsAndLeavesS0) {
  RunRandomSchedule(0, true, 2, 500, 11, 0, true, /*max_workers=*/6);
}
TEST(ConsistencyTest, SspInvariantWithJoinsAndLeavesS2) {
  RunRandomSchedule(2, true, 2, 600, 12, 0, true, /*max_workers=*/6);
}
TEST(ConsistencyTest, SspInvariantWithJoinsAndLeavesS3NoCache) {
  RunRandomSchedule(3, false, 1, 600, 13, 0, true, /*max_workers=*/5);
}
TEST(ConsistencyTest, SspInvariantWithJoinsAndLeavesTinyCache) {
  RunRandomSchedule(1, true, 2, 500, 14, kTwoRows, /*refresh_on_push=*/false, /*max_workers=*/6);
}
// Workers park at random (waiting at a round, ClockTracker::Park) and
// unpark before their next clock: reads go past a parked worker's clock
// without waiting, and see every update it made.
TEST(ConsistencyTest, SspInvariantWithParkedWorkersS0) {
  RunRandomSchedule(0, true, 3, 500, 21, 0, true, 0, /*parking=*/true);
}
TEST(ConsistencyTest, SspInvariantWithParkedWorkersS2NoCache) {
  RunRandomSchedule(2, false, 3, 500, 22, 0, true, 0, /*parking=*/true);
}
TEST(ConsistencyTest, SspInvariantWithParkedWorkersJoinsAndLeaves) {
  RunRandomSchedule(1, true, 2, 600, 23, 0, true, /*max_workers=*/5, /*parking=*/true);
}
TEST(ConsistencyTest, AspWithJoinsAndLeavesNeverBlocks) {
  RunRandomSchedule(-1, true, 2, 400, 15, 0, true, /*max_workers=*/6);
}

// Checkpoints are a consistent cut (checkpoint/checkpoint.h), whatever the
// bound: W workers, each on its own thread, own key w and push +1 to it once
// per clock for K clocks, with random jitter and a pull per clock (so SSP
// makes them wait on each other); every 7th clock is a checkpoint clock
// (every_clocks), and at random clocks a worker asks shard 0 for one
// (want_checkpoint). For every checkpoint at clock c, key w holds exactly c
// pushes of every worker: each update of clocks < c and none later, even
// under ASP, where workers drift apart; and every worker took part in the
// same checkpoints.
void RunCheckpointSchedule(int64_t s, int workers, int clocks, uint32_t seed) {
  testing::ScopedTempDir tmp;
  JobConfig job = Job(2, workers, s);
  Cluster cluster(job);
  const std::vector<TableSpec> tables = TablesForJob(job);
  std::vector<std::vector<int64_t>> taken(workers);
  std::vector<int64_t> requested_clocks(workers, 0);
  std::vector<std::string> errors(workers);
  std::vector<std::thread> threads;
  for (int r = 0; r < workers; ++r) {
    threads.emplace_back([&, r] {
      auto fail = [&](const std::string& what, const Status& st) { errors[r] = what + ": " + st.ToString(); };
      std::unique_ptr<WorkerClient> c = cluster.Connect(r);
      if (!c) return fail("connect", Status::Unavailable("no client"));
      std::mt19937 rng(seed * 31 + r);
      const std::vector<uint64_t> key = {static_cast<uint64_t>(r)};
      float out = 0;
      for (int k = 0; k < clocks; ++k) {
        const float g = -1.0f;  // SGD, lr 1: +1
        c->PushRows(kW1, key, &g);
        if (Status st = c->PullRows(kW1, key, &out).Wait(); !st.ok()) return fail("pull", st);
        // Jitter, so that workers drift apart within the bound: up to 1 ms
        // of yielding, bounded in time. A count of 2,000 yields took
        // seconds on a loaded machine (each yield gives up a time slice),
        // past the client's 10 s request timeout while the other workers
        // waited at the checkpoint's cut.
        const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(rng() % 1000);
        while (std::chrono::steady_clock::now() < until) std::this_thread::yield();
        const bool want = rng() % 17 == 0;
        requested_clocks[r] += want ? 1 : 0;
        if (Status st = c->Clock(want); !st.ok()) return fail("clock", st);
        const int64_t now = c->clock();
        if (now % 7 != 0 && now != c->due_checkpoint_clock()) continue;
        const std::string dir = tmp.path() + "/" + CheckpointDirName(now, false);
        WorkerState state;
        state.set_rank(r);
        state.set_clock(now);
        CheckpointFile file;
        if (Status st = WriteWorkerState(FileSystem::Default(), dir, state, &file); !st.ok()) return fail("state", st);
        StatusOr<CheckpointReply> reply = JobSession(c.get()).Checkpoint(dir, false, &file);
        if (!reply.ok()) return fail("checkpoint at " + std::to_string(now), reply.status());
        taken[r].push_back(now);
        if (r != 0) continue;
        CheckpointManifest m;
        m.set_format_version(kCheckpointFormatVersion);
        m.set_clock(now);
        m.set_num_servers(2);
        m.set_num_workers(workers);
        for (const TableSpec& t : tables) *m.add_tables() = t;
        for (const CheckpointFile& f : reply->shard_files) *m.add_files() = f;
        for (const CheckpointWorker& w : reply->workers) {
          *m.add_workers() = w;
          if (w.kind() == CheckpointWorker::TRAINING) *m.add_files() = w.file();
        }
        if (static_cast<int>(reply->workers.size()) != workers)
          return fail("manifest", Status::DataLoss("entries for " + std::to_string(reply->workers.size()) + " ranks"));
        if (Status st = WriteManifest(FileSystem::Default(), dir, m); !st.ok()) return fail("manifest", st);
      }
      if (Status st = JobSession(c.get()).Bye(); !st.ok()) return fail("bye", st);
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < workers; ++r) ASSERT_EQ(errors[r], "") << "worker " << r;
  for (int r = 1; r < workers; ++r) EXPECT_EQ(taken[r], taken[0]) << "worker " << r << " took other checkpoints";
  int requested = 0;
  for (int64_t c : taken[0]) {
    requested += c % 7 != 0 ? 1 : 0;
    StatusOr<TrainedModel> model = LoadTrainedModel(tmp.path() + "/" + CheckpointDirName(c, false));
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    const TrainedTable& w1 = model->tables[kW1];
    ASSERT_EQ(w1.keys.size(), static_cast<size_t>(workers)) << "clock " << c;
    for (int r = 0; r < workers; ++r) {
      const float init = InitialWeight(1, kW1, r, 0, tables[kW1].init().bound());
      EXPECT_EQ(std::lround(w1.values[r] - init), c)
          << "checkpoint at clock " << c << ": worker " << r << "'s key holds another number of pushes";
    }
  }
  EXPECT_GE(taken[0].size(), static_cast<size_t>(clocks / 7));
  int64_t asked = 0;
  for (int64_t n : requested_clocks) asked += n;
  if (asked > 3) {
    EXPECT_GT(requested, 0) << asked << " requests were made but shard 0 picked no clock";
  }
}

TEST(ConsistencyTest, CheckpointIsAConsistentCutUnderBsp) { RunCheckpointSchedule(0, 3, 60, 1); }
TEST(ConsistencyTest, CheckpointIsAConsistentCutUnderSsp) { RunCheckpointSchedule(3, 3, 80, 2); }
TEST(ConsistencyTest, CheckpointIsAConsistentCutUnderAsp) { RunCheckpointSchedule(-1, 4, 80, 3); }

// BSP with one worker is plain sequential SGD, bit for bit: the XMC MLP
// trained through 2 shards equals the same steps applied locally.
TEST(ConsistencyTest, BspOneWorkerEqualsSequentialSgdBitForBit) {
  const int H = 8, F = 50, L = 4, B = 5;
  JobConfig job = Job(2, 1, 0, H);
  job.mutable_optimizer()->set_learning_rate(0.3f);
  Cluster cluster(job);
  auto w = cluster.Connect(0);
  ASSERT_TRUE(w);
  const auto tables = TablesForJob(job);
  CpuBackend backend(1);
  XmcMlp model({F, H, L, XmcLoss::kSoftmax}, &backend);
  // Local replica with the servers' initializer.
  std::vector<float> w1(F * H), b1(H, 0.0f), w2(L * (H + 1));
  for (int f = 0; f < F; ++f)
    for (int j = 0; j < H; ++j) w1[f * H + j] = InitialWeight(1, 0, f, j, tables[0].init().bound());
  for (int l = 0; l < L; ++l)
    for (int j = 0; j <= H; ++j) w2[l * (H + 1) + j] = InitialWeight(1, 2, l, j, tables[2].init().bound());
  Optimizer sgd(job.optimizer());
  std::mt19937 rng(5);
  std::vector<uint64_t> labels_keys = {0, 1, 2, 3};
  for (int step = 0; step < 30; ++step) {
    CsrMatrix x, y;
    x.cols = F;
    y.cols = L;
    for (int r = 0; r < B; ++r) {
      std::vector<uint32_t> idx;
      for (uint32_t f = rng() % 7; f < static_cast<uint32_t>(F); f += 3 + rng() % 9) idx.push_back(f);
      std::vector<float> val(idx.size(), 1.0f);
      x.AppendRow(idx.data(), val.data(), idx.size());
      uint32_t lab = rng() % L;
      float one = 1.0f;
      y.AppendRow(&lab, &one, 1);
    }
    std::vector<uint64_t> keys;
    CsrMatrix xl;
    ASSERT_TRUE(LocalizeBatch(x, 0, B, &keys, &xl).ok());
    // Through the servers.
    std::vector<float> pw1(keys.size() * H), pb1(H), pw2(L * (H + 1));
    ASSERT_TRUE(w->PullRows(kW1, keys, pw1.data()).Wait().ok());
    ASSERT_TRUE(w->PullDense(kB1, pb1.data()).Wait().ok());
    ASSERT_TRUE(w->PullRows(kW2, labels_keys, pw2.data()).Wait().ok());
    // Local replica must hold the same bits before the step.
    for (size_t i = 0; i < keys.size(); ++i)
      for (int j = 0; j < H; ++j) ASSERT_EQ(pw1[i * H + j], w1[keys[i] * H + j]) << "step " << step;
    ASSERT_EQ(pb1, b1);
    ASSERT_EQ(pw2, w2);
    std::vector<float> ww2(L * H), bb2(L);
    for (int l = 0; l < L; ++l) {
      std::copy_n(&pw2[l * (H + 1)], H, &ww2[l * H]);
      bb2[l] = pw2[l * (H + 1) + H];
    }
    XmcGrads g;
    ASSERT_TRUE(model.ComputeGradients(xl, y, {pw1.data(), static_cast<int64_t>(keys.size()), pb1.data(), ww2.data(), bb2.data()}, &g).ok());
    std::vector<float> g2(L * (H + 1));
    for (int l = 0; l < L; ++l) {
      std::copy_n(&g.w2[l * H], H, &g2[l * (H + 1)]);
      g2[l * (H + 1) + H] = g.b2[l];
    }
    w->PushRows(kW1, keys, g.w1.data());
    w->PushDense(kB1, g.b1.data());
    w->PushRows(kW2, labels_keys, g2.data());
    ASSERT_TRUE(w->Clock().ok());
    // Sequential SGD on the replica.
    for (size_t i = 0; i < keys.size(); ++i) sgd.Apply(&w1[keys[i] * H], nullptr, &g.w1[i * H], H);
    sgd.Apply(b1.data(), nullptr, g.b1.data(), H);
    sgd.Apply(w2.data(), nullptr, g2.data(), g2.size());
  }
  std::vector<uint64_t> all(F);
  std::iota(all.begin(), all.end(), 0);
  std::vector<float> final_w1(F * H);
  ASSERT_TRUE(w->PullRows(kW1, all, final_w1.data()).Wait().ok());
  EXPECT_EQ(final_w1, w1);
}

// Pull counts on a fixed schedule: one worker reads keys 0..9 once per clock
// for 20 clocks, pushing nothing. A row read when the min clock was r serves
// reads at clocks ≤ r + s, so the worker pulls every (s + 1)-th clock:
// ⌈20 / (s + 1)⌉ pulls from each shard holding keys, and 10 rows per pull.
TEST(ConsistencyTest, CacheCutsPullsAsStalenessGrows) {
  const std::vector<std::pair<int64_t, uint64_t>> expected = {{0, 20}, {1, 10}, {2, 7}, {4, 4}, {8, 3}};
  for (auto [s, pulls_per_shard] : expected) {
    Cluster cluster(Job(1, 1, s));
    auto w = cluster.Connect(0);
    ASSERT_TRUE(w);
    std::vector<uint64_t> keys(10);
    std::iota(keys.begin(), keys.end(), 0);
    std::vector<float> out(10);
    for (int c = 0; c < 20; ++c) {
      ASSERT_TRUE(w->PullRows(kW1, keys, out.data()).Wait().ok());
      ASSERT_TRUE(w->Clock().ok());
    }
    EXPECT_EQ(w->stats().pulls, pulls_per_shard) << "s = " << s;
    EXPECT_EQ(w->stats().rows_pulled, pulls_per_shard * 10) << "s = " << s;
    EXPECT_EQ(w->stats().cache_hits, (20 - pulls_per_shard) * 10) << "s = " << s;
  }
}

// Read-my-writes through the cache, in both push modes: a read right after a
// push (reply not yet seen) includes the push.
TEST(ConsistencyTest, ReadMyWritesWithCache) {
  for (bool refresh : {true, false}) {
    JobConfig job = Job(2, 2, 3);
    job.mutable_consistency()->set_refresh_on_push(refresh);
    Cluster cluster(job);
    auto w = cluster.Connect(0);
    ASSERT_TRUE(w);
    std::vector<uint64_t> keys = {1, 2, 3, 4};
    std::vector<float> before(4), after(4);
    ASSERT_TRUE(w->PullRows(kW1, keys, before.data()).Wait().ok());
    for (int i = 1; i <= 3; ++i) {
      std::vector<float> g(4, -1.0f);
      w->PushRows(kW1, keys, g.data());
      ASSERT_TRUE(w->PullRows(kW1, keys, after.data()).Wait().ok());
      for (int k = 0; k < 4; ++k) EXPECT_FLOAT_EQ(after[k], before[k] + i) << "refresh_on_push " << refresh;
    }
    // The last reads came from the cache when pushes ship rows back.
    if (refresh) {
      EXPECT_GE(w->stats().cache_hits, 8u);
    }
  }
}

// Staleness tagging and staleness-aware steps (Zhang et al., IJCAI 2016):
// worker 0 reads key 9 at version v, worker 1 then pushes to it twice, and
// worker 0's push computed from version v has τ = 2. With SGD (lr 1) the step
// is g under NONE, g/2 under INVERSE and g/3 under INVERSE_PLUS_ONE.
TEST(ConsistencyTest, StalenessPolicyScalesTheStepByTau) {
  const std::vector<std::pair<StalenessPolicy, float>> cases = {
      {NONE, 1.0f}, {INVERSE, 0.5f}, {INVERSE_PLUS_ONE, 1.0f / 3.0f}};
  for (auto [policy, scale] : cases) {
    JobConfig job = Job(1, 2, -1);
    job.mutable_consistency()->set_staleness_policy(policy);
    Cluster cluster(job);
    const std::vector<uint64_t> key = {9};
    std::unique_ptr<WorkerClient> a, b;
    float before = 0, after = 0;
    ASSERT_NO_FATAL_FAILURE(ConnectPairAndRead(cluster, key, &a, &b, &before));
    const float g_b = -1.0f;  // +1 each, each computed from a fresh read (τ = 0)
    for (int i = 0; i < 2; ++i) {
      float seen = 0;
      ASSERT_TRUE(b->PullRows(kW1, key, &seen).Wait().ok());
      b->PushRows(kW1, key, &g_b);
      ASSERT_TRUE(b->WaitAll().ok());
    }
    const float g_a = -3.0f;  // +3 × scale
    a->PushRows(kW1, key, &g_a);
    ASSERT_TRUE(a->WaitAll().ok());
    ASSERT_TRUE(a->PullRows(kW1, key, &after).Wait().ok());
    EXPECT_FLOAT_EQ(after, before + 2.0f + 3.0f * scale) << StalenessPolicy_Name(policy);
    EXPECT_EQ(cluster.server(0).stats().staleness.max, 2u);
    EXPECT_EQ(cluster.server(0).stats().staleness.count[2], 1u);
    EXPECT_EQ(cluster.server(0).stats().staleness.count[0], 2u);
  }
}

// Adaptive batch sizes on the wire (server/coordinator/batch_controller.h): a push's
// step follows its batch size (LINEAR scales the gradient on the worker,
// SERVER_WEIGHT the shard's step, exactly, under SGD with rate 1); shard 0
// answers a CLOCK that carries a report with a size (B during warm-up), and
// refuses a worker whose settings differ from the job's, naming both.
TEST(ConsistencyTest, AdaptiveBatchScalesPushesAndShardZeroAnswersSizes) {
  Cluster cluster(Job(2, 2, -1));
  const std::vector<uint64_t> key = {9};
  std::unique_ptr<WorkerClient> a, b;
  float before = 0, after = 0;
  ASSERT_NO_FATAL_FAILURE(ConnectPairAndRead(cluster, key, &a, &b, &before));
  const float g = -2.0f;
  a->SetPushScaling(0.5f, 1.0f);  // LINEAR, b / B = 1/2: +1
  a->PushRows(kW1, key, &g);
  a->SetPushScaling(1.0f, 0.25f);  // SERVER_WEIGHT, b / B = 1/4: +0.5
  a->PushRows(kW1, key, &g);
  a->SetPushScaling(1.0f, 1.0f);  // unscaled: +2
  a->PushRows(kW1, key, &g);
  ASSERT_TRUE(a->WaitAll().ok());
  ASSERT_TRUE(a->PullRows(kW1, key, &after).Wait().ok());
  EXPECT_FLOAT_EQ(after, before + 1.0f + 0.5f + 2.0f);

  AdaptiveBatchClock report;
  report.set_rows(60);
  report.set_batch_size(60);
  report.set_minibatch_size(60);
  report.mutable_config()->set_enabled(true);
  report.mutable_config()->set_b_min(10);
  report.mutable_config()->set_b_max(200);
  report.mutable_config()->set_warmup_clocks(1);
  for (int c = 0; c < 2; ++c) {
    a->SetAdaptiveBatchReport(report);
    ASSERT_TRUE(a->Clock().ok());
  }
  ASSERT_TRUE(a->WaitAll().ok());
  EXPECT_EQ(a->adaptive_batch_size(), 60);  // alone (and warming up): B
  AdaptiveBatchClock other = report;
  other.mutable_config()->set_b_max(100);
  b->SetAdaptiveBatchReport(other);
  ASSERT_TRUE(b->Clock().ok());  // the answer is waited for at the next clock
  const Status st = b->Clock();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("train.adaptive_batch differs from the job's"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("b_max: 100"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("b_max: 200"), std::string::npos) << st.message();
}

// C18 in one process: 4 workers, s = 3. Worker 2 stops (no BYE) at clock 5;
// the others advance at most s + 1 clocks past it, block, and are released
// once the servers drop it after worker_timeout_ms; a new worker 2 rejoins at
// the slowest live clock and reads fresh rows.
TEST(ConsistencyTest, DeadWorkerIsRemovedAndRejoinsAtSlowestClock) {
  JobConfig job = Job(2, 4, 3);
  job.mutable_cluster()->set_worker_timeout_ms(600);
  job.mutable_cluster()->set_heartbeat_interval_ms(100);
  Cluster cluster(job);
  std::vector<std::unique_ptr<WorkerClient>> w;
  for (int r = 0; r < 4; ++r) w.push_back(cluster.Connect(r));
  std::vector<uint64_t> keys = {0, 1, 2, 3};
  std::vector<float> out(4);
  for (int c = 0; c < 5; ++c)
    for (int r = 0; r < 4; ++r) ASSERT_TRUE(w[r]->Clock().ok());
  w[2].reset();  // dies at clock 5: no BYE, no more heartbeats
  // Survivors run until blocked: reads at clock ≤ 5 + 3 succeed.
  int64_t reached = 0;
  const auto t0 = std::chrono::steady_clock::now();
  while (true) {
    for (int r : {0, 1, 3}) ASSERT_TRUE(w[r]->Clock().ok());
    const RequestHandle pull = w[0]->PullRows(kW1, keys, out.data());
    Status st = pull.Wait(300);
    if (!st.ok()) {
      EXPECT_EQ(st.code(), Status::Code::kDeadlineExceeded);
      reached = w[0]->clock();
      // Released once the servers drop worker 2 (600 ms after its last
      // message); workers 1 and 3 stay alive meanwhile (heartbeats).
      bool released = false;
      for (int i = 0; i < 60 && !released; ++i) {
        ASSERT_TRUE(w[1]->Idle(40).ok());
        ASSERT_TRUE(w[3]->Idle(40).ok());
        released = pull.Wait(40).ok();
      }
      ASSERT_TRUE(released);
      break;
    }
  }
  const double released_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(reached, 5 + 3 + 1) << "the first read past the bound is at clock s + 1 beyond the dead worker's";
  EXPECT_LT(released_s, 5.0);
  EXPECT_EQ(cluster.server(0).stats().workers_timed_out, 1u);
  // Rejoin: worker 2 starts at the slowest live clock.
  w[2] = cluster.Connect(2);
  ASSERT_TRUE(w[2]);
  EXPECT_EQ(w[2]->clock(), reached);
  ASSERT_TRUE(w[2]->PullRows(kW1, keys, out.data()).Wait(2000).ok());
  EXPECT_EQ(w[2]->stats().cache_hits, 0u) << "a rejoining worker pulls fresh rows";
  EXPECT_EQ(cluster.server(1).stats().workers_rejoined, 1u);
  for (int r = 0; r < 4; ++r) ASSERT_TRUE(JobSession(w[r].get()).Bye().ok());
}

}  // namespace
}  // namespace tether
