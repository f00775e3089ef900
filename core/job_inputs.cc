#include "core/job_inputs.h"

#include "core/data_files.h"

namespace tether {

std::vector<NamedInput> JobInputs(const std::string& config_path, const std::string& flagfile,
                                  const JobConfig& config) {
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
  return inputs;
}

}  // namespace tether
