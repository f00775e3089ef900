// A running shard's whole state (ServerShard::EncodeState / RestoreState,
// server/shard_state.h) is all a process that joins the shard as its
// replica needs: cut anywhere in a real job's inputs, a copy restored from
// the state taken there and fed the inputs after it holds the primary's
// state bit for bit, as a copy fed every input does (tests/
// shard_replay_test.cc). Real jobs train on Bibtex against ServerShards on
// threads with every input recorded; for each shard a copy replays the
// inputs up to each cut, its state is taken, a fresh copy restores it and
// replays the rest, and the result is compared with the primary.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "server/server.h"
#include "server/shard_state.h"
#include "tests/testing/recorded_job.h"
#include "tests/testing/temp_dir.h"

namespace tether {
namespace {

// For every shard and every cut (a fraction of its inputs): the state
// taken there, restored and fed the rest, ends as the primary. Returns the
// bytes of the largest state.
size_t CutRestoreAndCompare(const JobConfig& c, const std::vector<double>& cuts) {
  testing::RecordedJob job = testing::RunRecordedJob(c);
  for (const Status& st : job.workers) EXPECT_TRUE(st.ok()) << st.ToString();
  testing::ScopedTempDir tmp;
  size_t largest = 0;
  for (int s = 0; s < c.cluster().num_servers(); ++s) {
    const std::vector<std::string>& inputs = job.inputs[s];
    for (double f : cuts) {
      const size_t cut = static_cast<size_t>(f * inputs.size());
      SCOPED_TRACE("shard " + std::to_string(s) + ", state after input " + std::to_string(cut) + " of " +
                   std::to_string(inputs.size()));
      ServerShard before(c, s);
      before.BeginCopy();
      if (!testing::ReplayInputs(inputs, 0, cut, s, &before)) return largest;
      StatusOr<std::string> state = before.EncodeState(cut, 1);
      EXPECT_TRUE(state.ok()) << state.status().ToString();
      if (!state.ok()) return largest;
      largest = std::max(largest, state->size());
      ServerShard after(c, s);
      after.BeginCopy();
      const Status restored = after.RestoreState(*state, "the test");
      EXPECT_TRUE(restored.ok()) << restored.ToString();
      if (!restored.ok() || !testing::ReplayInputs(inputs, cut, inputs.size(), s, &after)) return largest;
      testing::ExpectSameShardState(job.shards[s]->shard(), after, c, s,
                                    tmp.File("shard" + std::to_string(s) + "-" + std::to_string(cut)));
    }
  }
  return largest;
}

TEST(ShardStateTest, SspAdamJobRestoredAnywhereEndsBitForBit) {
  JobConfig c = testing::SmallBibtexJob();
  c.mutable_cluster()->set_replicas(1);  // the reply cache travels too
  c.mutable_cluster()->set_startup_timeout_ms(1500);  // no replica comes: the shards go on alone
  EXPECT_GT(CutRestoreAndCompare(c, {0.0, 0.01, 0.37, 0.8}), 100000u);
}

TEST(ShardStateTest, BudgetDelayCompensationAndBf16RestoredBitForBit) {
  JobConfig c = testing::SmallBibtexJob();
  c.mutable_optimizer()->set_type(ADAGRAD);
  c.mutable_optimizer()->set_learning_rate(0.05f);
  c.mutable_optimizer()->set_delay_compensation(0.5f);
  c.mutable_consistency()->set_staleness(-1);  // ASP: the most interleaving
  TableConfig* w1 = c.mutable_table(0);
  w1->set_max_rows(850);
  c.mutable_train()->set_eval_minibatch_size(64);
  w1->set_evict(LRU);
  w1->set_push_wire(BF16);
  CutRestoreAndCompare(c, {0.25, 0.6});
}

TEST(ShardStateTest, CheckpointRoundsEvaluationAndKeptModelRestored) {
  JobConfig c = testing::SmallBibtexJob();
  c.mutable_train()->set_epochs(2);
  c.mutable_train()->set_validation_fraction(0.1);
  c.mutable_train()->set_keep_best_model(true);
  testing::ScopedTempDir ckpt;
  c.mutable_checkpoint()->set_dir(ckpt.path());
  c.mutable_checkpoint()->set_every_clocks(20);
  CutRestoreAndCompare(c, {0.5, 0.75, 0.99});
}

TEST(ShardStateTest, RefusesAnotherShardsOrATruncatedState) {
  JobConfig c = testing::SmallBibtexJob();
  ServerShard shard0(c, 0);
  shard0.BeginCopy();
  StatusOr<std::string> state = shard0.EncodeState(0, 1);
  ASSERT_TRUE(state.ok()) << state.status().ToString();
  ServerShard shard1(c, 1);
  shard1.BeginCopy();
  Status st = shard1.RestoreState(*state, "peer X");
  EXPECT_EQ(st.code(), Status::Code::kDataLoss);
  EXPECT_NE(st.message().find("shard 1's state from peer X: it is shard 0's state"), std::string::npos) << st.message();
  ServerShard again(c, 0);
  again.BeginCopy();
  st = again.RestoreState(std::string_view(*state).substr(0, state->size() - 1), "peer X");
  EXPECT_EQ(st.code(), Status::Code::kDataLoss);
  EXPECT_NE(st.message().find("peer X"), std::string::npos) << st.message();
  st = again.RestoreState("TTHRSTAX", "peer X");
  EXPECT_NE(st.message().find("does not start with the shard state magic"), std::string::npos) << st.message();
}

// The pieces a primary sends (the table rows moved in, never joined) are
// EncodeShardState's bytes, cut where the rows begin and end.
TEST(ShardStateTest, ThePiecesAreTheEncodedStateCutAtTheRows) {
  ShardState state;
  state.set_shard(2);
  state.set_log_seq(17);
  const std::vector<std::string> rows = {std::string(1000, 'a'), "", std::string(3, 'c')};
  const std::string whole = EncodeShardState(state, rows);
  const std::vector<std::string> pieces = EncodeShardStatePieces(state, rows);
  ASSERT_EQ(pieces.size(), 6u);  // head, rows 0, length 1, rows 1 (none), length 2, rows 2
  EXPECT_EQ(pieces[1], rows[0]);
  EXPECT_EQ(pieces[3], rows[1]);
  EXPECT_EQ(pieces[5], rows[2]);
  std::string joined;
  for (const std::string& p : pieces) joined += p;
  EXPECT_EQ(joined, whole);
  ShardState back;
  std::vector<std::string> back_rows;
  ASSERT_TRUE(DecodeShardState(joined, 2, "peer X", &back, &back_rows).ok());
  EXPECT_EQ(back_rows, rows);
  EXPECT_EQ(back.log_seq(), 17u);
}

}  // namespace
}  // namespace tether
