// The best epoch's model on real ServerShards (threads, 127.0.0.1, port 0)
// through WorkerClients and JobSession::ModelCut: two shards keep the
// weights at the first MODEL_CUT of an epoch and put them back, refuse a
// restore of another epoch or one the job did not ask for, and a worker
// that left stalls nobody.
#include <gtest/gtest.h>

#include <vector>

#include "worker/client/client.h"
#include "worker/client/job_session.h"
#include "worker/trainer.h"
#include "tests/testing/cluster.h"

namespace tether {
namespace {

constexpr uint32_t kW1 = 0;  // XMC tables: w1 rows of `hidden` floats
const std::vector<uint64_t> kKeys = {1, 2, 3, 4, 5, 6, 7, 8};

JobConfig TwoByTwo() {
  return testing::SgdJob(/*servers=*/2, /*workers=*/2, /*features=*/10, /*labels=*/3, /*hidden=*/2,
                         /*learning_rate=*/1.0f, /*timeout_ms=*/20000);
}

std::unique_ptr<WorkerClient> Connect(const testing::InProcessCluster& cluster, int rank, bool keep) {
  ClientOptions o = cluster.Options(rank);
  o.keep_best_model = keep;
  return testing::ConnectClient(o);
}

// One push of `g` to every key of kKeys, answered.
void Push(WorkerClient* w, float g) {
  const std::vector<float> grads(kKeys.size() * 2, g);
  w->PushRows(kW1, kKeys, grads.data());
  ASSERT_TRUE(w->WaitAll().ok());
}

// The shards' rows now: the client's cache (fed by its own pushes' replies)
// emptied first.
std::vector<float> Pull(WorkerClient* w) {
  w->ClearCache();
  std::vector<float> rows(kKeys.size() * 2);
  EXPECT_TRUE(w->PullRows(kW1, kKeys, rows.data()).Wait().ok());
  return rows;
}

TEST(BestModelTest, ShardsKeepTheFirstCutOfAnEpochAndPutItBack) {
  testing::InProcessCluster cluster(TwoByTwo());
  auto w0 = Connect(cluster, 0, true);
  auto w1 = Connect(cluster, 1, true);
  ASSERT_TRUE(w0 && w1);
  JobSession s0(w0.get()), s1(w1.get());
  Push(w0.get(), 0.5f);
  Push(w1.get(), 0.25f);
  // Epoch 1 is best: w0's MODEL_CUT takes the copy, w1's finds it taken
  // after w0 already pushed epoch 2's first update.
  StatusOr<int> kept = s0.ModelCut(1, /*restore=*/false);
  ASSERT_TRUE(kept.ok()) << kept.status().message();
  EXPECT_EQ(*kept, 1);
  const std::vector<float> at_cut = Pull(w0.get());
  Push(w0.get(), -2.0f);
  ASSERT_TRUE(s1.ModelCut(1, false).ok());
  Push(w1.get(), 1.0f);
  ASSERT_NE(Pull(w1.get()), at_cut);
  // After training every worker asks; the first restores, each reads the
  // kept weights afterwards (its cache emptied).
  kept = s1.ModelCut(1, /*restore=*/true);
  ASSERT_TRUE(kept.ok()) << kept.status().message();
  EXPECT_EQ(*kept, 1);
  EXPECT_EQ(Pull(w1.get()), at_cut);
  ASSERT_TRUE(s0.ModelCut(1, true).ok());
  EXPECT_EQ(Pull(w0.get()), at_cut);
  // A restore of another epoch than the copy's: refused by each shard,
  // naming both epochs; nothing changes.
  const StatusOr<int> other = s0.ModelCut(2, true);
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("the copy of the model kept here is epoch 1's, but the workers ask "
                                          "for epoch 2's"),
            std::string::npos)
      << other.status().message();
  EXPECT_EQ(Pull(w1.get()), at_cut);
}

// A worker that left is waited for by nobody: the other's keep and restore
// are answered at once.
TEST(BestModelTest, AWorkerThatLeftStallsNobody) {
  testing::InProcessCluster cluster(TwoByTwo());
  auto w0 = Connect(cluster, 0, true);
  auto w1 = Connect(cluster, 1, true);
  ASSERT_TRUE(w0 && w1);
  Push(w0.get(), 0.5f);
  ASSERT_TRUE(JobSession(w1.get()).Leave(1000).ok());
  JobSession s0(w0.get());
  ASSERT_TRUE(s0.ModelCut(1, false).ok());
  const std::vector<float> at_cut = Pull(w0.get());
  Push(w0.get(), 0.5f);
  ASSERT_TRUE(s0.ModelCut(1, true).ok());
  EXPECT_EQ(Pull(w0.get()), at_cut);
}

// Worker 0's HELLO decides: a job that did not ask for the copy refuses
// MODEL_CUT, naming the field.
TEST(BestModelTest, AJobThatDidNotAskRefusesModelCut) {
  testing::InProcessCluster cluster(TwoByTwo());
  auto w0 = Connect(cluster, 0, false);
  ASSERT_TRUE(w0);
  const StatusOr<int> refused = JobSession(w0.get()).ModelCut(1, false);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("MODEL_CUT from worker 0: worker 0's HELLO did not ask for "
                                            "train.keep_best_model"),
            std::string::npos)
      << refused.status().message();
}

}  // namespace
}  // namespace tether
