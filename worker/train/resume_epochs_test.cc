// ResumeEpochsDiff (worker/train/resume_epochs.h): a resume that asks for
// fewer epochs than its checkpoint began, or for more than a finished
// worker finished at, is refused naming both numbers; data on demand may
// grow train.epochs.
#include "worker/train/resume_epochs.h"

#include <map>

#include <gtest/gtest.h>

namespace tether {
namespace {

constexpr char kFewer[] =
    ": a resume trains on to train.epochs and never undoes an epoch, so its figures would be of 15 epochs; resume "
    "with --epochs=15 or more, or export the checkpoint's model (tether-export)";

JobConfig Job(int epochs, int workers, bool on_demand = false) {
  JobConfig c;
  c.mutable_train()->set_epochs(epochs);
  c.mutable_train()->set_data_on_demand(on_demand);
  c.mutable_cluster()->set_num_workers(workers);
  return c;
}

// A checkpoint of a job of `epochs` epochs and `workers` workers.
CheckpointManifest Manifest(int epochs, int workers) {
  CheckpointManifest m;
  m.set_num_workers(workers);
  *m.mutable_config() = Job(epochs, workers);
  return m;
}

void AddEntry(CheckpointManifest* m, int rank, CheckpointWorker::Kind kind) {
  CheckpointWorker* w = m->add_workers();
  w->set_rank(rank);
  w->set_kind(kind);
}

WorkerState State(int epoch, int64_t next_row) {
  WorkerState s;
  s.set_epoch(epoch);
  s.set_next_row(next_row);
  return s;
}

WorkerStateReader Reader(std::map<int, WorkerState> states) {
  return [states](int rank) -> StatusOr<WorkerState> {
    auto it = states.find(rank);
    if (it == states.end()) return Status::DataLoss("no state for worker " + std::to_string(rank));
    return it->second;
  };
}

std::string Diff(const CheckpointManifest& m, const JobConfig& job, const WorkerStateReader& read,
                 const std::optional<ChunkCoordinatorState>& chunks = std::nullopt) {
  StatusOr<std::string> d = ResumeEpochsDiff(m, chunks, job, read);
  EXPECT_TRUE(d.ok()) << d.status().ToString();
  return d.ok() ? *d : "error";
}

TEST(ResumeEpochsTest, AStateCountsItsEpochInProgressOnceARowOfItIsTrained) {
  EXPECT_EQ(StateEpochsBegun(State(14, 100)), 15);
  EXPECT_EQ(StateEpochsBegun(State(3, 0)), 3);
  WorkerState dealt = State(2, 0);
  dealt.add_dealt_rows(7);  // rows another number of workers left of epoch 3
  EXPECT_EQ(StateEpochsBegun(dealt), 3);
}

TEST(ResumeEpochsTest, FewerEpochsThanTheCheckpointBeganAreRefusedNamingBoth) {
  CheckpointManifest m = Manifest(20, 2);
  AddEntry(&m, 0, CheckpointWorker::TRAINING);
  AddEntry(&m, 1, CheckpointWorker::TRAINING);
  const WorkerStateReader read = Reader({{0, State(14, 100)}, {1, State(13, 40)}});
  EXPECT_EQ(Diff(m, Job(3, 2), read),
            std::string("the checkpoint has begun epoch 15 (worker 0), but train.epochs (--epochs) is 3") + kFewer);
  EXPECT_EQ(Diff(m, Job(14, 2), read),
            std::string("the checkpoint has begun epoch 15 (worker 0), but train.epochs (--epochs) is 14") + kFewer);
  EXPECT_EQ(Diff(m, Job(15, 2), read), "");  // epoch 15 is trained to its end
  EXPECT_EQ(Diff(m, Job(30, 2), read), "");  // every worker trains on to 30
  // Another number of workers: the same count decides.
  EXPECT_EQ(Diff(m, Job(3, 3), read),
            std::string("the checkpoint has begun epoch 15 (worker 0), but train.epochs (--epochs) is 3") + kFewer);
  // A state at the start of an epoch has begun only those before it.
  EXPECT_EQ(Diff(m, Job(14, 2), Reader({{0, State(14, 0)}, {1, State(13, 40)}})), "");
}

TEST(ResumeEpochsTest, AFinishedRunResumesOnlyWithTheEpochsItFinishedAt) {
  CheckpointManifest m = Manifest(15, 2);
  AddEntry(&m, 0, CheckpointWorker::FINISHED);
  AddEntry(&m, 1, CheckpointWorker::FINISHED);
  const WorkerStateReader none = Reader({});
  EXPECT_EQ(Diff(m, Job(15, 2), none), "");  // nothing left to train: export or evaluate it
  EXPECT_EQ(Diff(m, Job(15, 5), none), "");
  EXPECT_EQ(Diff(m, Job(3, 2), none),
            std::string("the checkpoint has begun epoch 15 (worker 0), but train.epochs (--epochs) is 3") + kFewer);
  const std::string more =
      "worker 0 had finished the checkpoint's 15 epoch(s) (train.epochs of the checkpoint), but train.epochs "
      "(--epochs) is 20: a finished worker keeps no place to train on from, so it would train none of the epochs "
      "past 15; resume with --epochs=15";
  EXPECT_EQ(Diff(m, Job(20, 2), none), more);
  EXPECT_EQ(Diff(m, Job(20, 3), none), more);
  // A manifest without its config: nothing to compare a finished entry with.
  CheckpointManifest bare = m;
  bare.clear_config();
  EXPECT_EQ(Diff(bare, Job(3, 2), none), "");
}

TEST(ResumeEpochsTest, AnEarlyStoppedWorkerCountsTheEpochsItTrained) {
  CheckpointManifest m = Manifest(15, 1);
  AddEntry(&m, 0, CheckpointWorker::FINISHED);
  m.mutable_workers(0)->mutable_validation()->set_epochs_trained(8);
  EXPECT_EQ(FinishedEpochs(m, m.workers(0)), 8);
  EXPECT_EQ(Diff(m, Job(10, 1), Reader({})), "");
  EXPECT_EQ(Diff(m, Job(15, 1), Reader({})), "");
  EXPECT_NE(Diff(m, Job(7, 1), Reader({})).find("has begun epoch 8 (worker 0), but train.epochs (--epochs) is 7"),
            std::string::npos);
  EXPECT_NE(Diff(m, Job(16, 1), Reader({})).find("worker 0 had finished the checkpoint's 15 epoch(s)"),
            std::string::npos);
}

TEST(ResumeEpochsTest, AFinishedWorkerBesideTrainingOnesStaysOnlyWithItsOwnState) {
  CheckpointManifest m = Manifest(3, 2);
  AddEntry(&m, 0, CheckpointWorker::TRAINING);
  AddEntry(&m, 1, CheckpointWorker::FINISHED);
  const WorkerStateReader read = Reader({{0, State(1, 5)}});
  EXPECT_EQ(Diff(m, Job(3, 2), read), "");
  EXPECT_NE(Diff(m, Job(5, 2), read).find("worker 1 had finished the checkpoint's 3 epoch(s)"), std::string::npos);
  // Three workers deal the rows left and each trains on to epoch 5.
  EXPECT_EQ(Diff(m, Job(5, 3), read), "");
}

TEST(ResumeEpochsTest, DataOnDemandCountsTheEpochsShardZeroDealtAndMayGrow) {
  CheckpointManifest m = Manifest(4, 2);
  AddEntry(&m, 0, CheckpointWorker::FINISHED);
  AddEntry(&m, 1, CheckpointWorker::FINISHED);
  m.mutable_config()->mutable_train()->set_data_on_demand(true);
  ChunkCoordinatorState s;
  s.set_epochs(4);
  s.set_completed_epochs(2);
  for (int64_t rows : {100, 100, 0, 0}) s.add_epoch_rows(rows);
  ChunkCoordinatorState::OpenEpoch* open = s.add_open();
  open->set_epoch(2);
  open->add_held(3);  // dealt, not completed: its pushes stay applied
  EXPECT_EQ(Diff(m, Job(2, 2, true), Reader({}), s),
            "the checkpoint has begun epoch 3 (chunks.state), but train.epochs (--epochs) is 2: a resume trains on "
            "to train.epochs and never undoes an epoch, so its figures would be of 3 epochs; resume with "
            "--epochs=3 or more, or export the checkpoint's model (tether-export)");
  EXPECT_EQ(Diff(m, Job(3, 2, true), Reader({}), s), "");
  EXPECT_EQ(Diff(m, Job(9, 2, true), Reader({}), s), "");  // shard 0 deals the new epochs
}

TEST(ResumeEpochsTest, AStateThatCannotBeReadIsTheReadersError) {
  CheckpointManifest m = Manifest(3, 1);
  AddEntry(&m, 0, CheckpointWorker::TRAINING);
  StatusOr<std::string> d = ResumeEpochsDiff(m, std::nullopt, Job(3, 1), Reader({}));
  EXPECT_EQ(d.status().code(), Status::Code::kDataLoss);
  EXPECT_EQ(d.status().message(), "no state for worker 0");
}

}  // namespace
}  // namespace tether
