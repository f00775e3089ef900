// Writing model files from a job: what tether-export, tether-worker
// --model_out and the tests share (checkpoint/model_file.h writes the bytes).
//
// Ownership: the functions borrow their inputs and return values.
// Thread-safety: the functions share no state.
#pragma once

#include <string>
#include <vector>

#include "checkpoint/model_file.h"
#include "core/status.h"
#include "checkpoint/trained_model.h"
#include "proto/config.pb.h"

namespace tether {

/// The training label frequencies of a multi-label job, for PSP@k: the
/// rows the job trained on (JobTrainingRows: the whole training split named
/// by the config, data.train_file and data.train_split, read as the trainer
/// reads it, without the validation rows), counted per label, as the
/// job's workers counted them; num_rows = its rows. Empty for a binary or
/// multiclass model. Errors: the reader's (file:line).
StatusOr<LabelCounts> TrainingLabelCounts(const JobConfig& config);

/// data.tf_idf's weights as training found them: the document frequency of
/// every feature over the rows trained on (the whole training split named
/// by the config, read as the trainer reads it, without the validation rows
/// of train.validation_fraction or data.validation_split:
/// JobTrainingRows), InverseDocumentFrequencies of
/// them (input/feature_weighting.h); data.num_features entries, the same
/// floats round 0 of the job computed from its workers' counts. Empty
/// without data.tf_idf. Errors: the reader's (file:line).
StatusOr<std::vector<float>> TrainingFeatureIdf(const JobConfig& config);

/// The format a path asks for: ".npz" → npz, anything else → safetensors.
ModelFileFormat ModelFileFormatForPath(const std::string& path);

/// The format of a model file written to `path` when the user asked for
/// `format_name` ("" when not given): "" → by the name
/// (ModelFileFormatForPath); "safetensors" or "npz" (any case) → that one,
/// unless the name's extension (".npz", ".safetensors") says the other.
/// Errors: InvalidArgument for an unknown name, or "--format=npz
/// contradicts the file name 'm.safetensors': ..." with the fix.
StatusOr<ModelFileFormat> ModelFileFormatFor(const std::string& path, const std::string& format_name);

/// Writes `model` to `path` (format from `format`), with the training label
/// counts when `with_label_counts` and the model is multi-label, and with
/// data.tf_idf always the input's weights (TrainingFeatureIdf: the training
/// data is read). Logs one INFO line with the path, the tensors' size and
/// the time taken. Errors: TrainingLabelCounts', TrainingFeatureIdf' and
/// WriteModelFile's.
Status ExportModel(const TrainedModel& model, const std::string& path, ModelFileFormat format,
                   bool with_label_counts);

}  // namespace tether
