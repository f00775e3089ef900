// Writing model files from a job: what tether-export, tether-worker
// --model_out and the tests share (checkpoint/model_file.h writes the bytes).
//
// Ownership: the functions borrow their inputs and return values.
// Thread-safety: the functions share no state.
#pragma once

#include <string>

#include "checkpoint/model_file.h"
#include "core/status.h"
#include "checkpoint/trained_model.h"
#include "proto/config.pb.h"

namespace tether {

/// The training label frequencies of a multi-label job, for PSP@k: the
/// whole training split named by the config (data.train_file,
/// data.train_split; partition 0 of 1) read as the trainer reads it
/// (LoadSplit), counted per label; num_rows = its rows. Empty for a binary
/// or multiclass model. Errors: the reader's (file:line).
StatusOr<LabelCounts> TrainingLabelCounts(const JobConfig& config);

/// The format a path asks for: ".npz" → npz, anything else → safetensors.
ModelFileFormat ModelFileFormatForPath(const std::string& path);

/// Writes `model` to `path` (format from `format`), with the training label
/// counts when `with_label_counts` and the model is multi-label. Logs one
/// INFO line with the path, the tensors' size and the time taken. Errors:
/// TrainingLabelCounts' and WriteModelFile's.
Status ExportModel(const TrainedModel& model, const std::string& path, ModelFileFormat format,
                   bool with_label_counts);

}  // namespace tether
