#include "checkpoint/model_tensors.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include <google/protobuf/text_format.h>

#include "checkpoint/model_metadata.h"
#include "core/memory_fit.h"
#include "core/regular_file.h"
#include "core/table_spec.h"

namespace tether {
namespace model_file_internal {

size_t ItemBytes(DType t) { return t == DType::kF32 ? 4 : t == DType::kU8 ? 1 : 8; }

const char* SafetensorsName(DType t) {
  switch (t) {
    case DType::kF32: return "F32";
    case DType::kU64: return "U64";
    case DType::kI64: return "I64";
    case DType::kU8: return "U8";
  }
  return "?";
}

const char* NpyDescr(DType t) {
  switch (t) {
    case DType::kF32: return "<f4";
    case DType::kU64: return "<u8";
    case DType::kI64: return "<i8";
    case DType::kU8: return "|u1";
  }
  return "?";
}

bool LooksLikeZip(const std::string& bytes) {
  return bytes.compare(0, 4, "PK\x03\x04") == 0 || bytes.compare(0, 4, "PK\x05\x06") == 0;
}

bool ElementCount(const std::vector<uint64_t>& shape, uint64_t* count) {
  uint64_t n = 1;
  for (uint64_t x : shape) {
    if (x != 0 && n > std::numeric_limits<uint64_t>::max() / 8 / x) return false;
    n *= x;
  }
  *count = n;
  return true;
}

std::string KeyOutOfRange(const TableSpec& spec, const std::vector<uint64_t>& sorted_keys) {
  const bool hashed = spec.num_keys() == 0;
  if (hashed && spec.key_base() != 1) return "";  // every uint64 is some id's key
  const uint64_t max_key = hashed ? std::numeric_limits<uint64_t>::max() - 1 : spec.num_keys() - 1;
  const auto past = std::upper_bound(sorted_keys.begin(), sorted_keys.end(), max_key);
  if (past == sorted_keys.end()) return "";
  const std::string range =
      hashed ? "[0, " + std::to_string(max_key) + "] (hashed ids under index base 1: an id i is key i - 1)"
             : "[0, " + std::to_string(spec.num_keys()) + ") (its spec's num_keys)";
  return "key " + std::to_string(*past) + " at position " + std::to_string(past - sorted_keys.begin()) +
         " is outside the table's keys " + range;
}

namespace {

const char* DTypeName(ModelFileFormat f, DType t) {
  return f == ModelFileFormat::kNpz ? NpyDescr(t) : SafetensorsName(t);
}

// A tensor as the file names it: safetensors "tensor 'w1'", npz "member 'w1.npy'".
std::string Named(ModelFileFormat f, const std::string& name) {
  return f == ModelFileFormat::kNpz ? "member '" + name + ".npy'" : "tensor '" + name + "'";
}

bool ParseInt(const std::string& s, int64_t* out) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno != 0 || *end != '\0') return false;
  *out = v;
  return true;
}

// A weight that is NaN or infinite would score every row it touches as
// NaN: such a file is refused, naming the tensor and the place.
Status CheckFinite(const std::string& path, ModelFileFormat f, const TrainedTable& t) {
  for (size_t i = 0; i < t.values.size(); ++i) {
    if (std::isfinite(t.values[i])) continue;
    const std::string value = std::isnan(t.values[i]) ? "NaN" : (t.values[i] > 0 ? "+inf" : "-inf");
    if (!IsRowTable(t.spec))
      return Status::DataLoss(path + ": " + Named(f, t.spec.name()) + " holds " + value + " at index " +
                              std::to_string(i) + ": a model's weights must be finite");
    const uint32_t dim = t.spec.dim();
    return Status::DataLoss(path + ": " + Named(f, t.spec.name()) + " holds " + value + " in the row of key " +
                            std::to_string(t.keys[i / dim]) + ", column " + std::to_string(i % dim) +
                            ": a model's weights must be finite");
  }
  return Status::OK();
}

// The model's config, identity and table specs from the metadata (tables
// sorted by id, without values yet).
StatusOr<ModelFileContents> ModelOfMetadata(const std::string& path, std::map<std::string, std::string>& meta) {
  const auto notmodel = [&path](const std::string& what) { return Status::InvalidArgument(path + ": " + what); };
  if (meta["format"] != kFormatName)
    return notmodel("not a Tether model file (metadata 'format' is '" + meta["format"] + "', expected '" +
                    kFormatName + "')");
  if (meta["format_version"] != kFormatVersion)
    return notmodel("model file format_version '" + meta["format_version"] + "' is not supported (this build reads " +
                    kFormatVersion + ")");
  ModelFileContents out;
  if (!google::protobuf::TextFormat::ParseFromString(meta["job_config"], &out.model.config))
    return notmodel("metadata 'job_config' is not a JobConfig in Protobuf text format");
  out.model.job_id = meta["job_id"];
  int64_t gen = 0, clock = 0;
  if (!ParseInt(meta["generation"], &gen) || !ParseInt(meta["clock"], &clock))
    return notmodel("metadata 'generation' or 'clock' is not an integer");
  out.model.generation = static_cast<uint64_t>(gen);
  out.model.clock = clock;
  for (const auto& [k, v] : meta) {
    if (k.compare(0, std::strlen(kSpecPrefix), kSpecPrefix) != 0) continue;
    TrainedTable t;
    if (!google::protobuf::TextFormat::ParseFromString(v, &t.spec))
      return notmodel("metadata '" + k + "' is not a TableSpec in Protobuf text format");
    out.model.tables.push_back(std::move(t));
  }
  std::sort(out.model.tables.begin(), out.model.tables.end(),
            [](const TrainedTable& a, const TrainedTable& b) { return a.spec.id() < b.spec.id(); });
  return out;
}

// Table `t`'s values (and a row table's keys) from its tensors.
Status FillTable(const std::string& path, const ModelTensors& mt, TrainedTable* t) {
  const auto find = [&](const std::string& name, DType dtype, size_t rank) -> StatusOr<const TensorView*> {
    auto it = mt.tensors.find(name);
    if (it == mt.tensors.end()) return Status::InvalidArgument(path + ": " + Named(mt.format, name) + " is missing");
    if (it->second.dtype != dtype || it->second.shape.size() != rank)
      return Status::DataLoss(path + ": " + Named(mt.format, name) + ": expected dtype " + DTypeName(mt.format, dtype) +
                              " of rank " + std::to_string(rank));
    return &it->second;
  };
  const std::string& name = t->spec.name();
  if (!IsRowTable(t->spec)) {
    TETHER_ASSIGN_OR_RETURN(const TensorView* v, find(name, DType::kF32, 1));
    if (v->shape[0] != t->spec.size())
      return Status::DataLoss(path + ": " + Named(mt.format, name) + ": shape [" + std::to_string(v->shape[0]) +
                              "], expected [" + std::to_string(t->spec.size()) + "] (its spec's size)");
    t->values.resize(v->shape[0]);
    std::memcpy(t->values.data(), v->data, v->bytes);
    return CheckFinite(path, mt.format, *t);
  }
  TETHER_ASSIGN_OR_RETURN(const TensorView* keys, find(name + ".keys", DType::kU64, 1));
  TETHER_ASSIGN_OR_RETURN(const TensorView* rows, find(name, DType::kF32, 2));
  if (rows->shape[0] != keys->shape[0] || rows->shape[1] != t->spec.dim())
    return Status::DataLoss(path + ": " + Named(mt.format, name) + ": shape [" + std::to_string(rows->shape[0]) + ", " +
                            std::to_string(rows->shape[1]) + "], expected [" + std::to_string(keys->shape[0]) + ", " +
                            std::to_string(t->spec.dim()) + "] (its keys and its spec's dim)");
  t->keys.resize(keys->shape[0]);
  std::memcpy(t->keys.data(), keys->data, keys->bytes);
  for (size_t i = 1; i < t->keys.size(); ++i)
    if (t->keys[i] <= t->keys[i - 1])
      return Status::DataLoss(path + ": " + Named(mt.format, name + ".keys") + ": not sorted and unique at position " +
                              std::to_string(i));
  // A key outside the range would be scored as a row no input can reach,
  // while the row it stands for takes its initial value.
  if (const std::string out = KeyOutOfRange(t->spec, t->keys); !out.empty())
    return Status::DataLoss(path + ": " + Named(mt.format, name + ".keys") + ": " + out);
  t->values.resize(rows->shape[0] * rows->shape[1]);
  std::memcpy(t->values.data(), rows->data, rows->bytes);
  return CheckFinite(path, mt.format, *t);
}

// data.tf_idf's weights: required, F32 [num_features], finite and > 0,
// when the config (and the metadata 'tf_idf', when present) says tf_idf.
Status FillFeatureIdf(const std::string& path, ModelTensors& mt, ModelFileContents* out) {
  const DataConfig& d = out->model.config.data();
  const std::string said = d.tf_idf() ? "true" : "false";
  if (mt.meta.count("tf_idf") > 0 && mt.meta["tf_idf"] != said)
    return Status::InvalidArgument(path + ": metadata 'tf_idf' is '" + mt.meta["tf_idf"] +
                                   "' but the job_config's data.tf_idf is " + said);
  if (!d.tf_idf()) return Status::OK();
  const std::string name = Named(mt.format, "feature_idf");
  auto it = mt.tensors.find("feature_idf");
  if (it == mt.tensors.end())
    return Status::InvalidArgument(path + ": data.tf_idf is true but " + name +
                                   " (the input's feature weights) is missing");
  const TensorView& v = it->second;
  if (v.dtype != DType::kF32 || v.shape.size() != 1 || static_cast<int64_t>(v.shape[0]) != d.num_features())
    return Status::DataLoss(path + ": " + name + ": expected " + DTypeName(mt.format, DType::kF32) + " of shape [" +
                            std::to_string(d.num_features()) + "] (data.num_features)");
  out->feature_idf.resize(v.shape[0]);
  std::memcpy(out->feature_idf.data(), v.data, v.bytes);
  for (size_t f = 0; f < out->feature_idf.size(); ++f)
    if (!(std::isfinite(out->feature_idf[f]) && out->feature_idf[f] > 0))
      return Status::DataLoss(path + ": " + name + ": feature " + std::to_string(f) + "'s weight is " +
                              std::to_string(out->feature_idf[f]) + ": every weight must be finite and > 0");
  return Status::OK();
}

}  // namespace

StatusOr<ModelFileContents> ModelOfTensors(const std::string& path, ModelTensors& mt) {
  TETHER_ASSIGN_OR_RETURN(ModelFileContents out, ModelOfMetadata(path, mt.meta));
  for (TrainedTable& t : out.model.tables) TETHER_RETURN_IF_ERROR(FillTable(path, mt, &t));
  if (mt.tensors.count("label_counts") > 0) {
    const TensorView& v = mt.tensors["label_counts"];
    if (v.shape.size() != 1 || (v.dtype != DType::kU64 && v.dtype != DType::kI64))
      return Status::DataLoss(path + ": " + Named(mt.format, "label_counts") + ": expected " + DTypeName(mt.format, DType::kU64) +
                              " or " + DTypeName(mt.format, DType::kI64) + " of rank 1");
    out.label_counts.counts.resize(v.shape[0]);
    std::memcpy(out.label_counts.counts.data(), v.data, v.bytes);  // I64 counts are ≥ 0
    if (!ParseInt(mt.meta["label_counts_rows"], &out.label_counts.num_rows))
      return Status::InvalidArgument(path + ": metadata 'label_counts_rows' is missing or not an integer");
  }
  TETHER_RETURN_IF_ERROR(FillFeatureIdf(path, mt, &out));
  TETHER_RETURN_IF_ERROR(CheckModelMetadata(path, mt.meta, out, mt.format));
  out.metadata = std::move(mt.meta);
  return out;
}

StatusOr<std::string> ReadWholeFile(const std::string& path) {
  // Opened without blocking, checked and read on one descriptor: a FIFO or
  // a device given as the model is refused by name, never waited on or read.
  TETHER_ASSIGN_OR_RETURN(const RegularFile file, OpenRegularFile(path, ""));
  // The whole file is held in memory: one that cannot fit is refused
  // before a byte is allocated, naming the limit.
  const MemoryBudget budget = MemoryBudgetFor(JobConfig{});
  if (budget.bytes > 0 && file.bytes > budget.bytes) {
    ::close(file.fd);
    return Status::ResourceExhausted(path + ": the model file is " + FormatBytes(file.bytes) + ", more than the " +
                                     FormatBytes(budget.bytes) + " this process may use (" + budget.source + ")");
  }
  // Bounded by its size when it was opened: one that grows while it is read
  // is being rewritten, and is refused rather than read without end.
  StatusOr<std::string> read = ReadOpenedFile(file, file.bytes, path, "");
  if (read.status().code() == Status::Code::kInvalidArgument)
    return Status::DataLoss(path + ": grew past its " + std::to_string(file.bytes) +
                            " bytes while it was read (a file being rewritten)");
  return read;
}

}  // namespace model_file_internal
}  // namespace tether
