#include "serving/model_export.h"

#include <glog/logging.h>

#include <cctype>
#include <chrono>

#include "input/feature_weighting.h"
#include "worker/eval/evaluator.h"
#include "worker/models/model_registry.h"
#include "worker/train/validation_rows.h"
#include "worker/trainer.h"

namespace tether {

StatusOr<LabelCounts> TrainingLabelCounts(const JobConfig& config) {
  LabelCounts out;
  if (LabelKindOf(config) != LabelKind::kMultiLabel) return out;
  TETHER_ASSIGN_OR_RETURN(const Dataset train, JobTrainingRows(config));
  out.counts = CountLabels(train.labels);
  out.num_rows = train.labels.rows;
  return out;
}

StatusOr<std::vector<float>> TrainingFeatureIdf(const JobConfig& config) {
  if (!config.data().tf_idf()) return std::vector<float>{};
  TETHER_ASSIGN_OR_RETURN(const Dataset train, JobTrainingRows(config));
  std::vector<uint64_t> df(static_cast<size_t>(config.data().num_features()), 0);
  CountDocumentFrequencies(train.features, &df);
  return InverseDocumentFrequencies(df, train.features.rows);
}

ModelFileFormat ModelFileFormatForPath(const std::string& path) {
  const std::string ext = ".npz";
  return path.size() >= ext.size() && path.compare(path.size() - ext.size(), ext.size(), ext) == 0
             ? ModelFileFormat::kNpz
             : ModelFileFormat::kSafetensors;
}

StatusOr<ModelFileFormat> ModelFileFormatFor(const std::string& path, const std::string& format_name) {
  const ModelFileFormat by_name = ModelFileFormatForPath(path);
  if (format_name.empty()) return by_name;
  std::string lower = format_name;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  TETHER_ASSIGN_OR_RETURN(const ModelFileFormat asked, ParseModelFileFormat(lower));
  const std::string ext = ".safetensors";
  const bool says_safetensors =
      path.size() >= ext.size() && path.compare(path.size() - ext.size(), ext.size(), ext) == 0;
  if ((by_name == ModelFileFormat::kNpz && asked != ModelFileFormat::kNpz) ||
      (says_safetensors && asked != ModelFileFormat::kSafetensors))
    return Status::InvalidArgument("--format=" + format_name + " contradicts the file name '" + path +
                                   "': name the file after its format (.npz for npz, .safetensors for "
                                   "safetensors), or leave --format out to take it from the name");
  return asked;
}

Status ExportModel(const TrainedModel& model, const std::string& path, ModelFileFormat format,
                   bool with_label_counts) {
  const auto start = std::chrono::steady_clock::now();
  LabelCounts counts;
  if (with_label_counts) {
    TETHER_ASSIGN_OR_RETURN(counts, TrainingLabelCounts(model.config));
  }
  TETHER_ASSIGN_OR_RETURN(const std::vector<float> idf, TrainingFeatureIdf(model.config));
  TETHER_RETURN_IF_ERROR(WriteModelFile(model, counts, idf, path, format));
  uint64_t floats = 0;
  for (const TrainedTable& t : model.tables) floats += t.values.size();
  LOG(INFO) << "[export] wrote model " << path << " (" << (format == ModelFileFormat::kNpz ? "npz" : "safetensors")
            << ", " << model.tables.size() << " tables, " << floats * 4 / 1e6 << " MB of weights"
            << (counts.empty() ? "" : ", label counts of " + std::to_string(counts.num_rows) + " training rows")
            << (idf.empty() ? "" : ", TF-IDF weights of " + std::to_string(idf.size()) + " features")
            << ") in " << std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() << " s";
  return Status::OK();
}

}  // namespace tether
