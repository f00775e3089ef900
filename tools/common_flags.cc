#include "tools/common_flags.h"

#include <gflags/gflags.h>
#include <glog/logging.h>

#include <cstdio>
#include <cstdlib>

#include "core/config.h"

DEFINE_string(config, "", "job config, Protobuf text format (see proto/tether.proto)");

namespace {
const char* HelpFor(const char* flag) {
  for (const auto& o : tether::ConfigOverrides())
    if (std::string(o.flag) == flag) return o.help;
  return "";
}
}  // namespace

// One string flag per ConfigOverrides() entry; "" means "not set, keep the
// config's value". Kept in step with the table by the CHECK in
// LoadConfigFromFlags.
#define TETHER_OVERRIDE_FLAG(name) DEFINE_string(name, "", HelpFor(#name))
TETHER_OVERRIDE_FLAG(staleness);
TETHER_OVERRIDE_FLAG(num_servers);
TETHER_OVERRIDE_FLAG(num_workers);
TETHER_OVERRIDE_FLAG(epochs);
TETHER_OVERRIDE_FLAG(minibatch_size);
TETHER_OVERRIDE_FLAG(minibatches_per_clock);
TETHER_OVERRIDE_FLAG(seed);
TETHER_OVERRIDE_FLAG(threads);
TETHER_OVERRIDE_FLAG(device);
TETHER_OVERRIDE_FLAG(learning_rate);
TETHER_OVERRIDE_FLAG(optimizer);
TETHER_OVERRIDE_FLAG(hidden);
TETHER_OVERRIDE_FLAG(loss);
TETHER_OVERRIDE_FLAG(index_base);
TETHER_OVERRIDE_FLAG(normalize_rows);
TETHER_OVERRIDE_FLAG(l2);
TETHER_OVERRIDE_FLAG(train_file);
TETHER_OVERRIDE_FLAG(test_file);
TETHER_OVERRIDE_FLAG(request_timeout_ms);
TETHER_OVERRIDE_FLAG(slowdown);
TETHER_OVERRIDE_FLAG(slowdown_rank);
TETHER_OVERRIDE_FLAG(staleness_policy);
TETHER_OVERRIDE_FLAG(worker_timeout_ms);
TETHER_OVERRIDE_FLAG(eval_every_epochs);
TETHER_OVERRIDE_FLAG(metrics_dir);
TETHER_OVERRIDE_FLAG(progress_every_s);
TETHER_OVERRIDE_FLAG(eval_max_rows);
TETHER_OVERRIDE_FLAG(sampled_labels);
TETHER_OVERRIDE_FLAG(eval_minibatch_size);
#undef TETHER_OVERRIDE_FLAG

namespace tether {

void ParseFlagsOrDie(int* argc, char*** argv, const char* usage) {
  gflags::SetUsageMessage(usage);
  std::vector<gflags::CommandLineFlagInfo> all;
  gflags::GetAllFlags(&all);
  std::vector<std::string> names;
  for (const auto& f : all) names.push_back(f.name);
  for (int i = 1; i < *argc; ++i) {
    std::string arg = (*argv)[i];
    if (arg == "--") break;
    if (arg.rfind("-", 0) != 0) continue;
    std::string body = arg.substr(arg.rfind("--", 0) == 0 ? 2 : 1);
    const size_t eq = body.find('=');
    std::string name = body.substr(0, eq);
    if (name == "help" || name == "helpfull" || name == "version" || name == "helpshort") continue;
    gflags::CommandLineFlagInfo info;
    bool known = gflags::GetCommandLineFlagInfo(name.c_str(), &info);
    if (!known && name.rfind("no", 0) == 0 &&
        gflags::GetCommandLineFlagInfo(name.substr(2).c_str(), &info) && info.type == "bool")
      continue;
    if (!known) {
      std::string guess = ClosestName(name, names);
      std::fprintf(stderr, "error: unknown flag --%s%s\n", name.c_str(),
                   guess.empty() ? "" : (" (did you mean --" + guess + "?)").c_str());
      std::exit(1);
    }
    if (eq != std::string::npos && eq + 1 == body.size() && info.type != "bool") {
      // "--staleness=" would leave the flag unset and the config in force
      // without a word: refuse it like a missing value.
      std::fprintf(stderr, "error: flag --%s has an empty value (use --%s=VALUE)\n", name.c_str(), name.c_str());
      std::exit(1);
    }
    if (eq == std::string::npos && info.type != "bool") {
      // The next argument is the value unless it is another flag; "-1" is a
      // value (a negative number), "-x" a flag.
      const char* next = i + 1 < *argc ? (*argv)[i + 1] : nullptr;
      const bool next_is_value =
          next != nullptr && (next[0] != '-' || (next[1] >= '0' && next[1] <= '9') || next[1] == '.');
      if (!next_is_value) {
        std::fprintf(stderr, "error: flag --%s is missing its value (use --%s=VALUE)\n", name.c_str(),
                     name.c_str());
        std::exit(1);
      }
      ++i;
    }
  }
  gflags::ParseCommandLineFlags(argc, argv, true);
  FLAGS_logtostderr = true;
  google::InitGoogleLogging((*argv)[0]);
}

StatusOr<JobConfig> LoadConfigFromFlags(const std::string& role) {
  if (FLAGS_config.empty()) return Status::InvalidArgument("flag --config is required");
  TETHER_ASSIGN_OR_RETURN(JobConfig config, LoadJobConfig(FLAGS_config));
  for (const auto& o : ConfigOverrides()) {
    gflags::CommandLineFlagInfo info;
    CHECK(gflags::GetCommandLineFlagInfo(o.flag, &info)) << "override flag --" << o.flag << " is not defined";
    if (info.current_value.empty()) continue;
    TETHER_RETURN_IF_ERROR(
        ApplyOverride(&config, o.field_path, info.current_value, std::string("flag --") + o.flag));
  }
  TETHER_RETURN_IF_ERROR(ValidateJobConfig(config));
  LOG(INFO) << "[" << role << "] config in force (" << FLAGS_config << " + flags): " << ConfigSummary(config);
  return config;
}

std::vector<std::string> OverrideFlagsSet() {
  std::vector<std::string> out;
  for (const auto& o : ConfigOverrides()) {
    gflags::CommandLineFlagInfo info;
    if (gflags::GetCommandLineFlagInfo(o.flag, &info) && !info.current_value.empty())
      out.push_back(std::string("--") + o.flag + "=" + info.current_value);
  }
  return out;
}

}  // namespace tether
