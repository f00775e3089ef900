// A model file's metadata checked against the model it describes. The
// metadata (checkpoint/model_file.h) repeats what the job_config, the table
// specs and the label counts say, for readers that look at the header only;
// tether-predict and tether-export read the job_config instead. A file whose
// metadata says something else (an edited num_labels, a feature_scale of
// "nan") would be read as one model and described as another, so it is
// refused, as is a label count that cannot be (above the training rows it
// was counted over). Private to the model-file library.
//
// Thread-safety: the function shares no state. Ownership: plain values.
#pragma once

#include <map>
#include <string>

#include "checkpoint/model_file.h"
#include "core/status.h"

namespace tether {
namespace model_file_internal {

/// Checks the metadata `meta` of the file at `path` against `contents` (its
/// model's job_config, tables and label counts, read from the same file):
///  - each field the writer derives from the job_config (model_type,
///    model_name, loss, hidden, hidden_layers, num_features, num_labels,
///    data_format, index_base, label_base, normalize_rows, feature_scale,
///    feature_offset) equals what ModelFileMetadata writes for it; the two
///    floats compare as numbers and must be finite, in the metadata and in
///    the job_config;
///  - each entry of 'tables' agrees, field by field, with the table spec of
///    the same position (the fields it holds: entries of older files lack
///    some);
///  - label counts: one per label (data.num_labels), label_counts_rows ≥ 0,
///    and no count above label_counts_rows.
/// A field the metadata does not hold is not checked (the job_config is
/// what readers use). Errors: InvalidArgument "PATH: metadata 'FIELD' is
/// 'X' but the job_config's data.FIELD is Y" (or "... is not a finite
/// number"); DataLoss "PATH: tensor 'label_counts': ..." for counts that
/// cannot be.
Status CheckModelMetadata(const std::string& path, const std::map<std::string, std::string>& meta,
                          const ModelFileContents& contents, ModelFileFormat format);

}  // namespace model_file_internal
}  // namespace tether
