// Job configuration: loading a JobConfig from Protobuf text, applying
// command-line overrides and validating. What a model makes of the config
// (its tables, its own checks) lives in the worker's model registry
// (worker/models/model_registry.h); servers never need it.
//
// Everything here is a pure function of its inputs; thread-compatible.
// Errors name the file and line (config text), the flag, or the field.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "core/table_spec.h"
#include "proto/config.pb.h"
#include "proto/tables.pb.h"

namespace tether {

/// The largest config file read (16 MiB): far above any job's config (the
/// examples are a few KiB), and a bound on what a wrong path can make a
/// process hold.
inline constexpr uint64_t kConfigFileMaxBytes = 16u << 20;

/// Parses a JobConfig in Protobuf text format from `path`, then resolves its
/// relative data paths against the folder the file is in (ResolveDataPaths),
/// so a config works from any current directory. `path` must be a regular
/// file of at most kConfigFileMaxBytes (core/regular_file.h: a FIFO is
/// refused at once, never waited on).
/// Errors: NotFound "config file PATH: no such file", InvalidArgument
/// "config file PATH: is a FIFO (named pipe), not a regular file" (also a
/// character device ...) or "...: is N bytes, more than the 16777216-byte
/// limit for a config file", InvalidArgument "path:line: ..." for a
/// syntax error or unknown field; an unknown field also gets the closest
/// valid name ("did you mean 'staleness'?").
StatusOr<JobConfig> LoadJobConfig(const std::string& path);

/// The rule for data paths written in a config file: every relative one of
/// data.train_file, test_file, train_split, test_split, validation_split,
/// train_label_file, test_label_file and label_xml becomes base_dir/path, made absolute and
/// lexically normal ("examples/../data/x" -> "/repo/data/x"); absolute paths
/// and unset fields are left alone. LoadJobConfig applies it with the config
/// file's folder; values given later by flags (--train_file, --test_file)
/// are not resolved: they stay relative to the current directory, as any
/// command-line path. ParseJobConfig (text in memory) does not apply it.
/// Pure; not thread-safe on the same config.
void ResolveDataPaths(JobConfig* config, const std::string& base_dir);

/// Same as LoadJobConfig on in-memory text; `name` is used in messages.
StatusOr<JobConfig> ParseJobConfig(const std::string& text, const std::string& name);

/// One command-line flag that overrides a config field.
struct ConfigOverride {
  const char* flag;        // gflags name, e.g. "staleness"
  const char* field_path;  // dotted JobConfig path, e.g. "consistency.staleness"
  const char* help;
};

/// The flag → field table shared by every binary (cli/config_flags.cc
/// defines one flag per entry: a boolean flag for a bool field, a string
/// flag otherwise).
const std::vector<ConfigOverride>& ConfigOverrides();

/// True when `row` sets a bool field (train.data_on_demand): its flag is a
/// boolean, so "--data_on_demand" alone means true and "--nodata_on_demand"
/// false, as gflags' own booleans. Pure.
bool OverrideIsBool(const ConfigOverride& row);

/// Sets the scalar field at dotted `field_path` from `value`, parsed by
/// protobuf's text format for the field's type (TextFormat::
/// ParseFieldValueFromString), with three differences: strings are taken as
/// they are (no quotes), enum names in any case ("adam" for ADAM), and
/// consistency.staleness also takes "inf"/"asp" (ASP, stored as -1) and
/// "bsp" (0). A staleness applies to every table: the job's model becomes
/// SSP (ASP for -1) and per-table bounds are cleared. Only the syntax is
/// checked here; a repeated string field (security.curve.authorized_keys)
/// takes a comma-separated list that replaces the config's. Ranges and
/// finiteness ("nan", "inf" for a float) are
/// ValidateJobConfig's. On error the config is unchanged. `source` names the
/// origin for messages ("flag --staleness"). Errors: InvalidArgument
/// "flag --epochs=3x: expected a 32-bit integer (field train.epochs)";
/// Internal when `field_path` names no scalar field (a bug in the table).
Status ApplyOverride(JobConfig* config, const std::string& field_path,
                     const std::string& value, const std::string& source);

/// Refuses override flags the job in force would ignore: `set` holds the
/// (flag, value) pairs the user gave (names without dashes, as in
/// ConfigOverrides()), `config` the job with every override applied. A flag
/// that only a mode reads (--chunk_rows: train.data_on_demand;
/// --adaptive_batch_min, _max, _step: train.adaptive_batch.enabled;
/// --period_rows, --model_momentum: consistency.model AVERAGE;
/// --slowdown_rank: train.slowdown > 1; --error_feedback: 16-bit pushes,
/// train.wire or a table's wire or push_wire BF16 or FP16; --learning_rate:
/// an optimizer type other than FTRL and NOOP, job-wide or a table's) without that
/// mode is an
/// InvalidArgument naming the flag, the setting it needs and the flag that
/// turns it on: "flag --chunk_rows=64 is only read with train.data_on_demand
/// true, which this job does not set: add --data_on_demand=true, or drop
/// --chunk_rows". Config fields themselves are not checked here (a config may
/// keep a mode's settings with the mode off). Pure; thread-safe.
Status CheckOverridesApply(const JobConfig& config, const std::vector<std::pair<std::string, std::string>>& set);

/// Why a job of one process (tether-launch --transport=inproc, tether-worker
/// --in_process: every shard and worker a thread over inproc://) does not
/// read override `flag` (its name, no dashes): --liveness_timeout_ms (no
/// connection to watch), --rendezvous (nothing to publish or find), the
/// CURVE key flags (no traffic leaves the process); "" for any other flag.
/// Pure; thread-safe.
std::string InProcessIgnores(const std::string& flag);

/// The most server shards, initial workers or worker ranks
/// (cluster.num_servers, num_workers, max_workers) a job may have: every
/// shard keeps a clock and a slot per worker rank from its start
/// (server/clock_tracker.h holds at most as many), and every worker a
/// connection per shard.
inline constexpr int kMaxJobRanks = 1 << 16;

/// The most rows a minibatch may have (train.minibatch_size,
/// eval_minibatch_size): 2^24, so that values derived from it (4 ×
/// minibatch_size for train.adaptive_batch.b_max and train.chunk_rows) stay
/// within their 32-bit fields.
inline constexpr int kMaxMinibatchRows = 1 << 24;

/// Bounds of the counts and sizes: cluster.num_servers, num_workers and
/// max_workers at most kMaxJobRanks, train.minibatch_size and
/// eval_minibatch_size at most kMaxMinibatchRows (lower bounds are
/// ValidateServerConfig's and ValidateJobConfig's). Part of both.
/// Errors: InvalidArgument "config field FIELD: is V, above the limit L (why)";
/// "config field cluster.send_hwm: must be ≥ 0 messages (0: no limit), got V"
/// (recv_hwm likewise) for a negative high-water mark.
Status ValidateCountBounds(const JobConfig& config);

/// Durations: cluster.request_timeout_ms, startup_timeout_ms,
/// idle_timeout_ms, heartbeat_interval_ms and worker_timeout_ms ≥ 1 ms,
/// debug_request_delay_ms ≥ 0 (liveness_timeout_ms: ValidateServerConfig).
/// Part of ValidateServerConfig. Errors: InvalidArgument "config field
/// FIELD: must be ≥ 1 ms, got V".
Status ValidateDurations(const JobConfig& config);

/// Checks ranges, finiteness and required fields of the whole job (data,
/// training, optimizers, per-table overrides), starting with
/// ValidateServerConfig's checks; the model's own fields, its tables and
/// their message sizes are checked by ValidateModelConfig
/// (worker/models/model_registry.h). Errors: InvalidArgument
/// "config field FIELD: why".
Status ValidateJobConfig(const JobConfig& config);

/// The rule of PSP@k's propensity constants A and B (Jain et al. 2016),
/// train.psp_a and train.psp_b, and tether-predict's --psp_a and --psp_b:
/// a finite number > 0. `where` names the value ("config field
/// train.psp_a", "flag --psp_a"). Error: InvalidArgument "WHERE: must be a
/// finite number > 0, got nan".
[[nodiscard]] Status CheckPspConstant(double value, const std::string& where);

/// Checks that every data file the job names (data.train_file, test_file,
/// train_split, test_split, validation_split, train_label_file,
/// test_label_file, label_xml)
/// exists and is a file, so that a missing one stops the start before any
/// process or connection (tether-launch, tether-worker). Paths from a config
/// file are absolute by now (ResolveDataPaths); a relative one (from a flag,
/// or a config built in memory) is taken against the current directory, as
/// every reader opens it.
/// Errors: NotFound "config field data.train_file: 'x.txt' does not exist
/// (tried /full/path/x.txt, relative to the current directory /full/path)".
Status CheckDataFilesExist(const JobConfig& config);

/// The checks a parameter-server shard needs: cluster.* (sizes, addresses,
/// heartbeat and timeout) and consistency.* including each table's
/// consistency override; and those its workers would refuse the job for in
/// the validation split and early stopping (train.validation_fraction,
/// data.validation_split, train.early_stopping: its patience, min_delta and
/// a metric the model does not report), with the same message. The rest of
/// data, model and training is not looked at (a registered model's metric
/// is checked by its workers, which know its kind).
/// Errors: InvalidArgument "config field FIELD: why".
Status ValidateServerConfig(const JobConfig& config);

/// The checks of a job whose shards and workers all run in one process
/// (local/local_job.h: tether-worker --in_process, tether-launch
/// --transport=inproc), on top of ValidateJobConfig's: cluster.replicas
/// must be 0 (a replica needs a process of its own). Errors:
/// InvalidArgument "config field cluster.replicas: ...".
Status ValidateInProcessJob(const JobConfig& config);

/// The config in force for the start-up log: each set section in the
/// schema's order as "  data { train_file: \"a.txt\" index_base: 0 ... }",
/// wrapped at about 100 characters (continuation lines indented 6 spaces),
/// then "  staleness in force: 2 (SSP)" (and each table with its own
/// consistency). No trailing newline.
std::string ConfigSummary(const JobConfig& config);

/// The config in force in one line, for the default log: the job's name,
/// model, optimizer, staleness in force, cluster size, epochs and
/// minibatch, and the training file's name, e.g. "bibtex: XMC_MLP hidden
/// 256 SOFTMAX, ADAM lr 0.001, staleness 2 (SSP), 2 server(s), 2 worker(s),
/// 7 epochs of minibatch 64, data Bibtex_data.txt.gz (XMC, index_base 0,
/// 1836 features, 159 labels)".
/// ConfigSummary has every field set.
std::string ConfigOneLine(const JobConfig& config);

/// Staleness bound for display: "0 (BSP)", "2 (SSP)", "inf (ASP)".
std::string StalenessName(int64_t staleness);

/// Closest name to `word` among `candidates` by edit distance, or "" when
/// none is within max(2, |word|/2) edits.
std::string ClosestName(const std::string& word, const std::vector<std::string>& candidates);

/// The job's consistency merged with table `name`'s override (fields set on
/// the table win).
ConsistencyConfig ConsistencyForTable(const JobConfig& config, const std::string& name);

/// Table `name`'s budget from its table { } section (admit_after,
/// admit_probability, max_rows, evict, ttl_clocks); empty when it sets none.
TableBudget BudgetForTable(const JobConfig& config, const std::string& name);

/// The job's identity on the wire: cluster.job_id, or the config's name.
std::string JobId(const JobConfig& config);

/// The bound on worker ranks (elastic membership, docs/OPERATIONS.md):
/// cluster.max_workers, or cluster.num_workers when it is unset or 0.
/// Ranks in [num_workers, MaxWorkers) may join a running job.
int MaxWorkers(const ClusterConfig& cluster);

/// Whether worker `rank` may take part in the job: OK for a rank in
/// [0, num_workers); for a joiner (a rank in [num_workers, MaxWorkers)) OK
/// when `has_data` (the job deals its rows on demand) and the job takes no
/// checkpoints, else FailedPrecondition saying why (the static split has no
/// share for it; checkpoints know the initial ranks only).
/// InvalidArgument for a rank outside [0, MaxWorkers), naming
/// cluster.max_workers.
Status CheckWorkerRank(const JobConfig& config, int rank, bool has_data);

/// Whether the job sets validation rows aside (the validation split):
/// train.validation_fraction > 0 or data.validation_split set (the two
/// exclude each other, ValidateJobConfig).
bool HasValidationSplit(const JobConfig& config);
/// The field that sets the validation split, for messages:
/// "data.validation_split", "train.validation_fraction", or "" for none.
std::string ValidationSplitField(const JobConfig& config);

/// train.adaptive_batch with b_min and b_max resolved (0: minibatch_size / 4,
/// at least 1; 4 × minibatch_size). The rest as configured.
AdaptiveBatchConfig ResolvedAdaptiveBatch(const TrainConfig& train);
/// Rows per chunk with train.data_on_demand: train.chunk_rows, or 4 x
/// train.minibatch_size when it is 0 (so a chunk is a few minibatches: fine
/// enough to balance, one request to shard 0 per 4 minibatches). ≥ 1 for a
/// validated config.
int64_t EffectiveChunkRows(const TrainConfig& train);

}  // namespace tether
