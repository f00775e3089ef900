// Weighted model averaging (consistency model AVERAGE) end to end with real
// ServerShards (threads, 127.0.0.1, port 0) and WorkerClients with a
// LocalReplica attached: the exact equivalence with synchronous SGD, the
// weighting by updates, a worker that leaves mid-round, and one parked at
// the validation round partway into a round.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <thread>

#include "server/server.h"
#include "worker/client/client.h"
#include "worker/client/job_session.h"
#include "worker/client/local_replica.h"
#include "worker/trainer.h"
#include "tests/testing/cluster.h"

namespace tether {
namespace {

constexpr uint32_t kW1 = 0, kB1 = 1;  // XMC tables with hidden 1: w1 rows of 1 float, b1 dense of 1
constexpr float kLr = 0.1f;

JobConfig AverageJob(int servers, int workers, int64_t period_rows, double momentum = 0) {
  JobConfig c = testing::SgdJob(servers, workers, /*features=*/50, /*labels=*/4, /*hidden=*/1, kLr, /*timeout_ms=*/30000);
  c.mutable_consistency()->set_model(AVERAGE);
  c.mutable_consistency()->set_period_rows(period_rows);
  if (momentum > 0) c.mutable_consistency()->set_model_momentum(momentum);
  return c;
}


// A tiny linear regression: p = Σ x_f·w_f + b, loss mean ½(p − y)² over the
// minibatch; w in table w1 (feature f = key f), b in dense b1.
struct Row {
  std::vector<std::pair<uint64_t, float>> x;
  float y = 0;
};
using Batch = std::vector<Row>;

Batch MakeBatch(std::mt19937* rng) {
  std::uniform_real_distribution<float> val(-1.0f, 1.0f);
  std::uniform_int_distribution<int> feat(0, 9);  // overlapping features between workers
  Batch b(3);
  for (Row& r : b) {
    std::map<uint64_t, float> x;
    for (int k = 0; k < 3; ++k) x[static_cast<uint64_t>(feat(*rng))] = val(*rng);
    r.x.assign(x.begin(), x.end());
    r.y = val(*rng);
  }
  return b;
}

std::vector<uint64_t> KeysOf(const Batch& b) {
  std::map<uint64_t, int> k;
  for (const Row& r : b)
    for (auto& [f, v] : r.x) k[f] = 1;
  std::vector<uint64_t> keys;
  for (auto& [f, one] : k) keys.push_back(f);
  return keys;
}

// Mean gradient of the batch at (w, b): per key of KeysOf(batch), and db.
template <typename W>
void Gradient(const Batch& batch, const W& w, double b, std::map<uint64_t, double>* gw, double* gb) {
  gw->clear();
  *gb = 0;
  for (const Row& r : batch) {
    double p = b;
    for (auto& [f, v] : r.x) p += v * w(f);
    const double e = (p - r.y) / batch.size();
    for (auto& [f, v] : r.x) (*gw)[f] += e * v;
    *gb += e;
  }
}

// One minibatch step of a worker through its client (replica attached):
// pull, gradient, push, and (period = 1 minibatch) Clock.
Status WorkerStep(WorkerClient* c, const Batch& batch) {
  const std::vector<uint64_t> keys = KeysOf(batch);
  std::vector<float> w(keys.size()), b(1);
  TETHER_RETURN_IF_ERROR(WaitAllOf({c->PullRows(kW1, keys, w.data()), c->PullDense(kB1, b.data())}));
  std::map<uint64_t, float> wm;
  for (size_t i = 0; i < keys.size(); ++i) wm[keys[i]] = w[i];
  std::map<uint64_t, double> gw;
  double gb;
  Gradient(batch, [&](uint64_t f) { return static_cast<double>(wm[f]); }, b[0], &gw, &gb);
  std::vector<float> g(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) g[i] = static_cast<float>(gw[keys[i]]);
  const float gbf = static_cast<float>(gb);
  (void)c->PushRows(kW1, keys, g.data());
  (void)c->PushDense(kB1, &gbf);
  return Status::OK();
}

// The servers' model (keys 0..9 of w1, and b1), read with the replica paused.
Status ReadModel(WorkerClient* c, std::vector<float>* w, float* b) {
  std::vector<uint64_t> keys(10);
  for (uint64_t k = 0; k < 10; ++k) keys[k] = k;
  w->assign(10, 0.0f);
  std::vector<float> bb(1);
  c->set_replica_paused(true);
  Status st = WaitAllOf({c->PullRows(kW1, keys, w->data()), c->PullDense(kB1, bb.data())});
  c->set_replica_paused(false);
  *b = bb[0];
  return st;
}

// Workers 0 and 1 of a job under AVERAGE on real shards, each client with a
// LocalReplica attached as the trainer makes it, and the model they start
// from (ReadModel).
class Average : public ::testing::Test {
 protected:
  void Start(const JobConfig& job) {
    cluster_ = std::make_unique<testing::InProcessCluster>(job, /*validate=*/true);
    w0 = ConnectWithReplica(0);
    w1 = ConnectWithReplica(1);
    ASSERT_TRUE(w0 && w1);
    ASSERT_TRUE(ReadModel(w0.get(), &start, &start_b).ok());
  }
  // Each shard's AVERAGE counters (the metrics JSON's servers[].average_*),
  // read once the shards stopped.
  std::vector<ShardAverageStats> StopAndAverageStats() {
    cluster_->Stop();
    std::vector<ShardAverageStats> out;
    for (int s = 0; s < cluster_->size(); ++s) out.push_back(cluster_->server(s).SnapshotStats().average());
    return out;
  }

  std::unique_ptr<testing::InProcessCluster> cluster_;
  std::unique_ptr<WorkerClient> w0, w1;
  std::vector<float> start;
  float start_b = 0;

 private:
  std::unique_ptr<WorkerClient> ConnectWithReplica(int rank) {
    std::unique_ptr<WorkerClient> client = cluster_->Connect(rank);
    if (client) client->AttachReplica(std::make_unique<LocalReplica>(cluster_->Options(rank).tables, client.get()));
    return client;
  }
};

// The exact equivalence: equal-speed workers, plain SGD without momentum,
// a period of 1 minibatch: the merged model is synchronous SGD with the
// gradient averaged over both workers' minibatches, value by value, 1e-6.
TEST_F(Average, TwoEqualWorkersPeriodOneMatchSynchronousSgd) {
  const JobConfig job = AverageJob(/*servers=*/2, /*workers=*/2, /*period_rows=*/3);
  ASSERT_EQ(AveragePeriodMinibatches([&] { JobConfig j = job; j.mutable_train()->set_minibatch_size(3); return j; }()), 1);
  ASSERT_NO_FATAL_FAILURE(Start(job));

  constexpr int kSteps = 12;
  std::vector<Batch> batches[2];
  std::mt19937 rng(7);
  for (int t = 0; t < kSteps; ++t)
    for (int r = 0; r < 2; ++r) batches[r].push_back(MakeBatch(&rng));

  // Reference: synchronous SGD on the union of the two minibatches (each of
  // 3 rows): θ ← θ − lr·(g₀ + g₁)/2, in double.
  std::vector<double> w(start.begin(), start.end());
  double b = start_b;
  for (int t = 0; t < kSteps; ++t) {
    std::map<uint64_t, double> g[2];
    double gb[2];
    for (int r = 0; r < 2; ++r) Gradient(batches[r][t], [&](uint64_t f) { return w[f]; }, b, &g[r], &gb[r]);
    for (int r = 0; r < 2; ++r)
      for (auto& [f, v] : g[r]) w[f] -= kLr * v / 2;
    b -= kLr * (gb[0] + gb[1]) / 2;
  }

  Status status[2];
  std::thread threads[2];
  WorkerClient* clients[2] = {w0.get(), w1.get()};
  for (int r = 0; r < 2; ++r) {
    threads[r] = std::thread([&, r] {
      for (int t = 0; t < kSteps && status[r].ok(); ++t) {
        status[r] = WorkerStep(clients[r], batches[r][t]);
        if (status[r].ok()) status[r] = clients[r]->Clock();
      }
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_TRUE(status[0].ok()) << status[0].ToString();
  ASSERT_TRUE(status[1].ok()) << status[1].ToString();
  EXPECT_EQ(w0->replica()->stats().periods, static_cast<uint64_t>(kSteps));
  EXPECT_EQ(w0->replica()->stats().local_updates, static_cast<uint64_t>(kSteps));

  // Worker 0 at clock kSteps reads once round kSteps − 1 is merged.
  std::vector<float> got;
  float got_b = 0;
  ASSERT_TRUE(ReadModel(w0.get(), &got, &got_b).ok());
  bool moved = false;
  for (size_t f = 0; f < 10; ++f) {
    EXPECT_NEAR(got[f], w[f], 1e-6) << "w1 row " << f;
    moved |= std::fabs(w[f] - start[f]) > 1e-3;
  }
  EXPECT_NEAR(got_b, b, 1e-6) << "b1";
  EXPECT_TRUE(moved) << "the model did not train";
  ASSERT_TRUE(JobSession(w0.get()).Bye().ok());
  ASSERT_TRUE(JobSession(w1.get()).Bye().ok());
  // The counters: every worker did kSteps local steps, one per round, and
  // ended every round with a delta; each shard merged the kSteps rounds,
  // each with both workers' deltas (a worker's weight counts on a shard
  // even in a round it sent no rows there), and discarded none.
  for (WorkerClient* c : clients) {
    EXPECT_EQ(c->replica()->stats().local_updates, static_cast<uint64_t>(kSteps));
    EXPECT_EQ(c->replica()->stats().deltas_pushed, static_cast<uint64_t>(kSteps));
  }
  const std::vector<ShardAverageStats> shards = StopAndAverageStats();
  ASSERT_EQ(shards.size(), 2u);
  for (const ShardAverageStats& s : shards) {
    EXPECT_EQ(s.rounds_merged(), static_cast<uint64_t>(kSteps));
    EXPECT_EQ(s.deltas_merged(), 2u * kSteps);
    EXPECT_EQ(s.deltas_discarded(), 0u);
    EXPECT_EQ(s.rows_discarded(), 0u);
  }
}

// Weights by updates: worker 0 does 3 local steps in the round, worker 1
// one; the merged delta is (3·Δ₀ + 1·Δ₁)/4 for each row.
TEST_F(Average, MergeWeighsByLocalUpdates) {
  ASSERT_NO_FATAL_FAILURE(Start(AverageJob(1, 2, /*period_rows=*/1)));
  const std::vector<uint64_t> key{4};
  std::vector<float> v(1);
  // Worker 0: three steps of gradient 1 on row 4 (Δ₀ = −0.3); worker 1: one
  // step of gradient −2 (Δ₁ = +0.2).
  const float g0 = 1.0f, g1 = -2.0f;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(w0->PullRows(kW1, key, v.data()).Wait().ok());
    (void)w0->PushRows(kW1, key, &g0);
  }
  ASSERT_TRUE(w1->PullRows(kW1, key, v.data()).Wait().ok());
  (void)w1->PushRows(kW1, key, &g1);
  ASSERT_TRUE(w0->Clock().ok());
  ASSERT_TRUE(w1->Clock().ok());
  std::vector<float> got;
  float got_b = 0;
  ASSERT_TRUE(ReadModel(w0.get(), &got, &got_b).ok());
  EXPECT_NEAR(got[4], start[4] + (3 * (-0.3f) + 1 * 0.2f) / 4, 1e-6);
  EXPECT_FLOAT_EQ(got[5], start[5]);
  EXPECT_FLOAT_EQ(got_b, start_b);
  ASSERT_TRUE(JobSession(w0.get()).Bye().ok());
  ASSERT_TRUE(JobSession(w1.get()).Bye().ok());
  EXPECT_EQ(w0->replica()->stats().local_updates, 3u);
  EXPECT_EQ(w0->replica()->stats().deltas_pushed, 1u);
  EXPECT_EQ(w1->replica()->stats().local_updates, 1u);
  EXPECT_EQ(w1->replica()->stats().deltas_pushed, 1u);
  const std::vector<ShardAverageStats> shards = StopAndAverageStats();
  ASSERT_EQ(shards.size(), 1u);
  EXPECT_EQ(shards[0].rounds_merged(), 1u);
  EXPECT_EQ(shards[0].deltas_merged(), 2u);
  EXPECT_EQ(shards[0].deltas_discarded(), 0u);
}

// A worker that pushed its delta but left before ending the round (no
// CLOCK): its delta is discarded, the round closes on the others, and the
// survivor's next pull is answered.
TEST_F(Average, WorkerLeavingMidRoundIsDiscarded) {
  ASSERT_NO_FATAL_FAILURE(Start(AverageJob(1, 2, /*period_rows=*/1)));
  const std::vector<uint64_t> key{2};
  std::vector<float> v(1);
  const float g0 = 1.0f, g1 = 100.0f;
  ASSERT_TRUE(w0->PullRows(kW1, key, v.data()).Wait().ok());
  (void)w0->PushRows(kW1, key, &g0);
  ASSERT_TRUE(w1->PullRows(kW1, key, v.data()).Wait().ok());
  (void)w1->PushRows(kW1, key, &g1);
  EXPECT_EQ(w1->replica()->EndPeriod(), 1u);  // its delta goes out ...
  ASSERT_TRUE(JobSession(w1.get()).Bye().ok());                // ... but it leaves without its CLOCK
  ASSERT_TRUE(w0->Clock().ok());
  std::vector<float> got;
  float got_b = 0;
  ASSERT_TRUE(ReadModel(w0.get(), &got, &got_b).ok());
  EXPECT_NEAR(got[2], start[2] - kLr * g0, 1e-6);
  ASSERT_TRUE(JobSession(w0.get()).Bye().ok());
  // Worker 1 pushed one delta (row 2), which the shard discarded: one
  // round merged, with worker 0's delta only.
  EXPECT_EQ(w1->replica()->stats().deltas_pushed, 1u);
  const std::vector<ShardAverageStats> shards = StopAndAverageStats();
  ASSERT_EQ(shards.size(), 1u);
  EXPECT_EQ(shards[0].rounds_merged(), 1u);
  EXPECT_EQ(shards[0].deltas_merged(), 1u);
  EXPECT_EQ(shards[0].deltas_discarded(), 1u);
  EXPECT_EQ(shards[0].rows_discarded(), 1u);
}

// The validation round at an epoch's end under AVERAGE, when the workers'
// epochs take different numbers of rounds: worker 1 waits there parked,
// partway into its round 1 (a step taken, the round not ended); worker 0
// ended round 1 and reads the servers' model for its own part. Its read is
// answered (worker 1 does not hold the bound while parked), and the model
// it reads is round 0's merge: round 1 stays open until worker 1 ends it
// after the round, with its delta counted.
TEST_F(Average, AParkedWorkerLetsTheOtherReachTheRound) {
  ASSERT_NO_FATAL_FAILURE(Start(AverageJob(1, 2, /*period_rows=*/1)));
  const std::vector<uint64_t> key{4};
  std::vector<float> v(1);
  const float g0 = 1.0f, g1 = -2.0f;  // Δ₀ = −0.1, Δ₁ = +0.2 a step
  auto step = [&](WorkerClient* c, const float* g) {
    ASSERT_TRUE(c->PullRows(kW1, key, v.data()).Wait().ok());
    (void)c->PushRows(kW1, key, g);
  };
  ASSERT_NO_FATAL_FAILURE(step(w0.get(), &g0));  // round 0
  ASSERT_TRUE(w0->Clock().ok());
  ASSERT_NO_FATAL_FAILURE(step(w1.get(), &g1));
  ASSERT_TRUE(w1->Clock().ok());
  ASSERT_NO_FATAL_FAILURE(step(w0.get(), &g0));  // round 1: worker 0 ends it ...
  ASSERT_TRUE(w0->Clock().ok());
  ASSERT_NO_FATAL_FAILURE(step(w1.get(), &g1));  // ... worker 1 is partway
  ASSERT_TRUE(w1->ParkClock(true).ok());
  const float round0 = start[4] + (-0.1f + 0.2f) / 2;
  std::vector<float> got;
  float got_b = 0;
  ASSERT_TRUE(ReadModel(w0.get(), &got, &got_b).ok());  // at clock 2
  EXPECT_NEAR(got[4], round0, 1e-6) << "worker 0 read a round worker 1 has not ended";
  ASSERT_TRUE(ReadModel(w1.get(), &got, &got_b).ok());  // at clock 1: the same model
  EXPECT_NEAR(got[4], round0, 1e-6);
  ASSERT_TRUE(w1->ParkClock(false).ok());
  ASSERT_TRUE(w1->Clock().ok());  // ends round 1 with its step
  // Worker 1's read follows its CLOCK on the connection (Clock does not
  // wait for its own answer): worker 0's after it finds round 1 merged.
  for (WorkerClient* c : {w1.get(), w0.get()}) {
    ASSERT_TRUE(ReadModel(c, &got, &got_b).ok());
    EXPECT_NEAR(got[4], round0 + (-0.1f + 0.2f) / 2, 1e-6);
  }
  ASSERT_TRUE(JobSession(w0.get()).Bye().ok());
  ASSERT_TRUE(JobSession(w1.get()).Bye().ok());
  const std::vector<ShardAverageStats> shards = StopAndAverageStats();
  ASSERT_EQ(shards.size(), 1u);
  EXPECT_EQ(shards[0].rounds_merged(), 2u);
  EXPECT_EQ(shards[0].deltas_merged(), 4u);
  EXPECT_EQ(shards[0].deltas_discarded(), 0u);
}

}  // namespace
}  // namespace tether
