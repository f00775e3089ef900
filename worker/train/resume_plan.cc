#include "worker/train/resume_plan.h"

#include <algorithm>
#include <vector>

#include <glog/logging.h>

#include "worker/sampling.h"
#include "worker/trainer.h"

namespace tether {
namespace {

bool Trains(const CheckpointWorker& w) {
  return w.kind() == CheckpointWorker::TRAINING || w.kind() == CheckpointWorker::LEFT;
}

// A FINISHED entry's loss, divergence and validation outcome into `s` (its
// final_loss and validation only when the entry has them: a checkpoint of an
// older build does not).
void CopyFinishedLoss(const CheckpointWorker& entry, WorkerState* s) {
  if (entry.has_final_loss()) s->set_final_loss(entry.final_loss());
  if (entry.has_validation()) *s->mutable_validation() = entry.validation();
  if (entry.diverged()) {
    s->set_diverged(true);
    s->set_diverged_at_epoch(entry.diverged_at_epoch());
  }
}

// The checkpoint's number of workers: this rank's own state.
StatusOr<WorkerState> OwnState(const CheckpointManifest& m, const std::string& dir, const JobConfig& config, int rank,
                               int64_t partition_rows, const WorkerStateReader& read, bool* finished) {
  const CheckpointWorker* entry = nullptr;
  for (const CheckpointWorker& w : m.workers())
    if (w.rank() == rank) entry = &w;
  if (entry == nullptr) return Status::DataLoss(dir + "/MANIFEST: has no entry for worker " + std::to_string(rank));
  if (!Trains(*entry)) {
    *finished = true;
    WorkerState s;
    s.set_samples(entry->samples());
    CopyFinishedLoss(*entry, &s);
    return s;
  }
  TETHER_ASSIGN_OR_RETURN(WorkerState s, read(rank));
  if (s.partition_rows() != partition_rows)
    return Status::FailedPrecondition("worker " + std::to_string(rank) + "'s partition of " +
                                      config.data().train_file() + " has " + std::to_string(partition_rows) +
                                      " rows; at the checkpoint (" + dir + ") it had " +
                                      std::to_string(s.partition_rows()) + ": the training data changed");
  return s;
}

// What every worker of a checkpoint with another number of workers left:
// the rows of the epoch in progress, the samples, the time, rank 0's loss.
struct Leftover {
  std::vector<int64_t> rows;  // global row ids, sorted, unique
  int epoch = 0;
  uint64_t samples = 0;
  double train_seconds = 0;
  bool any_training = false;
  WorkerState carried;  // first_loss, final_loss, divergence
};

void NoteDivergence(bool diverged, int at_epoch, WorkerState* out) {
  if (diverged && !out->diverged()) {
    out->set_diverged(true);
    out->set_diverged_at_epoch(at_epoch);
  }
}

StatusOr<Leftover> CollectLeftover(const CheckpointManifest& m, const WorkerStateReader& read) {
  Leftover left;
  for (const CheckpointWorker& w : m.workers()) {
    if (!Trains(w)) {
      left.samples += w.samples();
      if (w.rank() == 0) CopyFinishedLoss(w, &left.carried);
      NoteDivergence(w.diverged(), w.diverged_at_epoch(), &left.carried);
      continue;
    }
    left.any_training = true;
    TETHER_ASSIGN_OR_RETURN(WorkerState s, read(w.rank()));
    left.epoch = std::max(left.epoch, s.epoch() + (s.remaining_rows_size() == 0 ? 1 : 0));
    left.rows.insert(left.rows.end(), s.remaining_rows().begin(), s.remaining_rows().end());
    left.samples += s.samples();
    left.train_seconds = std::max(left.train_seconds, s.train_seconds());
    if (w.rank() == 0) {
      left.carried.set_first_loss(s.first_loss());
      if (s.has_final_loss()) left.carried.set_final_loss(s.final_loss());
    }
    // Every worker merged the same figures: the first one's history serves.
    if (s.has_validation_history() && !left.carried.has_validation_history())
      *left.carried.mutable_validation_history() = s.validation_history();
    NoteDivergence(s.diverged(), s.diverged_at_epoch(), &left.carried);
  }
  std::sort(left.rows.begin(), left.rows.end());
  left.rows.erase(std::unique(left.rows.begin(), left.rows.end()), left.rows.end());
  return left;
}

}  // namespace

int MinibatchesPerClock(const JobConfig& config) {
  return config.consistency().model() == AVERAGE ? AveragePeriodMinibatches(config)
                                                 : config.train().minibatches_per_clock();
}

StatusOr<WorkerState> ResumeState(const CheckpointManifest& m, const std::string& dir, const JobConfig& config,
                                  int rank, int64_t partition_rows, const WorkerStateReader& read, bool* finished) {
  const int num_workers = config.cluster().num_workers();
  *finished = false;
  if (m.num_workers() == num_workers) return OwnState(m, dir, config, rank, partition_rows, read, finished);
  TETHER_ASSIGN_OR_RETURN(Leftover left, CollectLeftover(m, read));
  WorkerState out = left.carried;
  if (!left.any_training) {
    // Every worker had finished (a final checkpoint): nothing left to train.
    *finished = true;
    WorkerState done;
    done.set_samples(rank == 0 ? left.samples : 0);
    if (rank == 0) {
      if (out.has_final_loss()) done.set_final_loss(out.final_loss());
      done.set_diverged(out.diverged());
      done.set_diverged_at_epoch(out.diverged_at_epoch());
    }
    // Every worker merged the same figures; whichever evaluates reports them.
    if (out.has_validation()) *done.mutable_validation() = out.validation();
    return done;
  }
  std::vector<int64_t> mine;
  for (size_t i = static_cast<size_t>(rank); i < left.rows.size(); i += static_cast<size_t>(num_workers))
    mine.push_back(left.rows[i]);
  std::vector<int64_t> shuffle;
  EpochOrder(config.train().seed(), rank, left.epoch, static_cast<int64_t>(mine.size()), &shuffle);
  out.set_rank(rank);
  out.set_num_workers(num_workers);
  out.set_clock(m.clock());
  // No rows dealt to this worker: the epoch in progress is the others' to
  // finish; it starts on its own partition at the next one.
  out.set_epoch(mine.empty() && !left.rows.empty() ? left.epoch + 1 : left.epoch);
  out.set_next_row(0);
  out.set_minibatches(m.clock() * MinibatchesPerClock(config));
  out.set_samples(rank == 0 ? left.samples : 0);
  out.set_train_seconds(left.train_seconds);
  for (int64_t i : shuffle) out.add_dealt_rows(mine[static_cast<size_t>(i)]);
  *finished = out.epoch() >= config.train().epochs();
  LOG(INFO) << "[worker " << rank << "] resuming a checkpoint of " << m.num_workers() << " workers with "
            << num_workers << ": " << left.rows.size() << " rows of the epoch in progress were left, " << mine.size()
            << " dealt to this worker";
  return out;
}

StartPoint ResumedStart(const WorkerState& state, bool finished, int epochs) {
  StartPoint p;
  p.epoch = finished ? epochs : state.epoch();
  p.row = state.next_row();
  p.minibatches = state.minibatches();
  p.samples = state.samples();
  p.loss_sum = state.loss_sum();
  p.loss_batches = state.loss_batches();
  p.first_loss = state.first_loss();
  p.diverged = state.diverged();
  p.diverged_at_epoch = state.diverged_at_epoch();
  p.has_final_loss = state.has_final_loss();
  if (p.has_final_loss) p.final_loss = state.final_loss();
  p.train_seconds = state.train_seconds();
  p.has_validation = state.has_validation();
  if (p.has_validation) p.validation = state.validation();
  return p;
}

RejoinCase ClassifyRejoin(int64_t prev_clock, bool resumed, bool on_demand, bool streamed, bool adaptive,
                          int64_t share_rows) {
  if (resumed || prev_clock <= 0) return RejoinCase::kNotRejoining;
  if (on_demand) return RejoinCase::kDealtOnDemand;
  if (streamed || adaptive) return RejoinCase::kStartsAgain;
  if (share_rows <= 0) return RejoinCase::kEmptyShare;
  return RejoinCase::kContinues;
}

RejoinPoint RejoinPosition(int64_t prev_clock, int per_clock, int64_t rows, int64_t batch, int epochs) {
  const int64_t batches_per_epoch = (rows + batch - 1) / batch;
  const int64_t done = prev_clock * per_clock;
  RejoinPoint p;
  p.epoch = static_cast<int>(std::min<int64_t>(epochs, done / batches_per_epoch));
  p.row = p.epoch < epochs ? std::min(rows, (done % batches_per_epoch) * batch) : 0;
  p.minibatches = done;
  return p;
}

}  // namespace tether
