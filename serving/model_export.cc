#include "serving/model_export.h"

#include <glog/logging.h>

#include <chrono>

#include "worker/eval/evaluator.h"
#include "worker/models/model_registry.h"
#include "worker/trainer.h"

namespace tether {

StatusOr<LabelCounts> TrainingLabelCounts(const JobConfig& config) {
  LabelCounts out;
  if (LabelKindOf(config) != LabelKind::kMultiLabel) return out;
  TETHER_ASSIGN_OR_RETURN(Dataset train, LoadSplit(config, config.data().train_file(), config.data().train_label_file(),
                                                   config.data().train_split(), 0, 1));
  out.counts = CountLabels(train.labels);
  out.num_rows = train.labels.rows;
  return out;
}

ModelFileFormat ModelFileFormatForPath(const std::string& path) {
  const std::string ext = ".npz";
  return path.size() >= ext.size() && path.compare(path.size() - ext.size(), ext.size(), ext) == 0
             ? ModelFileFormat::kNpz
             : ModelFileFormat::kSafetensors;
}

Status ExportModel(const TrainedModel& model, const std::string& path, ModelFileFormat format,
                   bool with_label_counts) {
  const auto start = std::chrono::steady_clock::now();
  LabelCounts counts;
  if (with_label_counts) {
    TETHER_ASSIGN_OR_RETURN(counts, TrainingLabelCounts(model.config));
  }
  TETHER_RETURN_IF_ERROR(WriteModelFile(model, counts, path, format));
  uint64_t floats = 0;
  for (const TrainedTable& t : model.tables) floats += t.values.size();
  LOG(INFO) << "[export] wrote model " << path << " (" << (format == ModelFileFormat::kNpz ? "npz" : "safetensors")
            << ", " << model.tables.size() << " tables, " << floats * 4 / 1e6 << " MB of weights"
            << (counts.empty() ? "" : ", label counts of " + std::to_string(counts.num_rows) + " training rows")
            << ") in " << std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() << " s";
  return Status::OK();
}

}  // namespace tether
