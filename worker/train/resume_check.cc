#include "worker/train/resume_check.h"

#include "checkpoint/checkpoint.h"
#include "worker/models/model_registry.h"

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
  const std::string diff = ResumeConfigDiff(*manifest, config, TablesForJob(config));
  if (!diff.empty()) return Status::FailedPrecondition("cannot resume from " + *dir + ": " + diff);
  return Status::OK();
}

}  // namespace tether
