// Flags shared by every Tether binary: --config and one flag per config
// field that may be overridden from the command line (core/config.h's
// ConfigOverrides table). Only main() files include this.
#pragma once

#include <string>

#include "core/status.h"
#include "proto/tether.pb.h"

namespace tether {

/// Parses argv with gflags after checking it: an unknown flag is refused with
/// the closest valid name ("did you mean --staleness?"), and a flag that takes
/// a value but has none (`--staleness` at the end, or followed by another
/// flag) is refused. On refusal prints the reason and exits 1, before any
/// network activity. Also initialises glog (logs to stderr).
void ParseFlagsOrDie(int* argc, char*** argv, const char* usage);

/// Loads --config, applies every override flag the user set, validates, and
/// logs the values in force once, tagged with `role` ("server 0").
/// Errors: those of LoadJobConfig, ApplyOverride and ValidateJobConfig.
StatusOr<JobConfig> LoadConfigFromFlags(const std::string& role);

/// The override flags the user set, as "--name=value" arguments, for a
/// launcher to forward to its children.
std::vector<std::string> OverrideFlagsSet();

}  // namespace tether
