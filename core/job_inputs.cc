#include "core/job_inputs.h"

#include <sys/stat.h>

#include <filesystem>
#include <system_error>

#include "core/data_files.h"

namespace tether {

std::vector<NamedInput> JobInputs(const std::string& config_path, const std::string& flagfile,
                                  const JobConfig& config, const std::string& resume_from) {
  std::vector<NamedInput> inputs;
  if (!config_path.empty()) inputs.push_back({"flag --config", config_path});
  for (const std::string& f : SplitFileList(flagfile))
    if (!f.empty()) inputs.push_back({"flag --flagfile", f});
  const DataConfig& d = config.data();
  for (const auto& [field, spec] : {std::pair<const char*, const std::string*>{"data.train_file", &d.train_file()},
                                    {"data.test_file", &d.test_file()}}) {
    if (spec->empty()) continue;
    auto files = ExpandFileList(*spec, field);
    if (!files.ok()) continue;  // refused, naming the field, by the data checks
    for (const std::string& f : *files) inputs.push_back({field, f});
  }
  for (const auto& [field, path] : {std::pair<const char*, const std::string*>{"data.train_split", &d.train_split()},
                                    {"data.test_split", &d.test_split()},
                                    {"data.validation_split", &d.validation_split()},
                                    {"data.train_label_file", &d.train_label_file()},
                                    {"data.test_label_file", &d.test_label_file()}})
    if (!path->empty()) inputs.push_back({field, *path});
  if (!resume_from.empty()) inputs.push_back({"flag --resume_from", resume_from});
  return inputs;
}

namespace {

// The file an output path names once links are followed, absolute and
// normal; "" when it cannot be told (the writable checks report why).
std::string FinalPath(const std::string& path) {
  StatusOr<OutputTarget> target = ResolveOutputTarget(path, "", StreamOutput::kWriteThrough);
  if (!target.ok()) return "";
  std::error_code ec;
  const std::filesystem::path p = std::filesystem::weakly_canonical(std::filesystem::absolute(target->path, ec), ec);
  return ec ? "" : p.string();
}

// Whether outputs `a` and `b` would be written to one file.
bool SameOutputFile(const std::string& a, const std::string& b) {
  struct stat sa {}, sb {};
  const bool a_exists = ::stat(a.c_str(), &sa) == 0, b_exists = ::stat(b.c_str(), &sb) == 0;
  if (a_exists && b_exists)
    return S_ISREG(sa.st_mode) && S_ISREG(sb.st_mode) && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
  if (a_exists != b_exists) return false;
  const std::string fa = FinalPath(a);
  return !fa.empty() && fa == FinalPath(b);
}

}  // namespace

Status CheckOutputs(const std::vector<NamedInput>& outputs, const std::vector<NamedInput>& inputs) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    const NamedInput& out = outputs[i];
    if (out.path.empty()) continue;
    TETHER_RETURN_IF_ERROR(CheckOutputNotInput(out.path, out.source, inputs));
    for (size_t j = 0; j < i; ++j)
      if (!outputs[j].path.empty() && SameOutputFile(outputs[j].path, out.path))
        return Status::InvalidArgument(outputs[j].source + "=" + outputs[j].path + " and " + out.source + "=" +
                                       out.path + " are the same file: one output would overwrite the other; "
                                       "give each its own file name");
  }
  return Status::OK();
}

}  // namespace tether
