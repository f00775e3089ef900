// Flags shared by the binaries that run a job: --config and one flag per
// config field that may be overridden from the command line. The table in
// core/config/overrides.cc (ConfigOverrides) is the only list: each row
// becomes a string flag here at start-up, so adding an override is one
// table row.
// Only main() files include this.
//
// Ownership: the flags' storage is process-global and lives until exit.
// Thread-safety: call from main() (the flags are process-global).
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "proto/config.pb.h"
#include "cli/flag_parser.h"

namespace tether {

/// Which checks LoadConfigFromFlags runs after applying the overrides.
enum class ConfigScope {
  kJob,     // ValidateJobConfig: every section (workers, launcher)
  kServer,  // ValidateServerConfig: cluster and consistency only (tether-server)
};

/// Whether LoadConfigFromFlags logs the values in force.
enum class ConfigLog {
  kInForce,  // once, tagged with the role: one line (ConfigOneLine), or at --v=1 every field
             // (ConfigSummary); --log_config=false (tether-launch's children) logs only the latter
  kQuiet,    // not at all
};

/// Loads --config, applies every override flag the user set (in the table's
/// order), validates per `scope`, and logs the values in force per `log`,
/// tagged with `role` ("server 0"). A validation error names where the field
/// was set (NameConfigFieldSource): the flag ("(set by flag
/// --learning_rate=nan)") or the file's line ("job.pbtxt:7: config field
/// ...").
/// Errors: InvalidArgument when --config is missing; those of LoadJobConfig,
/// ApplyOverride and the validation.
StatusOr<JobConfig> LoadConfigFromFlags(const std::string& role, ConfigScope scope = ConfigScope::kJob,
                                        ConfigLog log = ConfigLog::kInForce);

/// `st` with where the field it names got its value, for a message that
/// starts "config field FIELD: " (the checks of core/config.h,
/// ValidateModelConfig, CheckDataFilesExist): when an override flag set
/// FIELD, " (set by flag --X=V)" after the message; else, when the --config
/// file writes FIELD, "FILE:LINE: " before it, FILE as given to --config
/// (core/config/field_location.h). A field neither writes (a default, a
/// width from a data header), and any other status, come back unchanged;
/// so does the code. Reads the --config file again, only for such a message.
/// LoadConfigFromFlags applies it to its own checks; a main() applies it to
/// the checks it runs after.
Status NameConfigFieldSource(const Status& st);

/// The override flags the user set, as "--name=value" arguments, for a
/// launcher to forward to its children.
std::vector<std::string> OverrideFlagsSet();

}  // namespace tether
