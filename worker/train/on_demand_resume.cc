#include "worker/train/on_demand_resume.h"

#include <optional>

#include "core/config.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/chunk_state.h"

namespace tether {

Status CheckDataOnDemandResume(const CheckpointManifest& m, const std::string& dir, const JobConfig& config,
                               int64_t train_rows) {
  const bool was = m.config().train().data_on_demand(), is = config.train().data_on_demand();
  TETHER_ASSIGN_OR_RETURN(std::optional<ChunkCoordinatorState> state, ReadChunkState(dir, m));
  if (was != is)
    return Status::FailedPrecondition(
        "cannot resume from " + dir + ": field train.data_on_demand: the checkpoint has " +
        (was ? "true" : "false") + ", the job has " + (is ? "true" : "false") +
        (was ? " (which chunks were completed is in the checkpoint's chunks.state; the static split would train "
               "rows again or skip some): resume with --data_on_demand=true"
             : " (the checkpoint holds each worker's place in its static split, not a dealing state): resume with "
               "--data_on_demand=false"));
  if (!is) return Status::OK();
  if (!state.has_value())
    return Status::DataLoss(dir + "/MANIFEST: a job with data on demand, but the checkpoint lists no " +
                            std::string(kChunkStateName));
  DataOnDemandChunk job;
  job.set_train_rows(static_cast<uint64_t>(train_rows));
  job.set_chunk_rows(static_cast<uint64_t>(EffectiveChunkRows(config.train())));
  job.set_epochs(config.train().epochs());
  job.set_seed(config.train().seed());
  job.set_taper(config.train().chunk_taper());
  const std::string diff = DiffChunkShape(*state, job);
  if (!diff.empty())
    return Status::FailedPrecondition("cannot resume from " + dir + " (" + kChunkStateName + "): field " + diff);
  return Status::OK();
}

StatusOr<WorkerState> OnDemandResumeState(const CheckpointManifest& m, const std::string& dir, const JobConfig& config,
                                          int rank, int64_t train_rows, int minibatches_per_clock) {
  const int num_workers = config.cluster().num_workers();
  const CheckpointWorker* entry = nullptr;
  uint64_t absent_samples = 0;  // of ranks this job does not have
  for (const CheckpointWorker& w : m.workers()) {
    if (w.rank() == rank) entry = &w;
    if (w.rank() < num_workers) continue;
    if (w.kind() == CheckpointWorker::TRAINING || w.kind() == CheckpointWorker::LEFT) {
      TETHER_ASSIGN_OR_RETURN(WorkerState s, ReadWorkerState(dir, m, w.rank()));
      absent_samples += s.samples();
    } else {
      absent_samples += w.samples();
    }
  }
  WorkerState out;
  if (entry != nullptr && (entry->kind() == CheckpointWorker::TRAINING || entry->kind() == CheckpointWorker::LEFT)) {
    TETHER_ASSIGN_OR_RETURN(out, ReadWorkerState(dir, m, rank));
    if (out.partition_rows() != train_rows)
      return Status::FailedPrecondition("worker " + std::to_string(rank) + ": the training set (" +
                                        config.data().train_file() + ") has " + std::to_string(train_rows) +
                                        " rows; at the checkpoint (" + dir + ") it had " +
                                        std::to_string(out.partition_rows()) + ": the training data changed");
  } else {
    out.set_rank(rank);
    out.set_epoch(0);
    out.set_minibatches(m.clock() * minibatches_per_clock);
    if (entry != nullptr) {
      out.set_samples(entry->samples());
      // A FINISHED entry's loss: what this worker reports if it trains no
      // minibatch (no chunk left).
      if (entry->has_final_loss()) out.set_final_loss(entry->final_loss());
      out.set_diverged(entry->diverged());
      out.set_diverged_at_epoch(entry->diverged_at_epoch());
      if (entry->has_validation()) *out.mutable_validation() = entry->validation();
    }
  }
  out.clear_remaining_rows();
  out.clear_dealt_rows();
  out.set_next_row(0);
  out.set_num_workers(num_workers);
  out.set_clock(m.clock());
  out.set_partition_rows(train_rows);
  if (rank == 0) out.set_samples(out.samples() + absent_samples);
  return out;
}

}  // namespace tether
