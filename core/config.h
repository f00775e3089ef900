// Job configuration: loading a JobConfig from Protobuf text, applying
// command-line overrides and validating. What a model makes of the config
// (its tables, its own checks) lives in the worker's model registry
// (worker/model_registry.h); servers never need it.
//
// Everything here is a pure function of its inputs; thread-compatible.
// Errors name the file and line (config text), the flag, or the field.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/table_spec.h"
#include "proto/tether.pb.h"

namespace tether {

/// Parses a JobConfig in Protobuf text format from `path`.
/// Errors: NotFound (no such file), InvalidArgument "path:line: ..." for a
/// syntax error or unknown field; an unknown field also gets the closest
/// valid name ("did you mean 'staleness'?").
StatusOr<JobConfig> LoadJobConfig(const std::string& path);

/// Same as LoadJobConfig on in-memory text; `name` is used in messages.
StatusOr<JobConfig> ParseJobConfig(const std::string& text, const std::string& name);

/// One command-line flag that overrides a config field.
struct ConfigOverride {
  const char* flag;        // gflags name, e.g. "staleness"
  const char* field_path;  // dotted JobConfig path, e.g. "consistency.staleness"
  const char* help;
};

/// The flag → field table shared by every binary (tools/common_flags.cc
/// defines one string flag per entry).
const std::vector<ConfigOverride>& ConfigOverrides();

/// Sets the scalar field at dotted `field_path` from `value` (parsed per the
/// field's type; enums by name, case-insensitive). consistency.staleness is
/// special: "inf"/"asp" select ASP, a number selects SSP with that bound (0 is
/// BSP), and the value applies to every table (per-table bounds are cleared). `source` names the origin for messages
/// ("flag --staleness"). Errors: InvalidArgument naming source and value.
Status ApplyOverride(JobConfig* config, const std::string& field_path,
                     const std::string& value, const std::string& source);

/// Checks ranges and required fields (index_base, files, positive sizes) of
/// a whole job; the model's own fields are checked by ValidateModelConfig
/// (worker/model_registry.h). Errors name the field.
Status ValidateJobConfig(const JobConfig& config);

/// The config in force as one-line text, for the start-up log.
std::string ConfigSummary(const JobConfig& config);

/// Staleness bound for display: "0 (BSP)", "2 (SSP)", "inf (ASP)".
std::string StalenessName(int64_t staleness);

/// Closest name to `word` among `candidates` by edit distance, or "" when
/// none is within max(2, |word|/2) edits.
std::string ClosestName(const std::string& word, const std::vector<std::string>& candidates);

/// The job's consistency merged with table `name`'s override (fields set on
/// the table win).
ConsistencyConfig ConsistencyForTable(const JobConfig& config, const std::string& name);

/// The job's identity on the wire: cluster.job_id, or the config's name.
std::string JobId(const JobConfig& config);

}  // namespace tether
