// When the job counts as done or failed: the final checkpoint's cut, shard
// 0's counters at the barrier, and what a failed run does.
#include "worker/train/job_outcome.h"

#include <gtest/gtest.h>

namespace tether {
namespace {

CheckpointWorker Worker(int rank, CheckpointWorker::Kind kind) {
  CheckpointWorker w;
  w.set_rank(rank);
  w.set_kind(kind);
  return w;
}

TEST(JobOutcomeTest, RanksThatLeftBeforeTheEndMakeTheFinalCheckpointPlain) {
  std::vector<CheckpointWorker> cut{Worker(0, CheckpointWorker::FINISHED), Worker(1, CheckpointWorker::LEFT),
                                    Worker(2, CheckpointWorker::TRAINING), Worker(3, CheckpointWorker::GONE)};
  EXPECT_EQ(RanksLeftBeforeEnd(cut), "1, 3");
  EXPECT_FALSE(FinalCheckpointIsFinal("1, 3", /*on_demand=*/false));
  EXPECT_TRUE(FinalCheckpointIsFinal("1, 3", /*on_demand=*/true));  // their chunks were dealt again
  cut.resize(1);
  EXPECT_EQ(RanksLeftBeforeEnd(cut), "");
  EXPECT_TRUE(FinalCheckpointIsFinal("", false));
}

TEST(JobOutcomeTest, AResumedFinalCheckpointStaysOnlyAtItsClockInTheJobsDirectory) {
  CheckpointManifest m;
  m.set_final(true);
  m.set_clock(40);
  EXPECT_TRUE(ResumedFinalStays(m, 40, true));
  EXPECT_FALSE(ResumedFinalStays(m, 41, true));
  EXPECT_FALSE(ResumedFinalStays(m, 40, false));
  m.set_final(false);
  EXPECT_FALSE(ResumedFinalStays(m, 40, true));
}

ShardStats Stats(std::vector<bool> at_barrier) {
  ShardStats s;
  for (size_t r = 0; r < at_barrier.size(); ++r) {
    WorkerStats* w = s.add_workers();
    if (at_barrier[r]) w->set_rank(static_cast<int>(r));
  }
  return s;
}

TEST(JobOutcomeTest, AWorkerMissingAtTheBarrierFailsAStaticSplitJob) {
  BarrierVerdict v = JudgeBarrier(Stats({true, true}), false, false, 3, 100, true);
  EXPECT_EQ(v.missing, "");
  EXPECT_EQ(v.incomplete, "");
  v = JudgeBarrier(Stats({true, false, true, false}), false, false, 3, 100, true);
  EXPECT_EQ(v.missing, "1, 3");
  EXPECT_EQ(v.incomplete, "the job did not finish: worker(s) 1, 3 left before the end of training, so their rows "
                          "were not all trained");
  EXPECT_FALSE(v.rows_redealt);
  v = JudgeBarrier(Stats({true, false}), false, false, 3, 100, false);
  EXPECT_EQ(v.incomplete, "the job did not finish: worker(s) 1 left before the end of training, so their rows were "
                          "not all trained (with checkpoint.dir set, a resume trains what they left)");
}

TEST(JobOutcomeTest, RowsDealtOnDemandAreNoFailureWhenEveryEpochWasCounted) {
  EXPECT_EQ(JudgeBarrier(Stats({true, false}), /*dealt_on_demand=*/true, true, 2, 100, true).incomplete, "");
  ShardStats s = Stats({true, false});
  s.add_chunk_epoch_rows(100);
  s.add_chunk_epoch_rows(100);
  BarrierVerdict v = JudgeBarrier(s, false, /*fed=*/true, 2, 100, true);
  EXPECT_TRUE(v.rows_redealt);
  EXPECT_EQ(v.incomplete, "");
  s.set_chunk_epoch_rows(1, 99);  // an epoch short
  v = JudgeBarrier(s, false, true, 2, 100, true);
  EXPECT_FALSE(v.rows_redealt);
  EXPECT_NE(v.incomplete, "");
  EXPECT_NE(JudgeBarrier(s, false, true, 3, 100, true).incomplete, "");  // an epoch missing
}

TEST(JobOutcomeTest, AFailedRunAbortsOnlyWhenTheServersDoNotKnow) {
  EXPECT_EQ(OnRunFailure(true, 2, true, true), FailureAction::kLeaveStopped);
  EXPECT_EQ(OnRunFailure(false, 0, true, true), FailureAction::kLeaveShardStopped);
  EXPECT_EQ(OnRunFailure(false, -1, true, false), FailureAction::kReturn);
  EXPECT_EQ(OnRunFailure(false, -1, false, true), FailureAction::kReturn);
  EXPECT_EQ(OnRunFailure(false, -1, false, false), FailureAction::kAbort);
}

TEST(JobOutcomeTest, AWaitCutShortByTheStopSaysSoAtItsEnd) {
  EXPECT_TRUE(CutShortByStop("[worker 1] waiting for shard 0: stop requested"));
  EXPECT_TRUE(CutShortByStop("stop requested"));
  EXPECT_FALSE(CutShortByStop("stop requested: no"));
  EXPECT_FALSE(CutShortByStop("requested"));
  EXPECT_TRUE(CutShortByStop("rendezvous file:/tmp/r: stopped while waiting"));
  // A shard lost before the launcher's SIGTERM came: a failure, not a stop.
  EXPECT_FALSE(CutShortByStop("[worker 1] server shard 0 at tcp://127.0.0.1:4000 is gone: its connection dropped "
                              "with 2 request(s) in flight, whose replies are lost"));
}

TEST(JobOutcomeTest, ARunThatFellShortExitsNonZeroUnlessAccepted) {
  FinishedRun run;
  run.num_workers = 2;
  run.evaluated = true;
  run.eval_workers = 2;
  run.test_rows = 2515;
  EXPECT_EQ(JudgeFinishedRun(run).exit_code, 0);
  EXPECT_TRUE(JudgeFinishedRun(run).accepted.empty());
  // Diverged: exit 3 by default, accepted with fail_on_divergence false.
  run.diverged = true;
  run.diverged_at_epoch = 2;
  RunVerdict v = JudgeFinishedRun(run);
  EXPECT_EQ(v.exit_code, kExitDiverged);
  EXPECT_EQ(v.why, "training diverged at epoch 2: exit 3 (accept a diverged run with --nofail_on_divergence, "
                   "train.fail_on_divergence: false)");
  run.fail_on_divergence = false;
  v = JudgeFinishedRun(run);
  EXPECT_EQ(v.exit_code, 0);
  EXPECT_EQ(v.accepted, (std::vector<std::string>{"diverged"}));
  // Part of the test set: exit 4 first, whatever the loss did.
  run.eval_workers = 1;
  run.test_rows = 1257;
  v = JudgeFinishedRun(run);
  EXPECT_EQ(v.exit_code, kExitPartialEval);
  EXPECT_EQ(v.why, "the final evaluation covered only 1257 test rows, the parts of 1 of 2 workers (the others "
                   "left): the metrics are not the whole test set's; exit 4 (accept such a run with "
                   "--accept_partial_eval, train.accept_partial_eval: true)");
  run.accept_partial_eval = true;
  v = JudgeFinishedRun(run);
  EXPECT_EQ(v.exit_code, 0);
  EXPECT_EQ(v.accepted, (std::vector<std::string>{"partial_evaluation", "diverged"}));
  // A worker that did not evaluate is not judged by the evaluation.
  run.accept_partial_eval = false;
  run.evaluated = false;
  EXPECT_EQ(JudgeFinishedRun(run).exit_code, 0);
}

TEST(JobOutcomeTest, JobDivergenceIsAnyWorkersEarliest) {
  ShardStats s0;
  s0.add_workers()->set_rank(0);
  WorkerStats* w1 = s0.add_workers();
  w1->set_rank(1);
  w1->set_diverged_at_epoch(3);
  WorkerStats* w2 = s0.add_workers();
  w2->set_rank(2);
  w2->set_diverged_at_epoch(2);
  const JobDivergence d = JudgeJobDivergence(&s0, 0);
  EXPECT_TRUE(d.diverged);
  EXPECT_EQ(d.at_epoch, 2);
  EXPECT_EQ(d.ranks, std::vector<int>({1, 2}));
  // The evaluator's own, without the shards' stats: no ranks known.
  const JobDivergence own = JudgeJobDivergence(nullptr, 4);
  EXPECT_TRUE(own.diverged);
  EXPECT_EQ(own.at_epoch, 4);
  EXPECT_TRUE(own.ranks.empty());
  const JobDivergence none = JudgeJobDivergence(nullptr, 0);
  EXPECT_FALSE(none.diverged);
  EXPECT_EQ(none.at_epoch, 0);
}

}  // namespace
}  // namespace tether
