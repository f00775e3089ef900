#include "tools/common_flags.h"

#include <gflags/gflags.h>
#include <glog/logging.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>

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

namespace {

[[noreturn]] void FlagError(const std::string& where, const std::string& msg) {
  std::fprintf(stderr, "error: %s%s\n", where.empty() ? "" : (where + ": ").c_str(), msg.c_str());
  std::exit(1);
}

// Checks flags before gflags sees them: gflags skips unknown names in a
// flagfile and flags without a value there without a word (case C20, from
// gflags/gflags#61), and reports unknown command-line flags without a
// suggestion. `args` are "--name[=value]" strings; `where` labels them in
// errors ("" on the command line, "path:line" in a flagfile); on the
// command line a value may also be the next argument.
void CheckFlags(const std::vector<std::string>& args, const std::vector<std::string>& where,
                const std::vector<std::string>& names, bool command_line, int depth);

void CheckFlagfile(const std::string& path, const std::string& where, const std::vector<std::string>& names,
                   int depth) {
  if (depth > 8) FlagError(where, "--flagfile nested more than 8 deep (a cycle?)");
  std::ifstream in(path);
  if (!in) FlagError(where, "cannot open flagfile " + path);
  std::vector<std::string> args, places;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    const size_t b = line.find_first_not_of(" \t\r");
    if (b == std::string::npos || line[b] == '#') continue;
    const size_t e = line.find_last_not_of(" \t\r");
    const std::string text = line.substr(b, e - b + 1);
    const std::string at = path + ":" + std::to_string(n);
    if (text[0] != '-') FlagError(at, "expected a flag (--name=value), got '" + text + "'");
    args.push_back(text);
    places.push_back(at);
  }
  CheckFlags(args, places, names, /*command_line=*/false, depth + 1);
}

void CheckFlags(const std::vector<std::string>& args, const std::vector<std::string>& where,
                const std::vector<std::string>& names, bool command_line, int depth) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") break;
    if (arg.rfind("-", 0) != 0) continue;
    const std::string body = arg.substr(arg.rfind("--", 0) == 0 ? 2 : 1);
    const size_t eq = body.find('=');
    const std::string name = body.substr(0, eq);
    if (name == "help" || name == "helpfull" || name == "version" || name == "helpshort") continue;
    gflags::CommandLineFlagInfo info;
    const bool known = gflags::GetCommandLineFlagInfo(name.c_str(), &info);
    if (!known && name.rfind("no", 0) == 0 &&
        gflags::GetCommandLineFlagInfo(name.substr(2).c_str(), &info) && info.type == "bool")
      continue;
    if (!known) {
      const std::string guess = ClosestName(name, names);
      FlagError(where[i], "unknown flag --" + name + (guess.empty() ? "" : " (did you mean --" + guess + "?)"));
    }
    std::string value;
    if (eq != std::string::npos && eq + 1 == body.size() && info.type != "bool") {
      // "--staleness=" would leave the flag unset and the config in force
      // without a word: refuse it like a missing value.
      FlagError(where[i], "flag --" + name + " has an empty value (use --" + name + "=VALUE)");
    }
    if (eq != std::string::npos) {
      value = body.substr(eq + 1);
    } else if (info.type != "bool") {
      // The next argument is the value unless it is another flag; "-1" is a
      // value (a negative number), "-x" a flag. In a flagfile the value must
      // be on the flag's line.
      const std::string* next = command_line && i + 1 < args.size() ? &args[i + 1] : nullptr;
      const bool next_is_value = next != nullptr && (next->empty() || (*next)[0] != '-' ||
                                                     (next->size() > 1 && (std::isdigit(static_cast<unsigned char>((*next)[1])) || (*next)[1] == '.')));
      if (!next_is_value)
        FlagError(where[i], "flag --" + name + " is missing its value (use --" + name + "=VALUE)");
      value = *next;
      ++i;
    }
    if (name == "flagfile") CheckFlagfile(value, where[i].empty() ? "flag --flagfile" : where[i], names, depth);
  }
}

}  // namespace

void ParseFlagsOrDie(int* argc, char*** argv, const char* usage) {
  gflags::SetUsageMessage(usage);
  std::vector<gflags::CommandLineFlagInfo> all;
  gflags::GetAllFlags(&all);
  std::vector<std::string> names;
  for (const auto& f : all) names.push_back(f.name);
  const std::vector<std::string> args(*argv + 1, *argv + *argc);
  CheckFlags(args, std::vector<std::string>(args.size()), names, /*command_line=*/true, 0);
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
