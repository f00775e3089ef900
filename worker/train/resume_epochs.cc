#include "worker/train/resume_epochs.h"

#include <algorithm>

namespace tether {
namespace {

bool Trains(const CheckpointWorker& w) {
  return w.kind() == CheckpointWorker::TRAINING || w.kind() == CheckpointWorker::LEFT;
}

// Data on demand: the epochs shard 0 dealt rows of. Chunks dealt and not
// completed count: their pushes before the cut stay applied.
int ChunkEpochsBegun(const ChunkCoordinatorState& s) {
  int64_t begun = s.completed_epochs();
  for (int e = 0; e < s.epoch_rows_size(); ++e)
    if (s.epoch_rows(e) > 0) begun = std::max<int64_t>(begun, e + 1);
  for (const ChunkCoordinatorState::OpenEpoch& o : s.open())
    if (o.completed_size() > 0 || o.held_size() > 0) begun = std::max<int64_t>(begun, o.epoch() + 1);
  for (int64_t d : s.done_ahead()) begun = std::max<int64_t>(begun, d + 1);
  return static_cast<int>(begun);
}

StatusOr<EpochsBegun> StaticEpochsBegun(const CheckpointManifest& m, const WorkerStateReader& read) {
  EpochsBegun out;
  for (const CheckpointWorker& w : m.workers()) {
    int begun = 0;
    if (Trains(w)) {
      TETHER_ASSIGN_OR_RETURN(WorkerState s, read(w.rank()));
      begun = StateEpochsBegun(s);
    } else if (w.kind() == CheckpointWorker::FINISHED) {
      begun = FinishedEpochs(m, w);
    }
    if (begun > out.epochs) out = {begun, w.rank()};
  }
  return out;
}

// A static-split resume in which a FINISHED worker trains nothing more:
// the first such entry, or null.
const CheckpointWorker* FinishedAndStaying(const CheckpointManifest& m, const JobConfig& config) {
  const bool own_states = m.num_workers() == config.cluster().num_workers();
  const bool any_training = std::any_of(m.workers().begin(), m.workers().end(), Trains);
  if (!own_states && any_training) return nullptr;  // the rows left are dealt; every worker trains on
  for (const CheckpointWorker& w : m.workers())
    if (w.kind() == CheckpointWorker::FINISHED) return &w;
  return nullptr;
}

std::string EpochsFlag(const JobConfig& config) {
  return "train.epochs (--epochs) is " + std::to_string(config.train().epochs());
}

}  // namespace

int StateEpochsBegun(const WorkerState& s) {
  const bool in_progress = s.next_row() > 0 || s.dealt_rows_size() > 0;
  return s.epoch() + (in_progress ? 1 : 0);
}

int FinishedEpochs(const CheckpointManifest& m, const CheckpointWorker& entry) {
  if (entry.has_validation() && entry.validation().epochs_trained() > 0) return entry.validation().epochs_trained();
  return m.has_config() ? m.config().train().epochs() : 0;
}

StatusOr<std::string> ResumeEpochsDiff(const CheckpointManifest& m, const std::optional<ChunkCoordinatorState>& chunks,
                                       const JobConfig& config, const WorkerStateReader& read) {
  const int epochs = config.train().epochs();
  EpochsBegun begun;
  if (chunks.has_value()) {
    begun.epochs = ChunkEpochsBegun(*chunks);
  } else {
    TETHER_ASSIGN_OR_RETURN(begun, StaticEpochsBegun(m, read));
  }
  if (begun.epochs > epochs)
    return "the checkpoint has begun epoch " + std::to_string(begun.epochs) +
           (begun.rank >= 0 ? " (worker " + std::to_string(begun.rank) + ")" : " (chunks.state)") + ", but " +
           EpochsFlag(config) +
           ": a resume trains on to train.epochs and never undoes an epoch, so its figures would be of " +
           std::to_string(begun.epochs) + " epochs; resume with --epochs=" + std::to_string(begun.epochs) +
           " or more, or export the checkpoint's model (tether-export)";
  if (chunks.has_value() || config.train().data_on_demand() || !m.has_config()) return std::string();
  const int finished_at = m.config().train().epochs();
  if (const CheckpointWorker* w = FinishedAndStaying(m, config); w != nullptr && epochs > finished_at)
    return "worker " + std::to_string(w->rank()) + " had finished the checkpoint's " + std::to_string(finished_at) +
           " epoch(s) (train.epochs of the checkpoint), but " + EpochsFlag(config) +
           ": a finished worker keeps no place to train on from, so it would train none of the epochs past " +
           std::to_string(finished_at) + "; resume with --epochs=" + std::to_string(finished_at);
  return std::string();
}

}  // namespace tether
