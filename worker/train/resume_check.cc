#include "worker/train/resume_check.h"

#include "checkpoint/checkpoint.h"
#include "checkpoint/chunk_state.h"
#include "worker/models/model_registry.h"
#include "worker/train/resume_epochs.h"

namespace tether {

std::string ResumeConfigDiff(const CheckpointManifest& manifest, const JobConfig& config,
                             const std::vector<TableSpec>& tables) {
  const std::string shapes =
      DiffTableShapes(manifest.tables(), google::protobuf::RepeatedPtrField<TableSpec>(tables.begin(), tables.end()));
  if (!shapes.empty() || !manifest.has_config()) return shapes;
  if (std::string input = DiffInputTransform(manifest.config().data(), config.data()); !input.empty()) return input;
  return DiffValidationRows(manifest.config(), config);
}

Status CheckResumeConfig(const JobConfig& config, const std::string& resume_from) {
  if (resume_from.empty()) return Status::OK();
  StatusOr<std::string> dir = ResolveCheckpoint(resume_from);
  if (!dir.ok()) return Status::OK();
  StatusOr<CheckpointManifest> manifest = ReadManifest(*dir);
  if (!manifest.ok()) return Status::OK();
  std::string diff = ResumeConfigDiff(*manifest, config, TablesForJob(config));
  if (diff.empty()) {
    // A state that cannot be read is the resume's to name, as above.
    StatusOr<std::optional<ChunkCoordinatorState>> chunks = ReadChunkState(*dir, *manifest);
    const WorkerStateReader read = [&](int rank) { return ReadWorkerState(*dir, *manifest, rank); };
    StatusOr<std::string> epochs =
        chunks.ok() ? ResumeEpochsDiff(*manifest, *chunks, config, read) : StatusOr<std::string>(std::string());
    if (epochs.ok()) diff = *epochs;
  }
  if (!diff.empty()) return Status::FailedPrecondition("cannot resume from " + *dir + ": " + diff);
  return Status::OK();
}

}  // namespace tether
