#include "cli/flag_parser.h"

#include <gflags/gflags.h>
#include <glog/logging.h>

#include <algorithm>
#include <cctype>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <iomanip>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "cli/signals.h"
#include "core/config.h"  // ClosestName
#include "core/process_limits.h"
#include "core/regular_file.h"
#include "tether/build_config.h"
#include "tether/git_commit.h"

namespace tether {

namespace {

// The largest flagfile read (1 MiB): a flagfile is a few lines of flags.
constexpr uint64_t kFlagfileMaxBytes = 1u << 20;

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
  // Read here, before gflags reads it: a FIFO is refused instead of waited
  // on and /dev/zero instead of read until memory runs out.
  const StatusOr<std::string> contents = ReadRegularFile(path, kFlagfileMaxBytes, "flagfile");
  if (!contents.ok()) FlagError(where, contents.status().message());
  std::istringstream in(*contents);
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

namespace {

// glog's prefix without the thread id and file:line: level, date and time.
// Every message then carries its role and rank ("[worker 0] ..."), so a line
// names who, when and how bad exactly once. The date stays so that
// "grep -v '^[IWE][0-9]\{8\} '" drops log lines from a tool's output.
void LogPrefix(std::ostream& s, const google::LogMessageInfo& info, void* /*data*/) {
  const auto& t = info.time;
  s << std::setfill('0') << info.severity[0] << std::setw(4) << 1900 + t.year() << std::setw(2) << 1 + t.month() << std::setw(2)
    << t.day() << ' ' << std::setw(2) << t.hour() << ':' << std::setw(2) << t.min() << ':' << std::setw(2)
    << t.sec() << '.' << std::setw(3) << t.usec() / 1000;
}

const char* ProgramName(const char* argv0) {
  const char* slash = std::strrchr(argv0, '/');
  return slash == nullptr ? argv0 : slash + 1;
}

// True for flags defined in Tether's own sources, false for glog's and
// gflags' own. Tether defines flags only in the main() files (tools/) and in
// this folder's cli/config_flags.cc and cli/metrics_flags.cc (STYLE.md:
// gflags only in main() files and the one room that maps them). The file
// name is __FILE__ as the compiler saw it: absolute, or relative when ccache
// rewrites paths.
bool InFolder(const std::string& filename, const std::string& folder) {
  return filename.rfind(folder + "/", 0) == 0 || filename.find("/" + folder + "/") != std::string::npos;
}

bool IsTetherFlag(const gflags::CommandLineFlagInfo& f) {
  return InFolder(f.filename, "tools") || InFolder(f.filename, "cli");
}

bool IsConfigFlag(const gflags::CommandLineFlagInfo& f) {
  return f.filename.find("cli/config_flags.cc") != std::string::npos;
}

// The file name without its folder: --help lists a binary's own flags by
// file and then by name, as gflags orders them, but with the folder left
// out, so a main() file's flags and cli/metrics_flags.cc's keep the order
// they had when every flag was defined in tools/.
std::string BaseName(const std::string& filename) {
  const size_t slash = filename.rfind('/');
  return slash == std::string::npos ? filename : filename.substr(slash + 1);
}

void PrintFlag(const gflags::CommandLineFlagInfo& f) {
  std::string left = "  --" + f.name;
  if (IsConfigFlag(f) && f.type == "bool") {
    // An override boolean has no default of its own: unset, the config's
    // value holds.
    left = "  --[no]" + f.name;
  } else if (!f.default_value.empty()) {
    left += "=" + f.default_value;
  }
  // Wide enough for "--key_list_cache_bytes=67108864" on one line.
  constexpr size_t kColumn = 35;
  if (left.size() + 2 > kColumn) {
    std::printf("%s\n%*s%s\n", left.c_str(), static_cast<int>(kColumn), "", f.description.c_str());
  } else {
    std::printf("%-*s%s\n", static_cast<int>(kColumn), left.c_str(), f.description.c_str());
  }
}

// --help: the usage, the binary's own flags, then --config and the config
// overrides in the table's order; glog's and gflags' ~100 flags only behind
// --helpfull.
[[noreturn]] void PrintHelp(const char* program, const CommandLine& command_line) {
  std::printf("usage: %s\n", command_line.usage.c_str());
  std::vector<gflags::CommandLineFlagInfo> all;
  gflags::GetAllFlags(&all);
  std::vector<gflags::CommandLineFlagInfo> own, config;
  for (const auto& f : all) {
    if (!IsTetherFlag(f)) continue;
    (IsConfigFlag(f) ? config : own).push_back(f);
  }
  std::stable_sort(own.begin(), own.end(), [](const auto& a, const auto& b) {
    return std::make_pair(BaseName(a.filename), a.name) < std::make_pair(BaseName(b.filename), b.name);
  });
  if (!own.empty()) {
    std::printf("\nflags:\n");
    for (const auto& f : own) PrintFlag(f);
  }
  if (!config.empty()) {
    // --config first, then the overrides as ConfigOverrides() lists them.
    auto rank = [](const std::string& name) {
      const auto& table = ConfigOverrides();
      for (size_t i = 0; i < table.size(); ++i)
        if (name == table[i].flag) return i + 1;
      return size_t{0};
    };
    std::stable_sort(config.begin(), config.end(), [&](const auto& a, const auto& b) { return rank(a.name) < rank(b.name); });
    std::printf("\njob config (each override sets the config field it names; unset: the config's value):\n");
    for (const auto& f : config) PrintFlag(f);
  }
  std::printf("\nlogging (glog) and gflags' own flags, such as --v=1 and --flagfile: %s --helpfull\n", program);
  std::exit(0);
}

}  // namespace

std::string VersionString() {
  return std::string(TETHER_VERSION) + " (commit " + TETHER_GIT_COMMIT + ", CUDA " +
         (TETHER_WITH_CUDA ? "on" : "off") + ")";
}

namespace {

// The process's own limits, read and fitted once at start
// (core/process_limits.h): a start they cannot carry is refused naming the
// limit, before any file or connection is opened.
void FitProcessLimitsOrDie(const char* program) {
  ProcessLimits limits = ReadProcessLimits();
  const Status st = FitProcessLimits(LimitNeeds{}, &limits);
  if (!st.ok()) {
    std::fprintf(stderr, "error: %s cannot start: %s\n", program, st.message().c_str());
    std::exit(2);
  }
  VLOG(1) << program << ": open files " << limits.open_files << ", file size "
          << (limits.file_size_bytes ? std::to_string(limits.file_size_bytes) : "unlimited") << ", address space "
          << (limits.address_space_bytes ? std::to_string(limits.address_space_bytes) : "unlimited")
          << ", cgroup memory "
          << (limits.cgroup_memory_bytes ? std::to_string(limits.cgroup_memory_bytes) + " (" + limits.cgroup_file + ")"
                                         : std::string("unlimited"));
}

}  // namespace

void ParseFlagsOrDie(int* argc, char*** argv, const CommandLine& command_line) {
  const char* program = ProgramName((*argv)[0]);
  gflags::SetUsageMessage(command_line.usage);
  gflags::SetVersionString(VersionString());
  const std::vector<std::string> args(*argv + 1, *argv + *argc);
  if (args.empty()) {
    std::fprintf(stderr, "usage: %s\n\n%s --help lists the flags.\n", command_line.usage.c_str(), program);
    std::exit(2);
  }
  // Help and version first: "--help" after a typo still helps.
  for (const std::string& arg : args) {
    if (arg == "--") break;
    if (arg == "--help" || arg == "-help" || arg == "-h") PrintHelp(program, command_line);
    if (arg == "--helpfull" || arg == "-helpfull") {
      gflags::ShowUsageWithFlags(program);
      std::exit(0);
    }
    if (arg == "--version" || arg == "-version") {
      std::printf("%s %s\n", program, VersionString().c_str());
      std::exit(0);
    }
  }
  std::vector<gflags::CommandLineFlagInfo> all;
  gflags::GetAllFlags(&all);
  std::vector<std::string> names;
  for (const auto& f : all) names.push_back(f.name);
  CheckFlags(args, std::vector<std::string>(args.size()), names, /*command_line=*/true, 0);
  gflags::ParseCommandLineFlags(argc, argv, /*remove_flags=*/true);
  const auto& want = command_line.positional;
  if (static_cast<size_t>(*argc - 1) > want.size()) {
    const std::string extra = (*argv)[1 + want.size()];
    // "--data_on_demand false": a boolean flag takes no separate value.
    const bool word = extra == "true" || extra == "false";
    FlagError("", "unexpected argument '" + extra + "' (" +
                      (word ? "a boolean flag takes its value after '=', as --NAME=" + extra + ", or --NAME / --noNAME; "
                            : std::string()) +
                      program +
                      (want.empty() ? std::string(" takes flags only") : " takes " + std::to_string(want.size()) +
                                                                            " argument(s)") +
                      "; usage: " + command_line.usage + ")");
  }
  if (static_cast<size_t>(*argc - 1) < want.size())
    FlagError("", "missing argument " + want[static_cast<size_t>(*argc - 1)] + " (usage: " + command_line.usage + ")");
  // A closed stdout or stderr (`... | head -3`, a terminal gone) must never
  // stop a run (case C25): with SIGPIPE ignored, a write to a closed pipe
  // fails with EPIPE and the line is dropped, while training, the metrics
  // file and the exit status go on. (ZeroMQ sends with MSG_NOSIGNAL anyway.)
  // Every other signal that ends a process says so (cli/signals.h).
  InstallSignalReports(program);
  // Command-line programs log to stderr unless told otherwise.
  if (gflags::GetCommandLineFlagInfoOrDie("logtostderr").is_default) FLAGS_logtostderr = true;
  google::InitGoogleLogging((*argv)[0], &LogPrefix);
  FitProcessLimitsOrDie(program);
}

}  // namespace tether
