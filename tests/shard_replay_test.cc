// A shard is a deterministic state machine of the messages it takes in: a
// copy that replays them in the same order (ServerShard::Replay, fed
// through ShardInput's bytes as a replica is) holds the primary's state bit
// for bit. Real jobs train on Bibtex against ServerShards on threads (two
// workers on threads of their own, so the order of inputs is the
// scheduler's), every input each shard took in is recorded, and a copy of
// each shard replays them afterwards. Compared: the tables as a checkpoint
// writes them (rows, values, optimizer state, versions), the budget state
// (admission sketches, eviction order, counters), the clocks, the shard's
// counters, on shard 0 the job coordinator's state, and for a replicated
// shard its reply cache (server/reply_cache.h).
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "server/server.h"
#include "tests/testing/recorded_job.h"
#include "tests/testing/temp_dir.h"

namespace tether {
namespace {

struct Replayed {
  size_t inputs = 0;   // over all shards
  uint64_t evicted = 0;  // rows evicted on the primaries, all tables
};

// Trains `c` with every shard's inputs recorded, then replays each shard's
// inputs into a copy and compares.
Replayed TrainAndReplay(const JobConfig& c) {
  testing::RecordedJob job = testing::RunRecordedJob(c);
  for (const Status& st : job.workers) EXPECT_TRUE(st.ok()) << st.ToString();
  testing::ScopedTempDir tmp;
  Replayed replayed;
  for (int s = 0; s < c.cluster().num_servers(); ++s) {
    SCOPED_TRACE("shard " + std::to_string(s) + ", " + std::to_string(job.inputs[s].size()) + " inputs");
    ServerShard copy(c, s);
    if (!testing::ReplayInputs(job.inputs[s], 0, job.inputs[s].size(), s, &copy)) continue;
    replayed.inputs += job.inputs[s].size();
    const ShardStats stats = job.shards[s]->shard().SnapshotStats();
    for (uint64_t n : stats.rows_evicted()) replayed.evicted += n;
    testing::ExpectSameShardState(job.shards[s]->shard(), copy, c, s, tmp.File("shard" + std::to_string(s)));
  }
  return replayed;
}

TEST(ShardReplayTest, SspAdamJobReplaysBitForBit) {
  JobConfig c = testing::SmallBibtexJob();
  EXPECT_GT(TrainAndReplay(c).inputs, 1000u);
}

TEST(ShardReplayTest, BudgetDelayCompensationAndBf16ReplayBitForBit) {
  JobConfig c = testing::SmallBibtexJob();
  c.mutable_optimizer()->set_type(ADAGRAD);
  c.mutable_optimizer()->set_learning_rate(0.05f);
  c.mutable_optimizer()->set_delay_compensation(0.5f);
  c.mutable_consistency()->set_staleness(-1);  // ASP: the most interleaving
  TableConfig* w1 = c.mutable_table(0);
  w1->set_max_rows(850);
  c.mutable_train()->set_eval_minibatch_size(64);  // an evaluation pull within max_rows
  w1->set_evict(LRU);
  w1->set_push_wire(BF16);
  const Replayed r = TrainAndReplay(c);
  EXPECT_GT(r.inputs, 1000u);
  EXPECT_GT(r.evicted, 0u);
}

TEST(ShardReplayTest, CheckpointRoundsAndEvaluationReplay) {
  JobConfig c = testing::SmallBibtexJob();
  c.mutable_train()->set_epochs(2);
  c.mutable_train()->set_validation_fraction(0.1);
  testing::ScopedTempDir ckpt;
  c.mutable_checkpoint()->set_dir(ckpt.path());
  c.mutable_checkpoint()->set_every_clocks(20);
  EXPECT_GT(TrainAndReplay(c).inputs, 1000u);
}

}  // namespace
}  // namespace tether
