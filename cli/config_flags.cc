#include "cli/config_flags.h"

#include <gflags/gflags.h>
#include <glog/logging.h>

#include <algorithm>
#include <deque>
#include <fstream>
#include <sstream>
#include <utility>

#include "cli/nominal_epoch.h"
#include "core/config.h"
#include "core/config/field_location.h"
#include "core/data_files.h"
#include "core/memory_fit.h"
#include "core/regular_file.h"
#include "input/arff_reader.h"
#include "input/reader.h"

DEFINE_string(config, "", "job config, Protobuf text format (see proto/config.proto and examples/)");
DEFINE_bool(log_config, true,
            "log the config in force at start-up in one line (every field at --v=1); tether-launch logs it once "
            "for the job and passes false to its servers and workers");

namespace tether {
namespace {

// One flag per ConfigOverrides() row: a boolean for a bool field (so that
// "--data_on_demand" alone means true and "--nodata_on_demand" false, as
// gflags' own booleans), a string otherwise, where "" means "not set, keep
// the config's value". gflags keeps pointers to the name, help and both
// values until exit, so the storage is never freed (as DEFINE_string's is
// not).
struct OverrideFlag {
  const ConfigOverride* row;
  std::string help;  // "consistency.staleness: staleness bound ..."
  bool is_bool = false;
  std::string value, default_value;       // string flags
  bool bool_value = false, bool_default = false;  // boolean flags
};

std::deque<OverrideFlag>& OverrideFlags() {
  static auto* flags = new std::deque<OverrideFlag>();  // deque: stable addresses
  return *flags;
}

// Runs at static initialisation, like the DEFINE_ macros, so the flags exist
// before main() parses the command line.
bool RegisterOverrideFlags() {
  for (const ConfigOverride& row : ConfigOverrides()) {
    OverrideFlag& f = OverrideFlags().emplace_back();
    f.row = &row;
    f.help = std::string(row.field_path) + ": " + row.help;
    f.is_bool = OverrideIsBool(row);
    if (f.is_bool) {
      gflags::FlagRegisterer(row.flag, f.help.c_str(), __FILE__, &f.bool_value, &f.bool_default);
    } else {
      gflags::FlagRegisterer(row.flag, f.help.c_str(), __FILE__, &f.value, &f.default_value);
    }
  }
  return true;
}
[[maybe_unused]] const bool kOverrideFlagsRegistered = RegisterOverrideFlags();

// The value the user gave, as text ("true", "0.05"), or "" when the flag was
// not given. A boolean counts as given when set at all, even to its default
// ("--nodata_on_demand" overrides a config that says true).
std::string ValueSet(const OverrideFlag& f) {
  if (!f.is_bool) return f.value;
  gflags::CommandLineFlagInfo info;
  if (!gflags::GetCommandLineFlagInfo(f.row->flag, &info) || info.is_default) return "";
  return f.bool_value ? "true" : "false";
}

// "optimizer.learning_rate" of a message "config field optimizer.learning_rate: why";
// "" for any other message.
std::string FieldNamed(const std::string& message) {
  static const std::string kHead = "config field ";
  if (message.rfind(kHead, 0) != 0) return "";
  const size_t end = message.find(": ", kHead.size());
  if (end == std::string::npos) return "";
  const std::string field = message.substr(kHead.size(), end - kHead.size());
  return field.find(' ') == std::string::npos ? field : "";
}

// `st` with `message` in place of its own, and its code.
Status WithMessage(const Status& st, std::string message) {
  switch (st.code()) {
    case Status::Code::kInvalidArgument: return Status::InvalidArgument(std::move(message));
    case Status::Code::kNotFound: return Status::NotFound(std::move(message));
    case Status::Code::kFailedPrecondition: return Status::FailedPrecondition(std::move(message));
    default: return st;  // no check names a field with another code
  }
}

// The line of the --config file that writes `field`, or -1 (not written,
// or the file cannot be read or parsed again).
int ConfigFileLine(const std::string& field) {
  const StatusOr<std::string> text = ReadRegularFile(FLAGS_config, kConfigFileMaxBytes, "config file");
  if (!text.ok()) return -1;
  const StatusOr<ConfigFieldLocator> locator = ConfigFieldLocator::FromText(*text);
  return locator.ok() ? locator->LineOf(field) : -1;
}

}  // namespace

Status NameConfigFieldSource(const Status& st) {
  if (st.ok()) return st;
  const std::string field = FieldNamed(st.message());
  if (field.empty()) return st;
  // A flag's value replaced the file's: the file's line would point at a
  // value that is not in force.
  for (const OverrideFlag& f : OverrideFlags())
    if (const std::string value = ValueSet(f); !value.empty() && field == f.row->field_path)
      return WithMessage(st, st.message() + " (set by flag --" + f.row->flag + "=" + value + ")");
  if (FLAGS_config.empty()) return st;
  const int line = ConfigFileLine(field);
  return line < 0 ? st : st.WithPrefix(FLAGS_config + ":" + std::to_string(line));
}

namespace {

// num_features / num_labels of 0 (the default) take the XMC header's widths,
// as proto/config.proto promises; the header of the
// training file is read (its first line only) before validation, so the
// values in force and every check see the real widths.
// ARFF likewise, from its @attribute lines and label XML (the header only).
// A train_file named *.arff or *.arff.gz is ARFF when data.format is unset.
// Several XMC files (data.train_file or test_file a list or glob,
// core/data_files.h): every header must give the same widths, which must
// equal the config's where it sets them; checked here, before any process
// starts, reading each file's first line only.
Status CheckXmcListWidths(JobConfig* config) {
  DataConfig* d = config->mutable_data();
  for (const auto& [field, spec] : {std::pair<const char*, std::string>{"data.train_file", d->train_file()},
                                    {"data.test_file", d->test_file()}}) {
    if (!IsFileList(spec)) continue;
    TETHER_ASSIGN_OR_RETURN(std::vector<std::string> paths, ExpandFileList(spec, field));
    std::string first;
    for (const std::string& path : paths) {
      TETHER_ASSIGN_OR_RETURN(auto header, ReadXmcHeader(path));
      // Hashed features: the header's F is not a width; only L must agree.
      if (d->hashed_features()) header[1] = 0;
      if (d->num_features() == 0) d->set_num_features(static_cast<int64_t>(header[1]));
      if (d->num_labels() == 0) d->set_num_labels(static_cast<int64_t>(header[2]));
      if (first.empty()) first = path;
      if (header[1] != static_cast<uint64_t>(d->num_features()) || header[2] != static_cast<uint64_t>(d->num_labels()))
        return Status::InvalidArgument(
            path + ":1: header declares " + std::to_string(header[1]) + " features and " +
            std::to_string(header[2]) + " labels, but " +
            (first == path ? std::string("the config says ") : "the job's widths (" + first + ", or the config) are ") +
            std::to_string(d->num_features()) + " and " + std::to_string(d->num_labels()) +
            ": the files of config field " + field + " must all have the same widths");
    }
  }
  return Status::OK();
}

Status ResolveXmcWidths(JobConfig* config) {
  DataConfig* d = config->mutable_data();
  if (d->format() == XMC && (IsFileList(d->train_file()) || IsFileList(d->test_file()))) {
    TETHER_RETURN_IF_ERROR(CheckDataFilesExist(*config));
    return CheckXmcListWidths(config);
  }
  const std::string& f = d->train_file();
  const auto ends = [&f](const std::string& e) { return f.size() >= e.size() && f.compare(f.size() - e.size(), e.size(), e) == 0; };
  if (!d->has_format() && (ends(".arff") || ends(".arff.gz"))) d->set_format(ARFF);
  if ((d->format() != XMC && d->format() != ARFF) || (d->num_features() != 0 && d->num_labels() != 0) ||
      d->train_file().empty())
    return Status::OK();
  if (d->format() == ARFF && d->label_xml().empty()) return Status::OK();  // validation names the field
  TETHER_RETURN_IF_ERROR(CheckDataFilesExist(*config));
  if (d->format() == ARFF) {
    ReadOptions opts;
    opts.format = DataFormat::kArff;
    opts.label_xml = d->label_xml();
    opts.num_labels = d->num_labels();
    opts.memory_budget = MemoryBudgetFor(*config);
    TETHER_ASSIGN_OR_RETURN(ArffHeader header, ReadArffHeader(d->train_file(), opts));
    if (d->num_features() == 0) d->set_num_features(static_cast<int64_t>(header.feature_names.size()));
    if (d->num_labels() == 0) d->set_num_labels(static_cast<int64_t>(header.label_names.size()));
    return Status::OK();
  }
  TETHER_ASSIGN_OR_RETURN(auto header, ReadXmcHeader(d->train_file()));
  if (!d->hashed_features() && d->num_features() == 0 && header[1] == 0 && header[0] > 0)
    return XmcZeroFeatures(d->train_file(), std::to_string(header[0]) + " 0 " + std::to_string(header[2]));
  // Hashed features: the header's F is not a width (ids are any uint64).
  if (d->num_features() == 0 && !d->hashed_features()) d->set_num_features(static_cast<int64_t>(header[1]));
  if (d->num_labels() == 0) d->set_num_labels(static_cast<int64_t>(header[2]));
  return Status::OK();
}

}  // namespace

StatusOr<JobConfig> LoadConfigFromFlags(const std::string& role, ConfigScope scope, ConfigLog log) {
  if (FLAGS_config.empty()) return Status::InvalidArgument("flag --config is required");
  TETHER_ASSIGN_OR_RETURN(JobConfig config, LoadJobConfig(FLAGS_config));
  std::string set_by_flags;
  {
    // --staleness is a bound of SSP/ASP: with AVERAGE (rounds, no bound) it
    // is refused, not silently dropped, whichever way AVERAGE was chosen.
    std::string staleness, model;
    for (const OverrideFlag& f : OverrideFlags()) {
      if (std::string(f.row->flag) == "staleness") staleness = ValueSet(f);
      if (std::string(f.row->flag) == "consistency_model") model = ValueSet(f);
    }
    std::string lower_model = model;
    std::transform(lower_model.begin(), lower_model.end(), lower_model.begin(), ::tolower);
    if (!staleness.empty() && lower_model == "average")
      return Status::InvalidArgument("flags --staleness=" + staleness +
                                     " and --consistency_model=average contradict: AVERAGE has no staleness bound "
                                     "(its rounds close like BSP); drop --staleness");
    if (!staleness.empty() && model.empty() && config.consistency().model() == AVERAGE)
      return Status::InvalidArgument("flag --staleness=" + staleness + ": " + FLAGS_config +
                                     " trains with consistency.model AVERAGE, which has no staleness bound; drop "
                                     "--staleness, or leave AVERAGE with --consistency_model=ssp|asp|bsp");
  }
  std::vector<std::pair<std::string, std::string>> flags_set;
  for (const OverrideFlag& f : OverrideFlags()) {
    const std::string value = ValueSet(f);
    if (value.empty()) continue;
    TETHER_RETURN_IF_ERROR(ApplyOverride(&config, f.row->field_path, value, std::string("flag --") + f.row->flag));
    set_by_flags += std::string(" --") + f.row->flag + "=" + value;
    flags_set.emplace_back(f.row->flag, value);
  }
  // A flag the job in force would ignore (--chunk_rows without data on
  // demand) is refused, not silently dropped.
  TETHER_RETURN_IF_ERROR(CheckOverridesApply(config, flags_set));
  if (scope == ConfigScope::kJob) {
    TETHER_RETURN_IF_ERROR(NameConfigFieldSource(ResolveXmcWidths(&config)));
    // Schedules given in epochs become the clocks the servers read, from the
    // job's row count (the same on every process: cli/nominal_epoch.h).
    TETHER_RETURN_IF_ERROR(NameConfigFieldSource(ResolveScheduleClocks(&config)));
  }
  // Validation names the field; say where it was set, the flag or the line.
  TETHER_RETURN_IF_ERROR(NameConfigFieldSource(scope == ConfigScope::kServer ? ValidateServerConfig(config)
                                                                             : ValidateJobConfig(config)));
  if (log == ConfigLog::kInForce) {
    const std::string head = "[" + role + "] config in force (" + FLAGS_config +
                             (set_by_flags.empty() ? "" : ", flags" + set_by_flags) + ")";
    // One line a person reads; every field for whoever asks (--v=1),
    // instead of it, so that either way it is logged once.
    if (VLOG_IS_ON(1))
      LOG(INFO) << head << ":\n" << ConfigSummary(config);
    else if (FLAGS_log_config)
      LOG(INFO) << head << ": " << ConfigOneLine(config);
  }
  return config;
}

std::vector<std::string> OverrideFlagsSet() {
  std::vector<std::string> out;
  for (const OverrideFlag& f : OverrideFlags())
    if (const std::string value = ValueSet(f); !value.empty())
      out.push_back(std::string("--") + f.row->flag + "=" + value);
  return out;
}

}  // namespace tether
