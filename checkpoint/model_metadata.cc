#include "checkpoint/model_metadata.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include <nlohmann/json.hpp>

namespace tether {
namespace model_file_internal {
namespace {

// The metadata fields the writer derives from the job_config, each with the
// config field it repeats. 'tf_idf' is checked where its weights are read.
struct DerivedField {
  const char* key;
  const char* config_field;
  bool is_float;
  bool is_json;
};

constexpr DerivedField kDerived[] = {
    {"model_type", "model.type", false, false},     {"model_name", "model.name", false, false},
    {"loss", "model.loss", false, false},           {"hidden", "model.hidden", false, false},
    {"hidden_layers", "model.hidden_layers", false, true},
    {"num_features", "data.num_features", false, false},
    {"num_labels", "data.num_labels", false, false},
    {"data_format", "data.format", false, false},   {"index_base", "data.index_base", false, false},
    {"label_base", "data.label_base", false, false},
    {"normalize_rows", "data.normalize_rows", false, false},
    {"feature_scale", "data.feature_scale", true, false},
    {"feature_offset", "data.feature_offset", true, false},
};

std::string FloatText(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.9g", v);
  return buf;
}

// A float field: the metadata's text is a finite number equal (as a float,
// the config's type) to the config's value, which is finite too.
Status CheckFloatField(const std::string& path, const DerivedField& f, const std::string& stored, float config) {
  const std::string config_text = FloatText(static_cast<double>(config));
  if (!std::isfinite(config))
    return Status::InvalidArgument(path + ": the job_config's " + f.config_field + " is " + config_text +
                                   ": not a finite number");
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(stored.c_str(), &end);
  if (stored.empty() || *end != '\0' || errno != 0 || !std::isfinite(v))
    return Status::InvalidArgument(path + ": metadata '" + f.key + "' is '" + stored + "': not a finite number (the job_config's " +
                                   f.config_field + " is " + config_text + ")");
  if (static_cast<float>(v) != config)
    return Status::InvalidArgument(path + ": metadata '" + f.key + "' is '" + stored + "' but the job_config's " +
                                   f.config_field + " is " + config_text);
  return Status::OK();
}

// Each entry of the metadata 'tables' against the spec it summarises, for
// the fields the entry holds.
Status CheckTables(const std::string& path, const std::string& stored, const std::string& expected) {
  const nlohmann::json have = nlohmann::json::parse(stored, nullptr, /*allow_exceptions=*/false);
  const nlohmann::json want = nlohmann::json::parse(expected);
  if (have.is_discarded() || !have.is_array())
    return Status::InvalidArgument(path + ": metadata 'tables' is not a JSON array");
  if (have.size() != want.size())
    return Status::InvalidArgument(path + ": metadata 'tables' lists " + std::to_string(have.size()) +
                                   " tables but the file's table specs are " + std::to_string(want.size()));
  for (size_t i = 0; i < want.size(); ++i) {
    if (!have[i].is_object())
      return Status::InvalidArgument(path + ": metadata 'tables' entry " + std::to_string(i) + " is not an object");
    const std::string table = want[i]["name"].get<std::string>();
    for (auto it = have[i].begin(); it != have[i].end(); ++it) {
      if (!want[i].contains(it.key()) || want[i][it.key()] == it.value()) continue;
      return Status::InvalidArgument(path + ": metadata 'tables' entry " + std::to_string(i) + " field " + it.key() +
                                     " is " + it.value().dump() + " but the file's table_spec." + table + " (and its " +
                                     "keys) say " + want[i][it.key()].dump());
    }
  }
  return Status::OK();
}

Status CheckLabelCounts(const std::string& path, const LabelCounts& c, int64_t num_labels, ModelFileFormat format) {
  if (c.empty()) return Status::OK();
  const std::string name = format == ModelFileFormat::kNpz ? "member 'label_counts.npy'" : "tensor 'label_counts'";
  if (static_cast<int64_t>(c.counts.size()) != num_labels)
    return Status::DataLoss(path + ": " + name + " has " + std::to_string(c.counts.size()) +
                            " counts but the job_config's data.num_labels is " + std::to_string(num_labels));
  if (c.num_rows < 0)
    return Status::DataLoss(path + ": metadata 'label_counts_rows' is " + std::to_string(c.num_rows) +
                            ": the training rows counted cannot be negative");
  for (size_t l = 0; l < c.counts.size(); ++l)
    if (c.counts[l] > static_cast<uint64_t>(c.num_rows))
      return Status::DataLoss(path + ": " + name + ": label " + std::to_string(l) + "'s count " +
                              std::to_string(c.counts[l]) + " is above metadata 'label_counts_rows' " +
                              std::to_string(c.num_rows) + " (the training rows counted; a negative I64 count " +
                              "reads as a large one)");
  return Status::OK();
}

}  // namespace

Status CheckModelMetadata(const std::string& path, const std::map<std::string, std::string>& meta,
                          const ModelFileContents& contents, ModelFileFormat format) {
  const JobConfig& c = contents.model.config;
  const std::map<std::string, std::string> expected = ModelFileMetadata(contents.model, contents.label_counts);
  for (const DerivedField& f : kDerived) {
    auto it = meta.find(f.key);
    if (it == meta.end()) continue;
    const std::string& stored = it->second;
    const std::string& want = expected.at(f.key);
    if (f.is_float) {
      const float config = std::string(f.key) == "feature_scale" ? c.data().feature_scale() : c.data().feature_offset();
      TETHER_RETURN_IF_ERROR(CheckFloatField(path, f, stored, config));
      continue;
    }
    const bool same = f.is_json ? nlohmann::json::parse(stored, nullptr, false) == nlohmann::json::parse(want)
                                : stored == want;
    if (!same)
      return Status::InvalidArgument(path + ": metadata '" + f.key + "' is '" + stored + "' but the job_config's " +
                                     f.config_field + " is " + want);
  }
  if (auto it = meta.find("tables"); it != meta.end())
    TETHER_RETURN_IF_ERROR(CheckTables(path, it->second, expected.at("tables")));
  return CheckLabelCounts(path, contents.label_counts, c.data().num_labels(), format);
}

}  // namespace model_file_internal
}  // namespace tether
