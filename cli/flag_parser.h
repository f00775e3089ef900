// The command line of every Tether binary: one parser (ParseFlagsOrDie) so
// that each refuses typos with a suggestion, refuses stray positional
// arguments, prints the same --help (Tether's flags first) and --version,
// and logs with the same prefix. Only main() files include this.
//
// Ownership: the CommandLine is read during the call only.
// Thread-safety: call ParseFlagsOrDie once, from main(), before any thread
// starts (it sets global gflags and glog state).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace tether {

/// What a binary takes on its command line besides flags.
struct CommandLine {
  CommandLine(std::string usage_text, std::vector<std::string> positional_names = {})  // NOLINT: implicit by design
      : usage(std::move(usage_text)), positional(std::move(positional_names)) {}

  /// Usage, one or more lines, without the program name's "usage: ", e.g.
  /// "tether-server --config=JOB.pbtxt --shard=I [--listen=...]".
  std::string usage;
  /// Names of the positional arguments the binary requires, in order
  /// ({"check", "FILE"} for tether-data); empty: flags only.
  std::vector<std::string> positional;
};

/// Parses argv with gflags after checking it, then initialises glog (to
/// stderr, prefix "I20240612 12:34:56.789 " — level, date and time; the role
/// and rank follow in each message). Never returns on:
///   --help, -h     usage and the binary's own flags, then the config override
///                  flags, then one line pointing at --helpfull for glog's and
///                  gflags' own flags; exit 0.
///   --helpfull     every flag (gflags' listing); exit 0.
///   --version      "NAME VERSION (commit C, CUDA on|off)"; exit 0.
///   no arguments   the usage on stderr; exit 2.
///   an unknown flag (with the closest valid name: "did you mean
///   --staleness?"), a flag that takes a value but has none or an empty one,
///   the same in a --flagfile ("f.flags:2: ..."), a positional argument the
///   binary does not take ("unexpected argument 'x'"), or a missing one:
///                  "error: ..." on stderr; exit 1.
/// On return argv holds the program name and the positional arguments.
void ParseFlagsOrDie(int* argc, char*** argv, const CommandLine& command_line);

/// "0.1.0 (commit 1d8ee06, CUDA off)": the version and the build: CUDA as
/// configured (core/build_config.h.in), the commit as of the last build
/// (cli/git_commit.cmake).
std::string VersionString();

}  // namespace tether
