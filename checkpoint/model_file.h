// Model files: a TrainedModel (checkpoint/trained_model.h) as the files users keep
// and load elsewhere (tether-export writes them, tether-predict reads them).
//
//  - safetensors (https://github.com/huggingface/safetensors, the published
//    layout): an 8-byte little-endian header length N, N bytes of JSON
//    header {"NAME": {"dtype", "shape", "data_offsets": [begin, end]}, ...,
//    "__metadata__": {string: string}} padded with spaces to a multiple of
//    8, then the tensors' little-endian bytes, contiguous, in header order.
//    PyTorch users load it with safetensors.torch.load_file(path).
//  - NumPy .npz: a zip (stored, not deflated, as numpy.savez writes) of one
//    NPY 1.0 file per tensor, "NAME.npy", plus "__metadata__.npy", a uint8
//    array holding the metadata as a JSON object (json.loads(bytes(a))).
//    numpy.load(path) reads it. The reader (checkpoint/npz_model.h) also
//    takes deflated members (numpy.savez_compressed) and NPY 2.0 files.
//
// Tensors (the same in both):
//   ROW table t:   "t.keys" U64 [n] (sorted, unique), "t" F32 [n, dim]
//   DENSE table t: "t" F32 [size]
//   "label_counts" U64 [num_labels]: training rows carrying each label (for
//                  PSP@k), when known.
//   "feature_idf"  F32 [num_features]: with data.tf_idf, the weight idf(f)
//                  training multiplied feature f by (input/feature_weighting.h)
//                  before any row normalisation; a reader weighs its input
//                  the same way. Required when the config says tf_idf.
// Metadata (strings): "format" = "tether-model", "format_version" = "1",
// "model_type" (XMC_MLP, SPARSE_LR, DENSE_MLP), "model_name", "loss",
// "hidden", "hidden_layers" (JSON array), "num_features", "num_labels",
// "data_format", "index_base", "label_base", "normalize_rows" (true|false),
// "tf_idf" (true|false: whether "feature_idf" weighs the input),
// "feature_scale", "feature_offset", "job_id", "generation", "clock",
// "tables" (JSON array: per table its id, name, kind, dim, size, num_keys,
// key_base and initializer {kind, bound, seed}: a row absent from "t.keys"
// was never trained and its value is InitialWeight(seed, id, key, column,
// bound) for UNIFORM, 0 for ZEROS; core/table_spec.h), "table_spec.NAME" (the
// TableSpec as Protobuf text), "job_config" (the JobConfig as Protobuf
// text), and "label_counts_rows" (N, the training rows counted) with the
// counts. Floats are printed with 9 significant digits (exact for float).
//
// Thread-safety: the functions share no state. Ownership: plain values.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/status.h"
#include "checkpoint/trained_model.h"

namespace tether {

/// Training label frequencies, for the propensity-scored metrics
/// (InversePropensity, eval/metrics.h). Empty when unknown.
struct LabelCounts {
  std::vector<uint64_t> counts;  // counts[l]: training rows carrying label l (0-based)
  int64_t num_rows = 0;          // N: training rows counted
  bool empty() const { return counts.empty(); }
};

/// A model file's contents.
struct ModelFileContents {
  TrainedModel model;
  LabelCounts label_counts;
  /// data.tf_idf: idf(f) per feature, data.num_features of them, each
  /// finite and > 0; empty without data.tf_idf.
  std::vector<float> feature_idf;
  std::map<std::string, std::string> metadata;  // as stored
};

enum class ModelFileFormat { kSafetensors, kNpz };

/// "safetensors" or "npz" → the format. Errors: InvalidArgument naming the
/// value.
StatusOr<ModelFileFormat> ParseModelFileFormat(const std::string& name);

/// The metadata written for `model` (see above).
std::map<std::string, std::string> ModelFileMetadata(const TrainedModel& model, const LabelCounts& counts);

/// Writes `model` (and `counts` when not empty) to `path` in `format`,
/// atomically: a temporary file next to `path`, fsynced, renamed over it
/// (AtomicFile, core/file_util.h; libzip's own rename for npz, then fsync of
/// the file and the directory). Memory: the npz writer holds a copy of each
/// tensor until the archive is closed; safetensors streams. Errors:
/// InvalidArgument when a table's values or keys do not match its spec
/// (naming the table), or counts.size() != data.num_labels; IOError naming
/// the path.
Status WriteModelFile(const TrainedModel& model, const LabelCounts& counts, const std::string& path,
                      ModelFileFormat format);
/// The same with the input weights of a data.tf_idf model (`feature_idf`:
/// data.num_features entries; empty for a model without tf_idf). Errors:
/// those above, and InvalidArgument when feature_idf's width does not match
/// data.tf_idf and data.num_features, or a table is named 'feature_idf'.
Status WriteModelFile(const TrainedModel& model, const LabelCounts& counts, const std::vector<float>& feature_idf,
                      const std::string& path, ModelFileFormat format);

/// Checks that `path` can be a model file before it is read: it exists and
/// is no directory, and it is no file of a Tether checkpoint (a shard file,
/// the MANIFEST, a worker state file). Its first bytes are read from a
/// descriptor opened without blocking and checked to be a regular file
/// (core/regular_file.h). Errors: NotFound "PATH: no such file";
/// InvalidArgument "PATH: is a directory, not a model file" or "PATH: is a
/// checkpoint's shard file, not a model file", each followed, for a
/// checkpoint or a directory of them, by the tether-export command that
/// writes its model file; InvalidArgument "PATH: is a FIFO (named pipe), not
/// a regular file" (a character device, a socket, ...); IOError naming the
/// path.
Status CheckModelFilePath(const std::string& path);

/// Reads a safetensors model file written by WriteModelFile back, bit for
/// bit. Checks the layout (header length within the file, a JSON object,
/// every tensor's dtype F32/U64/I64, shape, data_offsets in range,
/// contiguous from 0 to the end of the data, and their size matching
/// dtype × shape) and the model (metadata present and parseable, every
/// table's tensors present with the shapes of its spec, keys sorted,
/// unique and in the range of its spec; the metadata in agreement with the
/// job_config, the table specs and the label counts; with data.tf_idf a "feature_idf" of data.num_features finite
/// weights > 0). Errors: those of CheckModelFilePath; IOError naming the file; DataLoss
/// "FILE: tensor 'NAME': ..." or "FILE: header: ..." for a malformed file;
/// InvalidArgument "FILE: ..." for a well-formed file that is not a Tether
/// model (e.g. a missing table, or a tf_idf model without "feature_idf").
StatusOr<ModelFileContents> ReadSafetensorsModel(const std::string& path);

/// ReadSafetensorsModel's checks on a file's bytes (`path` names it in
/// errors): a pure function (tests/fuzz/model_file_fuzz.cc runs it on any
/// bytes).
StatusOr<ModelFileContents> ParseSafetensorsModel(const std::string& path, const std::string& file);

/// Reads a model file of either format written by WriteModelFile back, bit
/// for bit: a file that starts as a zip archive does ("PK\x03\x04") is read
/// as an npz (ParseNpzModel, checkpoint/npz_model.h), any other as
/// safetensors (ReadSafetensorsModel's checks), whatever its name; one named
/// ".npz" that is no zip archive is refused as such. Both formats then go
/// through the same checks of the model (metadata, each table's tensors
/// against its spec, sorted keys in range, finite weights). The whole file is held in
/// memory, refused before it is read when larger than the process may use.
/// Errors: those of CheckModelFilePath; NotFound, IOError naming the file;
/// ResourceExhausted "FILE: the model file is ..., more than the ... this
/// process may use (...)"; DataLoss "FILE: ..." naming the tensor (npz: the
/// member) for a malformed file; InvalidArgument "FILE: ..." for a
/// well-formed file that is no Tether model.
StatusOr<ModelFileContents> ReadModelFile(const std::string& path);

/// ReadModelFile's checks on a file's bytes (`path` names it in errors and,
/// for bytes that are no zip archive, ".npz" at its end refuses them): a
/// pure function but for the memory budget it reads (tests/fuzz/
/// model_file_fuzz.cc runs it on any bytes).
StatusOr<ModelFileContents> ParseModelFile(const std::string& path, const std::string& file);

}  // namespace tether
