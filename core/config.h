// Job configuration: loading a JobConfig from Protobuf text, applying
// command-line overrides, validating, and deriving the model's tables.
//
// Everything here is a pure function of its inputs; thread-compatible.
// Errors name the file and line (config text), the flag, or the field.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
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

/// Sets the scalar field at dotted `field_path` from `value`, parsed by
/// protobuf's text format for the field's type (TextFormat::
/// ParseFieldValueFromString), with three differences: strings are taken as
/// they are (no quotes), enum names in any case ("adam" for ADAM), and
/// consistency.staleness also takes "inf"/"asp" (ASP, stored as -1) and
/// "bsp" (0). A staleness applies to every table: the job's model becomes
/// SSP (ASP for -1) and per-table bounds are cleared. Only the syntax is
/// checked here; ranges and finiteness ("nan", "inf" for a float) are
/// ValidateJobConfig's. On error the config is unchanged. `source` names the
/// origin for messages ("flag --staleness"). Errors: InvalidArgument
/// "flag --epochs=3x: expected a 32-bit integer (field train.epochs)";
/// Internal when `field_path` names no scalar field (a bug in the table).
Status ApplyOverride(JobConfig* config, const std::string& field_path,
                     const std::string& value, const std::string& source);

/// Checks ranges, finiteness and required fields of the whole job (data,
/// model, training, optimizers, tables, message sizes), starting with
/// ValidateServerConfig's checks. Errors: InvalidArgument
/// "config field FIELD: why".
Status ValidateJobConfig(const JobConfig& config);

/// The checks a parameter-server shard needs: cluster.* (sizes, addresses,
/// heartbeat and timeout) and consistency.* including each table's
/// consistency override; data, model and training are not looked at.
/// Errors: InvalidArgument "config field FIELD: why".
Status ValidateServerConfig(const JobConfig& config);

/// Case C15: refuses a model whose tables cannot travel within the
/// transport's message limit (kMaxFrameBytes, core/net/message.h): a dense
/// table whose largest shard slice is larger (the message names the table,
/// its size, the limit and the number of servers that would do), or a row
/// table whose single row is. Row pulls and pushes of many rows are split by
/// the client and need no check. Called by ValidateJobConfig.
Status CheckMessageSizes(const JobConfig& config);

/// The config in force for the start-up log: each set section in the
/// schema's order as "  data { train_file: \"a.txt\" index_base: 0 ... }",
/// wrapped at about 100 characters (continuation lines indented 6 spaces),
/// then "  staleness in force: 2 (SSP)" (and each table with its own
/// consistency). No trailing newline.
std::string ConfigSummary(const JobConfig& config);

/// Staleness bound for display: "0 (BSP)", "2 (SSP)", "inf (ASP)".
std::string StalenessName(int64_t staleness);

/// Closest name to `word` among `candidates` by edit distance, or "" when
/// none is within max(2, |word|/2) edits.
std::string ClosestName(const std::string& word, const std::vector<std::string>& candidates);

// ------------------------------------------------------------ tables

enum class TableKind { kRow, kDense };
enum class InitKind { kZeros, kUniform };

/// A table of the job's model. Row tables map uint64 key → `dim` floats and
/// are created on first touch; dense tables hold `size` floats.
struct TableSpec {
  uint32_t id = 0;
  std::string name;
  TableKind kind = TableKind::kRow;
  uint32_t dim = 1;     // floats per row (row tables)
  uint64_t size = 0;    // floats (dense tables)
  InitKind init = InitKind::kZeros;
  float init_bound = 0; // uniform(-bound, bound)
  OptimizerConfig optimizer;
  ConsistencyConfig consistency;  // the job's, merged with this table's override
  int64_t staleness = 0;          // effective bound: 0 BSP, s SSP, -1 ASP
  // Row tables: the data index base their keys were read with
  // (data.index_base; -1 unset). Part of the model fingerprint, so a worker
  // reading with another base than the model was built with is refused at
  // HELLO instead of shifting every key by one (case C02).
  int key_base = -1;
};

/// Effective staleness bound of a consistency setting: BSP → 0, ASP → −1,
/// SSP → its `staleness` field.
int64_t EffectiveStaleness(const ConsistencyConfig& c);

/// The job's consistency merged with table `name`'s override (fields set on
/// the table win).
ConsistencyConfig ConsistencyForTable(const JobConfig& config, const std::string& name);

/// The tables of the job's model, ids 0.., identical on every process.
/// XMC_MLP: "w1" (row table, key = feature id, dim H), "b1" (dense, H),
/// "w2" (row table, key = label id, dim H+1: the label's weights then its bias).
/// SPARSE_LR: "w" (row table, key = feature id, dim 1, zeros), "b" (dense, 1).
/// DENSE_MLP with layer widths d0..dn (DenseMlpLayerWidths): for layer
/// i = 1..n, "wi" (dense, d(i-1) × di row-major: row = input unit) and "bi"
/// (dense, di, zeros); dense tables are range-partitioned over the shards.
/// Uniform init bounds are init_scale · sqrt(6 / (fan_in + fan_out)) (Glorot
/// & Bengio 2010), with data.num_features / data.num_labels as the outer fans.
std::vector<TableSpec> TablesForJob(const JobConfig& config);

/// DENSE_MLP layer widths: data.num_features, then model.hidden_layers (or
/// model.hidden when that list is empty), then data.num_labels.
std::vector<int64_t> DenseMlpLayerWidths(const JobConfig& config);

/// A string that two processes must agree on to pair: table names, kinds,
/// dims, optimizers. Staleness is compared separately.
std::string ModelFingerprint(const std::vector<TableSpec>& tables);

}  // namespace tether
