// Table specs: the contract between a model (worker side) and a server
// shard, which knows no model. A worker declares its tables as TableSpec
// messages (proto/tables.proto) at HELLO; a shard adopts those of the job's
// authority (worker 0) and compares every other worker's field by field.
// The same checks run on the worker before it connects, so a bad table is
// refused there first, and a bad HELLO gets an error reply naming the field.
//
// Everything here is a pure function of its inputs; thread-compatible.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <google/protobuf/repeated_field.h>

#include "core/status.h"
#include "proto/tables.pb.h"

namespace tether {

/// Effective staleness bound of a consistency setting: BSP and AVERAGE → 0
/// (AVERAGE: a round's pulls wait for the previous round's merge), ASP → −1,
/// SSP → its `staleness` field.
int64_t EffectiveStaleness(const ConsistencyConfig& c);

/// The bound a table's pulls are answered under (its own consistency,
/// already merged with the job's by the worker).
inline int64_t TableStaleness(const TableSpec& t) { return EffectiveStaleness(t.consistency()); }
inline bool IsRowTable(const TableSpec& t) { return t.kind() == TableSpec::ROW; }
inline bool IsDenseTable(const TableSpec& t) { return t.kind() == TableSpec::DENSE; }

/// Deterministic initial value of weight `j` of row `key` in table
/// `table_id` (a TableInitializer of kind UNIFORM, `bound` its bound): a
/// counter-based hash of (seed, table, key, j), so the model is identical
/// for any number of shards and any order of first touch. The servers
/// create rows with it; a predictor fills rows never trained with it.
float InitialWeight(uint64_t seed, uint32_t table_id, uint64_t key, uint32_t j, float bound);

/// Case C22: checks every field of an optimizer setting, each finite and in
/// its range, whatever the type (a field the type does not read today must
/// still be a value it could read): learning_rate > 0, momentum in [0, 1),
/// initial_accumulator ≥ 0, epsilon > 0, l2 ≥ 0, beta1 and beta2 in [0, 1);
/// weight_decay ≥ 0 with learning_rate × weight_decay < 1, and > 0 only for
/// ADAM; delay_compensation finite and ≥ 0; the schedule (ScheduleProblem,
/// core/schedule_config.h) as "schedule.FIELD".
/// epsilon > 0 is what keeps AdaGrad's step defined when
/// initial_accumulator is 0 and a coordinate's gradient is 0 (0/0), and
/// Adam's when a moment is 0. Returns "" when all is well, else the field's
/// name ("epsilon") with *why set to the range ("must be a finite number > 0").
std::string OptimizerProblem(const OptimizerConfig& o, std::string* why);

/// Floats a shard keeps for delay compensation (OptimizerConfig
/// .delay_compensation) beside a span of n weights (a row: n = dim; a dense
/// slice: its floats): one backup per worker rank, backup_workers × n; 0
/// when the table has none.
inline uint64_t DelayBackupFloats(const TableSpec& t, uint64_t n) {
  return t.optimizer().delay_compensation() > 0 ? uint64_t{t.backup_workers()} * n : 0;
}

/// The most worker ranks a table's delay-compensation backups may cover
/// (the config's bound on cluster.max_workers).
inline constexpr uint32_t kMaxBackupWorkers = 1u << 16;

/// True for a row table whose budget admits keys or evicts rows
/// (TableSpec.budget): its rows are created on admission only and move when
/// one is evicted, so its requests never use key lists.
inline bool AdmitsOrEvicts(const TableSpec& t) {
  const TableBudget& b = t.budget();
  return IsRowTable(t) && (b.admit_after() > 0 || b.admit_probability() < 1.0f || b.evict() != EVICT_NONE);
}

/// Checks a table's budget: admit_after ≤ 65535 (the sketch's counters);
/// admit_probability finite in (0, 1]; not both admit_after and
/// admit_probability < 1; LRU and LFU need max_rows ≥ 1; TTL needs
/// ttl_clocks ≥ 1, and ttl_clocks is read only by TTL; only row tables have
/// a budget. Returns "" when all is well, else the field's name
/// ("admit_after") with *why set.
std::string TableBudgetProblem(const TableBudget& b, bool row_table, std::string* why);

/// Checks one job's tables for a job of `num_servers` shards: ids are
/// 0, 1, ... in order; names non-empty and unique; a row table's dim ≥ 1; a
/// dense table's size in [1, 2³²) (dense tables are addressed by uint32
/// element index); a finite initializer bound ≥ 0; every optimizer field
/// (OptimizerProblem); a bound ≥ −1; the budget (TableBudgetProblem);
/// backup_workers in [1, kMaxBackupWorkers] with delay_compensation > 0,
/// else 0; and the message sizes
/// (CheckMessageSizes). Errors: InvalidArgument "table 'w1': field dim: ...",
/// naming the table, the field and the value.
Status ValidateTableSpecs(const std::vector<TableSpec>& tables, int num_servers);

/// Case C15: refuses tables that cannot travel within the transport's
/// message limit (kMaxFrameBytes, core/wire_limits.h): a dense table whose
/// largest shard slice is larger (the message names the table, its size, the
/// limit and the number of servers that would do), or a row table whose
/// single row is. Row pulls and pushes of many rows are split by the client
/// and need no check. Errors: InvalidArgument "config: ..." listing every
/// such table.
Status CheckMessageSizes(const std::vector<TableSpec>& tables, int num_servers);

/// The first difference between two declarations of the same job's tables,
/// as "table 'w1', field dim: <mine_name> has 3, <theirs_name> has 2"
/// (nested fields as "optimizer.learning_rate"; a different table count
/// names both lists), or "" when they are equal field by field.
std::string DiffTableSpecs(const google::protobuf::RepeatedPtrField<TableSpec>& mine, const std::string& mine_name,
                           const google::protobuf::RepeatedPtrField<TableSpec>& theirs,
                           const std::string& theirs_name);

/// "w1 (row, dim 256), b1 (dense, 256 floats), ..." for logs.
std::string DescribeTables(const google::protobuf::RepeatedPtrField<TableSpec>& tables);

}  // namespace tether
