// Where a worker starts: ResumeState with the checkpoint's number of
// workers and with another (the rows left of the epoch dealt round-robin),
// a finished job, a changed partition; the StartPoint it gives; and a
// restarted process's position from its predecessor's clock.
#include "worker/train/resume_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "worker/sampling.h"

namespace tether {
namespace {

JobConfig Job(int num_workers, int epochs = 3) {
  JobConfig c;
  c.mutable_cluster()->set_num_workers(num_workers);
  c.mutable_train()->set_epochs(epochs);
  c.mutable_train()->set_seed(7);
  c.mutable_train()->set_minibatches_per_clock(2);
  c.mutable_data()->set_train_file("train.txt");
  return c;
}

CheckpointWorker Entry(int rank, CheckpointWorker::Kind kind, uint64_t samples = 0) {
  CheckpointWorker w;
  w.set_rank(rank);
  w.set_kind(kind);
  w.set_samples(samples);
  return w;
}

// A reader over states held in a map, counting its reads.
struct States {
  std::map<int, WorkerState> by_rank;
  int reads = 0;
  WorkerStateReader Reader() {
    return [this](int rank) -> StatusOr<WorkerState> {
      ++reads;
      auto it = by_rank.find(rank);
      if (it == by_rank.end()) return Status::NotFound("no state for " + std::to_string(rank));
      return it->second;
    };
  }
};

WorkerState State(int rank, int epoch, std::vector<int64_t> remaining, uint64_t samples, int64_t partition_rows) {
  WorkerState s;
  s.set_rank(rank);
  s.set_epoch(epoch);
  s.set_next_row(5);
  s.set_samples(samples);
  s.set_partition_rows(partition_rows);
  s.set_train_seconds(10.0 + rank);
  s.set_first_loss(2.5 + rank);
  s.set_final_loss(1.25 + rank);
  for (int64_t r : remaining) s.add_remaining_rows(r);
  return s;
}

TEST(ResumeStateTest, SameNumberOfWorkersTakesTheRanksOwnStateExactly) {
  CheckpointManifest m;
  m.set_num_workers(2);
  m.set_clock(12);
  *m.add_workers() = Entry(0, CheckpointWorker::TRAINING);
  *m.add_workers() = Entry(1, CheckpointWorker::TRAINING);
  States states;
  states.by_rank[1] = State(1, 1, {3, 9}, 400, 100);
  bool finished = true;
  StatusOr<WorkerState> s = ResumeState(m, "ckpt", Job(2), 1, 100, states.Reader(), &finished);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_FALSE(finished);
  EXPECT_EQ(states.reads, 1);  // only its own
  EXPECT_EQ(s->epoch(), 1);
  EXPECT_EQ(s->next_row(), 5);
  EXPECT_EQ(s->samples(), 400u);
  EXPECT_EQ(s->remaining_rows_size(), 2);
}

TEST(ResumeStateTest, ChangedPartitionAndMissingEntryAreRefused) {
  CheckpointManifest m;
  m.set_num_workers(2);
  *m.add_workers() = Entry(0, CheckpointWorker::TRAINING);
  States states;
  states.by_rank[0] = State(0, 0, {}, 10, 100);
  bool finished = false;
  StatusOr<WorkerState> s = ResumeState(m, "ckpt", Job(2), 0, 99, states.Reader(), &finished);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(s.status().message(),
            "worker 0's partition of train.txt has 99 rows; at the checkpoint (ckpt) it had 100: the training data "
            "changed");
  s = ResumeState(m, "ckpt", Job(2), 1, 100, states.Reader(), &finished);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), Status::Code::kDataLoss);
  EXPECT_EQ(s.status().message(), "ckpt/MANIFEST: has no entry for worker 1");
}

TEST(ResumeStateTest, AFinishedEntryHasNothingLeftAndKeepsItsLoss) {
  CheckpointManifest m;
  m.set_num_workers(1);
  CheckpointWorker w = Entry(0, CheckpointWorker::FINISHED, 4880);
  w.set_final_loss(0.75);
  w.set_diverged(true);
  w.set_diverged_at_epoch(2);
  *m.add_workers() = w;
  States states;
  bool finished = false;
  StatusOr<WorkerState> s = ResumeState(m, "ckpt", Job(1), 0, 100, states.Reader(), &finished);
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(finished);
  EXPECT_EQ(states.reads, 0);
  EXPECT_EQ(s->samples(), 4880u);
  EXPECT_EQ(s->final_loss(), 0.75);
  EXPECT_TRUE(s->diverged());
  EXPECT_EQ(s->diverged_at_epoch(), 2);
  const StartPoint p = ResumedStart(*s, finished, 3);
  EXPECT_EQ(p.epoch, 3);  // straight to the barrier
  EXPECT_TRUE(p.has_final_loss);
  EXPECT_EQ(p.final_loss, 0.75);
}

// A run with a validation split finished: a resume with nothing left to
// train carries its outcome, with the checkpoint's number of workers and
// with another (every rank: the evaluator may be any of them).
TEST(ResumeStateTest, AFinishedEntryCarriesItsValidationOutcome) {
  ValidationOutcome v;
  v.set_metric("precision_at_1");
  v.set_best_epoch(2);
  v.set_rows(952);
  v.set_epochs_trained(3);
  v.set_scored_epoch(2);
  v.set_stopped_early(true);
  ValidationOutcome::Figure* f = v.add_metrics();
  f->set_name("precision_at_1");
  f->set_value(0.53);
  CheckpointManifest m;
  m.set_num_workers(1);
  CheckpointWorker w = Entry(0, CheckpointWorker::FINISHED, 4880);
  *w.mutable_validation() = v;
  *m.add_workers() = w;
  States states;
  bool finished = false;
  StatusOr<WorkerState> s = ResumeState(m, "ckpt", Job(1), 0, 100, states.Reader(), &finished);
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(s->has_validation());
  const StartPoint p = ResumedStart(*s, finished, 3);
  ASSERT_TRUE(p.has_validation);
  EXPECT_EQ(p.validation.best_epoch(), 2);
  EXPECT_EQ(p.validation.rows(), 952);
  EXPECT_EQ(p.validation.epochs_trained(), 3);
  EXPECT_EQ(p.validation.scored_epoch(), 2);
  EXPECT_TRUE(p.validation.stopped_early());
  ASSERT_EQ(p.validation.metrics_size(), 1);
  EXPECT_EQ(p.validation.metrics(0).value(), 0.53);
  for (int rank : {0, 1}) {
    s = ResumeState(m, "ckpt", Job(2), rank, 0, states.Reader(), &finished);
    ASSERT_TRUE(s.ok());
    EXPECT_TRUE(finished);
    ASSERT_TRUE(s->has_validation()) << rank;
    EXPECT_EQ(s->validation().best_epoch(), 2);
  }
  // A checkpoint without the field: none, as before.
  m.mutable_workers(0)->clear_validation();
  s = ResumeState(m, "ckpt", Job(1), 0, 100, states.Reader(), &finished);
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(ResumedStart(*s, finished, 3).has_validation);
}

TEST(ResumeStateTest, AnotherNumberOfWorkersDealsTheRowsLeftRoundRobin) {
  // Two workers stopped in epoch 1 (0-based) with rows left; resumed with 3.
  CheckpointManifest m;
  m.set_num_workers(2);
  m.set_clock(10);
  *m.add_workers() = Entry(0, CheckpointWorker::TRAINING);
  *m.add_workers() = Entry(1, CheckpointWorker::LEFT);
  States states;
  states.by_rank[0] = State(0, 1, {40, 10, 30}, 300, 50);
  states.by_rank[1] = State(1, 1, {20, 50, 10, 60}, 200, 50);
  const JobConfig job = Job(3);
  // Sorted, unique: 10 20 30 40 50 60; rank 1 gets 20 and 50.
  bool finished = true;
  StatusOr<WorkerState> s = ResumeState(m, "ckpt", job, 1, 0, states.Reader(), &finished);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_FALSE(finished);
  EXPECT_EQ(s->epoch(), 1);
  EXPECT_EQ(s->next_row(), 0);
  EXPECT_EQ(s->clock(), 10);
  EXPECT_EQ(s->minibatches(), 20);  // clock × minibatches_per_clock
  EXPECT_EQ(s->samples(), 0u);      // rank 0 carries them
  EXPECT_EQ(s->train_seconds(), 11.0);
  std::vector<int64_t> order;
  EpochOrder(7, 1, 1, 2, &order);
  const std::vector<int64_t> mine{20, 50};
  ASSERT_EQ(s->dealt_rows_size(), 2);
  EXPECT_EQ(s->dealt_rows(0), mine[static_cast<size_t>(order[0])]);
  EXPECT_EQ(s->dealt_rows(1), mine[static_cast<size_t>(order[1])]);

  s = ResumeState(m, "ckpt", job, 0, 0, states.Reader(), &finished);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->samples(), 500u);
  EXPECT_EQ(s->first_loss(), 2.5);
  EXPECT_EQ(s->final_loss(), 1.25);
  std::vector<int64_t> got(s->dealt_rows().begin(), s->dealt_rows().end());
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, (std::vector<int64_t>{10, 40}));
}

TEST(ResumeStateTest, AWorkerDealtNoRowsStartsAtTheNextEpoch) {
  CheckpointManifest m;
  m.set_num_workers(1);
  *m.add_workers() = Entry(0, CheckpointWorker::TRAINING);
  States states;
  states.by_rank[0] = State(0, 0, {7}, 10, 50);
  bool finished = true;
  StatusOr<WorkerState> s = ResumeState(m, "ckpt", Job(2), 1, 0, states.Reader(), &finished);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->dealt_rows_size(), 0);
  EXPECT_EQ(s->epoch(), 1);
  EXPECT_FALSE(finished);
  // A worker whose epoch had no rows left counts as past it; beyond the
  // last epoch, nothing is left.
  states.by_rank[0] = State(0, 2, {}, 10, 50);
  s = ResumeState(m, "ckpt", Job(2), 1, 0, states.Reader(), &finished);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->epoch(), 3);
  EXPECT_TRUE(finished);
}

TEST(ResumeStateTest, EveryWorkerFinishedLeavesNothingAndRankZeroTheSamples) {
  CheckpointManifest m;
  m.set_num_workers(2);
  CheckpointWorker w0 = Entry(0, CheckpointWorker::FINISHED, 300);
  w0.set_final_loss(0.5);
  *m.add_workers() = w0;
  CheckpointWorker w1 = Entry(1, CheckpointWorker::FINISHED, 200);
  w1.set_diverged(true);
  w1.set_diverged_at_epoch(4);
  *m.add_workers() = w1;
  States states;
  bool finished = false;
  StatusOr<WorkerState> s = ResumeState(m, "ckpt", Job(3), 0, 0, states.Reader(), &finished);
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(finished);
  EXPECT_EQ(s->samples(), 500u);
  EXPECT_EQ(s->final_loss(), 0.5);
  EXPECT_TRUE(s->diverged());
  EXPECT_EQ(s->diverged_at_epoch(), 4);
  s = ResumeState(m, "ckpt", Job(3), 2, 0, states.Reader(), &finished);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->samples(), 0u);
  EXPECT_FALSE(s->has_final_loss());
}

TEST(ResumedStartTest, CarriesTheStateAndUnknownLossStaysNaN) {
  WorkerState s = State(0, 2, {}, 900, 100);
  s.set_minibatches(45);
  s.set_loss_sum(3.5);
  s.set_loss_batches(7);
  StartPoint p = ResumedStart(s, false, 5);
  EXPECT_EQ(p.epoch, 2);
  EXPECT_EQ(p.row, 5);
  EXPECT_EQ(p.minibatches, 45);
  EXPECT_EQ(p.samples, 900u);
  EXPECT_EQ(p.loss_sum, 3.5);
  EXPECT_EQ(p.loss_batches, 7);
  EXPECT_EQ(p.first_loss, 2.5);
  EXPECT_EQ(p.train_seconds, 10.0);
  EXPECT_TRUE(p.has_final_loss);
  s.clear_final_loss();
  p = ResumedStart(s, false, 5);
  EXPECT_FALSE(p.has_final_loss);
  EXPECT_TRUE(std::isnan(p.final_loss));
}

TEST(RejoinTest, WhichRestartsContinueWhereTheirPredecessorStopped) {
  EXPECT_EQ(ClassifyRejoin(-1, false, false, false, false, 10), RejoinCase::kNotRejoining);
  EXPECT_EQ(ClassifyRejoin(0, false, false, false, false, 10), RejoinCase::kNotRejoining);
  EXPECT_EQ(ClassifyRejoin(5, true, false, false, false, 10), RejoinCase::kNotRejoining);
  EXPECT_EQ(ClassifyRejoin(5, false, true, true, true, 10), RejoinCase::kDealtOnDemand);
  EXPECT_EQ(ClassifyRejoin(5, false, false, true, false, 10), RejoinCase::kStartsAgain);
  EXPECT_EQ(ClassifyRejoin(5, false, false, false, true, 10), RejoinCase::kStartsAgain);
  EXPECT_EQ(ClassifyRejoin(5, false, false, false, false, 0), RejoinCase::kEmptyShare);
  EXPECT_EQ(ClassifyRejoin(5, false, false, false, false, 10), RejoinCase::kContinues);
}

TEST(RejoinTest, TheClockFixesEpochAndRow) {
  // 1000 rows in minibatches of 64: 16 per epoch (the last of 40 rows).
  RejoinPoint p = RejoinPosition(/*prev_clock=*/10, /*per_clock=*/2, 1000, 64, 3);
  EXPECT_EQ(p.minibatches, 20);
  EXPECT_EQ(p.epoch, 1);
  EXPECT_EQ(p.row, 4 * 64);
  p = RejoinPosition(8, 2, 1000, 64, 3);  // exactly one epoch
  EXPECT_EQ(p.epoch, 1);
  EXPECT_EQ(p.row, 0);
  p = RejoinPosition(24, 2, 1000, 64, 3);  // every epoch done
  EXPECT_EQ(p.epoch, 3);
  EXPECT_EQ(p.row, 0);
  EXPECT_EQ(p.minibatches, 48);
  p = RejoinPosition(100, 2, 1000, 64, 3);  // past the end: capped
  EXPECT_EQ(p.epoch, 3);
  EXPECT_EQ(p.row, 0);
}

TEST(MinibatchesPerClockTest, AverageCountsARoundsMinibatches) {
  JobConfig c = Job(1);
  EXPECT_EQ(MinibatchesPerClock(c), 2);
  c.mutable_consistency()->set_model(AVERAGE);
  c.mutable_consistency()->set_period_rows(1000);
  c.mutable_train()->set_minibatch_size(64);
  EXPECT_EQ(MinibatchesPerClock(c), 16);
}

}  // namespace
}  // namespace tether
