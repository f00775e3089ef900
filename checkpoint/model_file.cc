#include "checkpoint/model_file.h"

#include <fcntl.h>
#include <unistd.h>
#include <zip.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>

#include <google/protobuf/text_format.h>
#include <nlohmann/json.hpp>

#include "checkpoint/model_tensors.h"
#include "checkpoint/npz_model.h"
#include "core/file_util.h"
#include "core/regular_file.h"
#include "core/table_spec.h"

namespace tether {
namespace {

using model_file_internal::DType;
using model_file_internal::ElementCount;
using model_file_internal::ItemBytes;
using model_file_internal::kFormatName;
using model_file_internal::kFormatVersion;
using model_file_internal::kMetadataKey;
using model_file_internal::kSpecPrefix;
using model_file_internal::LooksLikeZip;
using model_file_internal::ModelOfTensors;
using model_file_internal::ModelTensors;
using model_file_internal::NpyDescr;
using model_file_internal::ReadWholeFile;
using model_file_internal::SafetensorsName;
using model_file_internal::TensorView;

// One tensor to write: borrowed bytes.
struct Tensor {
  std::string name;
  DType dtype;
  std::vector<uint64_t> shape;
  const void* data;
  size_t bytes;
};

std::string FloatText(float v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.9g", static_cast<double>(v));
  return buf;
}

std::string Text(const google::protobuf::Message& m) {
  std::string s;
  google::protobuf::TextFormat::PrintToString(m, &s);
  return s;
}

// data.tf_idf's weights as a tensor, checked against the config.
Status AddFeatureIdf(const TrainedModel& model, const std::vector<float>& feature_idf, std::vector<Tensor>* out) {
  const DataConfig& d = model.config.data();
  if (!d.tf_idf()) {
    if (feature_idf.empty()) return Status::OK();
    return Status::InvalidArgument("feature_idf has " + std::to_string(feature_idf.size()) +
                                   " entries but the model's data.tf_idf is false");
  }
  if (static_cast<int64_t>(feature_idf.size()) != d.num_features())
    return Status::InvalidArgument("feature_idf has " + std::to_string(feature_idf.size()) +
                                   " entries but the model (data.tf_idf true) has data.num_features " +
                                   std::to_string(d.num_features()));
  for (const Tensor& t : *out)
    if (t.name == "feature_idf")
      return Status::InvalidArgument("a table may not be named 'feature_idf' in a model with data.tf_idf");
  out->push_back({"feature_idf", DType::kF32, {feature_idf.size()}, feature_idf.data(),
                  feature_idf.size() * sizeof(float)});
  return Status::OK();
}

// The model's tensors, in table order then label_counts and feature_idf;
// checks each table's values against its spec.
StatusOr<std::vector<Tensor>> TensorsOf(const TrainedModel& model, const LabelCounts& counts,
                                        const std::vector<float>& feature_idf) {
  std::vector<Tensor> out;
  for (const TrainedTable& t : model.tables) {
    const std::string& name = t.spec.name();
    if (IsRowTable(t.spec)) {
      const uint64_t n = t.keys.size(), dim = t.spec.dim();
      if (t.values.size() != n * dim)
        return Status::InvalidArgument("table '" + name + "': " + std::to_string(t.values.size()) +
                                       " values for " + std::to_string(n) + " keys of dim " + std::to_string(dim));
      for (size_t i = 1; i < t.keys.size(); ++i)
        if (t.keys[i] <= t.keys[i - 1])
          return Status::InvalidArgument("table '" + name + "': keys not sorted and unique at position " +
                                         std::to_string(i));
      if (const std::string bad = model_file_internal::KeyOutOfRange(t.spec, t.keys); !bad.empty())
        return Status::InvalidArgument("table '" + name + "': " + bad);
      out.push_back({name + ".keys", DType::kU64, {n}, t.keys.data(), n * sizeof(uint64_t)});
      out.push_back({name, DType::kF32, {n, dim}, t.values.data(), t.values.size() * sizeof(float)});
    } else {
      if (!t.keys.empty() || t.values.size() != t.spec.size())
        return Status::InvalidArgument("dense table '" + name + "': " + std::to_string(t.values.size()) +
                                       " values and " + std::to_string(t.keys.size()) + " keys; its spec has size " +
                                       std::to_string(t.spec.size()) + " and no keys");
      out.push_back({name, DType::kF32, {t.values.size()}, t.values.data(), t.values.size() * sizeof(float)});
    }
  }
  if (!counts.empty()) {
    const int64_t labels = model.config.data().num_labels();
    if (static_cast<int64_t>(counts.counts.size()) != labels)
      return Status::InvalidArgument("label_counts has " + std::to_string(counts.counts.size()) +
                                     " entries but the model has data.num_labels " + std::to_string(labels));
    out.push_back({"label_counts", DType::kU64, {counts.counts.size()}, counts.counts.data(),
                   counts.counts.size() * sizeof(uint64_t)});
  }
  TETHER_RETURN_IF_ERROR(AddFeatureIdf(model, feature_idf, &out));
  for (const Tensor& t : out)
    if (t.name == kMetadataKey || t.name == "label_counts.keys")
      return Status::InvalidArgument("a table may not be named '" + t.name + "'");
  return out;
}

std::string SafetensorsHeader(const std::vector<Tensor>& tensors, const std::map<std::string, std::string>& meta) {
  nlohmann::ordered_json h = nlohmann::ordered_json::object();
  nlohmann::ordered_json m = nlohmann::ordered_json::object();
  for (const auto& [k, v] : meta) m[k] = v;
  h[kMetadataKey] = std::move(m);
  uint64_t offset = 0;
  for (const Tensor& t : tensors) {
    h[t.name] = {{"dtype", SafetensorsName(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.bytes}}};
    offset += t.bytes;
  }
  std::string s = h.dump();
  // The reference writer pads the header with spaces so the data starts
  // 8-byte aligned; readers that map the file rely on it.
  s.append((8 - s.size() % 8) % 8, ' ');
  return s;
}

Status WriteSafetensors(const std::vector<Tensor>& tensors, const std::map<std::string, std::string>& meta,
                        const std::string& path) {
  const std::string header = SafetensorsHeader(tensors, meta);
  uint64_t n = header.size();
  char len[8];
  std::memcpy(len, &n, 8);
  TETHER_ASSIGN_OR_RETURN(AtomicFile f, AtomicFile::Create(path));
  TETHER_RETURN_IF_ERROR(f.Append(std::string_view(len, 8)));
  TETHER_RETURN_IF_ERROR(f.Append(header));
  // AtomicFile::Append is unbuffered; pieces of at most 64 MiB keep each
  // write large without one giant syscall.
  constexpr size_t kPiece = size_t{64} << 20;
  for (const Tensor& t : tensors) {
    const char* p = static_cast<const char*>(t.data);
    for (size_t off = 0; off < t.bytes; off += kPiece)
      TETHER_RETURN_IF_ERROR(f.Append(std::string_view(p + off, std::min(kPiece, t.bytes - off))));
  }
  return f.Commit();
}

// NPY format 1.0: magic, version, header length (uint16 LE), a Python dict
// literal padded with spaces and ended by '\n' so the data is 64-aligned.
std::string NpyBytes(DType dtype, const std::vector<uint64_t>& shape, const void* data, size_t bytes) {
  std::string dims;
  for (uint64_t d : shape) dims += std::to_string(d) + ", ";
  if (shape.size() > 1) dims.resize(dims.size() - 2);  // "(n, d)"; 1-D keeps "(n,)"
  if (shape.size() == 1) dims.resize(dims.size() - 1);
  std::string dict = std::string("{'descr': '") + NpyDescr(dtype) + "', 'fortran_order': False, 'shape': (" + dims +
                     "), }";
  const size_t unpadded = 10 + dict.size() + 1;
  dict.append((64 - unpadded % 64) % 64, ' ');
  dict += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  const auto hl = static_cast<uint16_t>(dict.size());
  out += static_cast<char>(hl & 0xff);
  out += static_cast<char>(hl >> 8);
  out += dict;
  out.append(static_cast<const char*>(data), bytes);
  return out;
}

Status SyncPath(const std::string& path, bool directory) {
  const int fd = open(path.c_str(), directory ? O_RDONLY | O_DIRECTORY : O_RDONLY);
  if (fd < 0) return Status::IOError(path + ": " + std::strerror(errno));
  const int rc = fsync(fd);
  const int saved = errno;
  close(fd);
  if (rc != 0) return Status::IOError(path + ": fsync: " + std::strerror(saved));
  return Status::OK();
}

Status WriteNpz(const std::vector<Tensor>& tensors, const std::map<std::string, std::string>& meta,
                const std::string& named) {
  // A link's target is replaced, never the link; a device or folder is refused.
  TETHER_ASSIGN_OR_RETURN(const OutputTarget target, ResolveOutputTarget(named, "output", StreamOutput::kRefuse));
  const std::string& path = target.path;
  const std::string tmp = path + ".tmp." + std::to_string(getpid()) + ".npz";
  int err = 0;
  zip_t* z = zip_open(tmp.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &err);
  if (z == nullptr) {
    zip_error_t ze;
    zip_error_init_with_code(&ze, err);
    Status st = Status::IOError(tmp + ": cannot create the archive: " + zip_error_strerror(&ze));
    zip_error_fini(&ze);
    return st;
  }
  // libzip reads each entry's buffer at zip_close: keep them alive until then.
  std::deque<std::string> entries;
  nlohmann::ordered_json mj = nlohmann::ordered_json::object();
  for (const auto& [k, v] : meta) mj[k] = v;
  const std::string meta_json = mj.dump();
  auto add = [&](const std::string& name, DType dtype, const std::vector<uint64_t>& shape, const void* data,
                 size_t bytes) -> Status {
    entries.push_back(NpyBytes(dtype, shape, data, bytes));
    zip_source_t* src = zip_source_buffer(z, entries.back().data(), entries.back().size(), 0);
    if (src == nullptr) return Status::IOError(tmp + ": " + name + ": " + zip_strerror(z));
    const zip_int64_t idx = zip_file_add(z, (name + ".npy").c_str(), src, ZIP_FL_OVERWRITE | ZIP_FL_ENC_UTF_8);
    if (idx < 0) {
      zip_source_free(src);
      return Status::IOError(tmp + ": " + name + ": " + zip_strerror(z));
    }
    if (zip_set_file_compression(z, idx, ZIP_CM_STORE, 0) != 0)
      return Status::IOError(tmp + ": " + name + ": " + zip_strerror(z));
    return Status::OK();
  };
  Status st = Status::OK();
  for (const Tensor& t : tensors) {
    st = add(t.name, t.dtype, t.shape, t.data, t.bytes);
    if (!st.ok()) break;
  }
  if (st.ok()) st = add(kMetadataKey, DType::kU8, {meta_json.size()}, meta_json.data(), meta_json.size());
  if (!st.ok()) {
    zip_discard(z);
    std::remove(tmp.c_str());
    return st;
  }
  if (zip_close(z) != 0) {
    st = Status::IOError(tmp + ": writing the archive: " + zip_strerror(z));
    zip_discard(z);
    std::remove(tmp.c_str());
    return st;
  }
  st = SyncPath(tmp, false);
  if (st.ok() && std::rename(tmp.c_str(), path.c_str()) != 0)
    st = Status::IOError(path + ": rename from " + tmp + ": " + std::strerror(errno));
  if (!st.ok()) {
    std::remove(tmp.c_str());
    return st;
  }
  const size_t slash = path.find_last_of('/');
  return SyncPath(slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash), true);
}

// ------------------------------------------------------------------ reader

}  // namespace

StatusOr<ModelFileFormat> ParseModelFileFormat(const std::string& name) {
  if (name == "safetensors") return ModelFileFormat::kSafetensors;
  if (name == "npz") return ModelFileFormat::kNpz;
  return Status::InvalidArgument("model file format must be safetensors or npz, got '" + name + "'");
}

std::map<std::string, std::string> ModelFileMetadata(const TrainedModel& model, const LabelCounts& counts) {
  const JobConfig& c = model.config;
  std::map<std::string, std::string> m;
  m["format"] = kFormatName;
  m["format_version"] = kFormatVersion;
  m["model_type"] = ModelType_Name(c.model().type());
  m["model_name"] = c.model().name();
  m["loss"] = LossType_Name(c.model().loss());
  m["hidden"] = std::to_string(c.model().hidden());
  nlohmann::json layers = nlohmann::json::array();
  if (c.model().hidden_layers_size() > 0) {
    for (int w : c.model().hidden_layers()) layers.push_back(w);
  } else {
    layers.push_back(c.model().hidden());
  }
  m["hidden_layers"] = layers.dump();
  m["num_features"] = std::to_string(c.data().num_features());
  m["num_labels"] = std::to_string(c.data().num_labels());
  m["data_format"] = FileFormat_Name(c.data().format());
  m["index_base"] = std::to_string(c.data().index_base());
  m["label_base"] = std::to_string(c.data().label_base());
  m["normalize_rows"] = c.data().normalize_rows() ? "true" : "false";
  m["tf_idf"] = c.data().tf_idf() ? "true" : "false";
  m["feature_scale"] = FloatText(c.data().feature_scale());
  m["feature_offset"] = FloatText(c.data().feature_offset());
  m["job_id"] = model.job_id;
  m["generation"] = std::to_string(model.generation);
  m["clock"] = std::to_string(model.clock);
  nlohmann::json tables = nlohmann::json::array();
  for (const TrainedTable& t : model.tables) {
    const TableSpec& s = t.spec;
    tables.push_back({{"id", s.id()},
                      {"name", s.name()},
                      {"kind", IsRowTable(s) ? "ROW" : "DENSE"},
                      {"dim", s.dim()},
                      {"size", s.size()},
                      {"num_keys", s.num_keys()},
                      {"key_base", s.key_base()},
                      {"rows", t.keys.size()},
                      {"init",
                       {{"kind", TableInitializer::Kind_Name(s.init().kind())},
                        {"bound", std::stod(FloatText(s.init().bound()))},
                        {"seed", s.init().seed()}}}});
    m[kSpecPrefix + s.name()] = Text(s);
  }
  m["tables"] = tables.dump();
  m["job_config"] = Text(c);
  if (!counts.empty()) m["label_counts_rows"] = std::to_string(counts.num_rows);
  return m;
}

Status WriteModelFile(const TrainedModel& model, const LabelCounts& counts, const std::string& path,
                      ModelFileFormat format) {
  return WriteModelFile(model, counts, {}, path, format);
}

Status WriteModelFile(const TrainedModel& model, const LabelCounts& counts, const std::vector<float>& feature_idf,
                      const std::string& path, ModelFileFormat format) {
  TETHER_ASSIGN_OR_RETURN(std::vector<Tensor> tensors, TensorsOf(model, counts, feature_idf));
  const std::map<std::string, std::string> meta = ModelFileMetadata(model, counts);
  return format == ModelFileFormat::kSafetensors ? WriteSafetensors(tensors, meta, path)
                                                 : WriteNpz(tensors, meta, path);
}

Status CheckModelFilePath(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (!fs::exists(st)) return Status::NotFound(path + ": no such file");
  // The names and first bytes of a checkpoint's files (checkpoint/checkpoint.h:
  // kManifestName, the shard files' magic number, WorkerFileName).
  const std::string manifest = "MANIFEST";
  const std::string export_cmd = "; write its model file with tether-export --checkpoint=";
  const std::string out = " --out=model.safetensors";
  if (fs::is_directory(st)) {
    const std::string msg = path + ": is a directory, not a model file";
    if (fs::exists(fs::path(path) / manifest, ec))
      return Status::InvalidArgument(msg + "; it is a checkpoint" + export_cmd + path + out);
    for (const auto& e : fs::directory_iterator(path, ec))
      if (e.is_directory(ec) && e.path().filename().string().rfind("ckpt-", 0) == 0)
        return Status::InvalidArgument(msg + "; it holds checkpoints: write the latest one's model file with "
                                             "tether-export --checkpoint=" + path + out);
    return Status::InvalidArgument(msg);
  }
  // The first bytes are read from the descriptor checked to be a regular
  // file: a FIFO or a device (also one swapped in after the status above)
  // is refused by name, never waited on or read.
  TETHER_ASSIGN_OR_RETURN(const RegularFile file, OpenRegularFile(path, ""));
  char head[28] = {};
  const ssize_t got = ::pread(file.fd, head, sizeof(head), 0);
  const int read_errno = errno;
  ::close(file.fd);
  if (got < 0) return Status::IOError(path + ": cannot read it: " + std::strerror(read_errno));
  const std::string first(head, sizeof(head));
  const std::string name = fs::path(path).filename().string();
  std::string dir = fs::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  std::string what;
  if (first.compare(0, 8, "TTHRCKPT") == 0) what = "shard file";
  else if (first.compare(0, 28, "# Tether checkpoint manifest") == 0) what = manifest;
  else if (name.rfind("worker-", 0) == 0 && name.size() > 6 && name.compare(name.size() - 6, 6, ".state") == 0 &&
           fs::exists(fs::path(dir) / manifest, ec))
    what = "worker state file";
  if (what.empty()) return Status::OK();
  return Status::InvalidArgument(path + ": is a checkpoint's " + what + ", not a model file; write the checkpoint's "
                                 "model file with tether-export --checkpoint=" + dir + out);
}

namespace {

// safetensors' own bound on the JSON header (its reference reader refuses
// longer ones): a length field is never trusted to size an allocation.
constexpr uint64_t kMaxSafetensorsHeaderBytes = 100ull << 20;

// A tensor entry of a safetensors header: its view and its data_offsets.
struct SafetensorsEntry {
  TensorView view;
  uint64_t begin = 0, end = 0;  // in the data section
};

// One tensor entry of the header: dtype, shape and data_offsets that fit
// the data section (`data`, `data_size` bytes) and the dtype × shape.
StatusOr<SafetensorsEntry> ParseTensorEntry(const std::string& path, const std::string& name, const nlohmann::json& e,
                                            const char* data, uint64_t data_size) {
  const auto tbad = [&](const std::string& what) { return Status::DataLoss(path + ": tensor '" + name + "': " + what); };
  if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") || !e.contains("data_offsets"))
    return tbad("needs dtype, shape and data_offsets");
  if (!e["dtype"].is_string()) return tbad("dtype is not a string");
  const std::string dt = e["dtype"].get<std::string>();
  SafetensorsEntry s;
  TensorView& v = s.view;
  if (dt == "F32") {
    v.dtype = DType::kF32;
  } else if (dt == "U64") {
    v.dtype = DType::kU64;
  } else if (dt == "I64") {
    v.dtype = DType::kI64;
  } else {
    return tbad("dtype " + dt + " is not one of F32, U64, I64");
  }
  if (!e["shape"].is_array()) return tbad("shape is not an array");
  for (const auto& d : e["shape"]) {
    if (!d.is_number_unsigned()) return tbad("shape holds something other than a non-negative integer");
    v.shape.push_back(d.get<uint64_t>());
  }
  uint64_t count = 0;
  if (!ElementCount(v.shape, &count)) return tbad("shape overflows");
  const auto& off = e["data_offsets"];
  if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
    return tbad("data_offsets is not [begin, end]");
  s.begin = off[0].get<uint64_t>();
  s.end = off[1].get<uint64_t>();
  if (s.begin > s.end || s.end > data_size)
    return tbad("data_offsets [" + std::to_string(s.begin) + ", " + std::to_string(s.end) +
                "] outside the data section of " + std::to_string(data_size) + " bytes");
  if (s.end - s.begin != count * ItemBytes(v.dtype))
    return tbad("data_offsets span " + std::to_string(s.end - s.begin) + " bytes but dtype " + dt + " x shape is " +
                std::to_string(count * ItemBytes(v.dtype)) + " bytes");
  v.data = data + s.begin;
  v.bytes = s.end - s.begin;
  return s;
}

// The tensors cover the data section exactly, one after another.
Status CheckContiguous(const std::string& path, const std::map<std::string, SafetensorsEntry>& entries,
                       uint64_t data_size) {
  std::vector<std::pair<uint64_t, std::string>> order;
  for (const auto& [name, s] : entries) order.push_back({s.begin, name});
  std::sort(order.begin(), order.end(), [&](const auto& a, const auto& b) {
    return a.first != b.first ? a.first < b.first : entries.at(a.second).end < entries.at(b.second).end;
  });
  uint64_t at = 0;
  for (const auto& [begin, name] : order) {
    if (begin != at)
      return Status::DataLoss(path + ": tensor '" + name + "': data_offsets begin at " + std::to_string(begin) +
                              ", expected " + std::to_string(at) +
                              " (tensors must be contiguous, without gaps or overlaps)");
    at = entries.at(name).end;
  }
  if (at != data_size)
    return Status::DataLoss(path + ": header: the tensors end at byte " + std::to_string(at) +
                            " of a data section of " + std::to_string(data_size) + " bytes");
  return Status::OK();
}

// The header of `file` (the whole file's bytes, which must outlive the
// result), checked against its data section.
StatusOr<ModelTensors> ParseSafetensors(const std::string& path, const std::string& file) {
  const auto bad = [&path](const std::string& what) { return Status::DataLoss(path + ": " + what); };
  if (file.size() < 8)
    return bad("header: the file is " + std::to_string(file.size()) +
               " bytes, shorter than the 8-byte header length (not a safetensors file)");
  if (LooksLikeZip(file))
    return Status::InvalidArgument(path + ": a zip archive (an npz), not a safetensors file");
  uint64_t n = 0;
  std::memcpy(&n, file.data(), 8);
  if (n > kMaxSafetensorsHeaderBytes)
    return bad("header: header length " + std::to_string(n) + " is above the " + std::to_string(kMaxSafetensorsHeaderBytes) +
               "-byte limit of safetensors headers");
  if (n > file.size() - 8)
    return bad("header: header length " + std::to_string(n) + " runs past the end of the file (" +
               std::to_string(file.size()) + " bytes)");
  const nlohmann::json h = nlohmann::json::parse(file.begin() + 8, file.begin() + 8 + static_cast<std::ptrdiff_t>(n),
                                                 nullptr, /*allow_exceptions=*/false);
  if (h.is_discarded()) return bad("header: not valid JSON");
  if (!h.is_object()) return bad("header: not a JSON object");
  ModelTensors out;
  out.format = ModelFileFormat::kSafetensors;
  const uint64_t data_size = file.size() - 8 - n;
  const char* data = file.data() + 8 + n;
  std::map<std::string, SafetensorsEntry> entries;
  for (auto it = h.begin(); it != h.end(); ++it) {
    const std::string& name = it.key();
    const nlohmann::json& e = it.value();
    if (name != kMetadataKey) {
      TETHER_ASSIGN_OR_RETURN(entries[name], ParseTensorEntry(path, name, e, data, data_size));
      out.tensors[name] = entries[name].view;
      continue;
    }
    if (!e.is_object()) return bad("header: __metadata__ is not an object");
    for (auto m = e.begin(); m != e.end(); ++m) {
      if (!m.value().is_string()) return bad("header: __metadata__ '" + m.key() + "' is not a string");
      out.meta[m.key()] = m.value().get<std::string>();
    }
  }
  TETHER_RETURN_IF_ERROR(CheckContiguous(path, entries, data_size));
  return out;
}

// A model file's format from its bytes, else from its name: a zip archive
// is an npz whatever its name; a file named .npz that is not one is refused
// as such rather than parsed as safetensors.
StatusOr<ModelFileFormat> FormatOfFile(const std::string& path, const std::string& file) {
  if (LooksLikeZip(file)) return ModelFileFormat::kNpz;
  const std::string ext = ".npz";
  if (path.size() >= ext.size() && path.compare(path.size() - ext.size(), ext.size(), ext) == 0)
    return Status::DataLoss(path + ": named .npz but not a zip archive (an npz starts with the bytes PK\\x03\\x04)");
  return ModelFileFormat::kSafetensors;
}

}  // namespace

StatusOr<ModelFileContents> ReadSafetensorsModel(const std::string& path) {
  TETHER_RETURN_IF_ERROR(CheckModelFilePath(path));
  TETHER_ASSIGN_OR_RETURN(const std::string file, ReadWholeFile(path));
  return ParseSafetensorsModel(path, file);
}

StatusOr<ModelFileContents> ParseSafetensorsModel(const std::string& path, const std::string& file) {
  TETHER_ASSIGN_OR_RETURN(ModelTensors st, ParseSafetensors(path, file));
  return ModelOfTensors(path, st);
}

StatusOr<ModelFileContents> ReadModelFile(const std::string& path) {
  TETHER_RETURN_IF_ERROR(CheckModelFilePath(path));
  TETHER_ASSIGN_OR_RETURN(const std::string file, ReadWholeFile(path));
  return ParseModelFile(path, file);
}

StatusOr<ModelFileContents> ParseModelFile(const std::string& path, const std::string& file) {
  TETHER_ASSIGN_OR_RETURN(const ModelFileFormat format, FormatOfFile(path, file));
  return format == ModelFileFormat::kNpz ? ParseNpzModel(path, file) : ParseSafetensorsModel(path, file);
}

}  // namespace tether
