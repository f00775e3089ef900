// The tensors of a model file, whichever container holds them (safetensors,
// or a NumPy .npz: checkpoint/model_file.h), and the checks that turn them
// into a model. Both readers share them, so a container's parser only finds
// each tensor's dtype, shape and bytes, and every check after that (the
// metadata, each table's shapes against its spec, sorted keys, finite
// weights, the label counts) is the same for both. Private to the
// model-file library.
//
// Ownership: a TensorView borrows its bytes from the buffer its parser was
// given, which must outlive it; ModelOfTensors copies them out.
// Thread-safety: the functions share no state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "checkpoint/model_file.h"
#include "core/status.h"
#include "proto/tables.pb.h"

namespace tether {
namespace model_file_internal {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "model files are little-endian and read and written from memory as they are");

/// Metadata key (safetensors) and member name stem (npz) of the metadata.
inline constexpr char kMetadataKey[] = "__metadata__";
/// Metadata 'format' and 'format_version' of a Tether model file, and the
/// prefix of the metadata keys holding each table's TableSpec.
inline constexpr char kFormatName[] = "tether-model";
inline constexpr char kFormatVersion[] = "1";
inline constexpr char kSpecPrefix[] = "table_spec.";

enum class DType { kF32, kU64, kI64, kU8 };

/// Bytes of one element: 4 (F32), 8 (U64, I64), 1 (U8).
size_t ItemBytes(DType t);

/// The dtype as safetensors names it: "F32", "U64", "I64", "U8".
const char* SafetensorsName(DType t);

/// The dtype as an NPY header's 'descr' names it: "<f4", "<u8", "<i8", "|u1".
const char* NpyDescr(DType t);

/// Whether `bytes` start as a zip archive does: a local file header
/// ("PK\x03\x04"), or the end record of an empty archive ("PK\x05\x06").
bool LooksLikeZip(const std::string& bytes);

/// The number of elements of `shape` into *count; false when count × 8
/// bytes would overflow uint64 (a size no file can hold).
bool ElementCount(const std::vector<uint64_t>& shape, uint64_t* count);

/// One tensor: `bytes` = ItemBytes(dtype) × the elements of `shape`
/// (checked by the parser that made it), at `data`.
struct TensorView {
  DType dtype = DType::kF32;
  std::vector<uint64_t> shape;
  const char* data = nullptr;
  uint64_t bytes = 0;
};

/// Where the sorted keys of a row table leave the range its spec admits:
/// [0, num_keys) (feature or label ids after the index base), or with
/// num_keys 0 (hashed feature ids, proto/tables.proto) any uint64 an id can
/// become (under key_base 1 an id i is key i - 1, so 2^64 - 1 never is).
/// Returns "" when every key lies inside, else "key K at position P is
/// outside the table's keys [0, N) (...)" for the first key outside.
std::string KeyOutOfRange(const TableSpec& spec, const std::vector<uint64_t>& sorted_keys);

/// A model file's metadata and tensors, by name (safetensors: the header's
/// keys; npz: the member names without ".npy").
struct ModelTensors {
  ModelFileFormat format = ModelFileFormat::kSafetensors;  // how errors name dtypes
  std::map<std::string, std::string> meta;
  std::map<std::string, TensorView> tensors;
};

/// The model the tensors hold: its config, identity and table specs from
/// the metadata, each table's values (and a row table's keys) from its
/// tensors, the label counts when there is a "label_counts" tensor, the
/// input's weights ("feature_idf") when the config says data.tf_idf.
/// Tensors no table names are ignored. Errors: InvalidArgument "PATH: ..."
/// for a file that is no Tether model (metadata 'format' missing or other,
/// a table's tensor missing, metadata unparseable, "feature_idf" missing
/// from a tf_idf model or metadata 'tf_idf' contradicting the config);
/// DataLoss "PATH: tensor 'NAME': ..." for a tensor of the wrong dtype,
/// rank or shape, keys not sorted and unique or outside the table's range
/// (KeyOutOfRange), a weight that is NaN or
/// infinite, or a feature weight that is not > 0; and CheckModelMetadata's
/// (checkpoint/model_metadata.h): metadata that disagrees with the
/// job_config or the tables, label counts that cannot be.
StatusOr<ModelFileContents> ModelOfTensors(const std::string& path, ModelTensors& t);

/// The bytes of the file at `path`, refused before a byte is allocated when
/// it is larger than the process may use (MemoryBudgetFor, core/memory_fit.h).
/// Opened without blocking and checked on the descriptor it is read from
/// (core/regular_file.h). Errors: NotFound "PATH: no such file";
/// InvalidArgument "PATH: is a FIFO (named pipe), not a regular file" (a
/// character device, a directory, ...); IOError naming the path;
/// ResourceExhausted "PATH: the model file is ..., more than the ... this
/// process may use (SOURCE)"; DataLoss "PATH: grew past its N bytes while
/// it was read ...".
StatusOr<std::string> ReadWholeFile(const std::string& path);

}  // namespace model_file_internal
}  // namespace tether
