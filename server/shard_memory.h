// What one server shard holds for the job's tables at full size, and the
// start-up check that it fits in the memory the shard may count on
// (MemoryBudget, core/memory_fit.h), with the copies of other shards a
// server process holds under cluster.replicas. A server learns the tables from worker
// 0's HELLO; a shard that cannot hold them refuses that HELLO with the
// sizes and ends its Run() with the same error, so the job fails at
// start-up instead of when the shard runs out of memory mid-training.
//
// Pure functions; thread-compatible.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/memory_fit.h"
#include "core/status.h"
#include "optim/shard_budget.h"  // kServerIndexBytesPerRow, ShardRowBytes
#include "proto/tables.pb.h"

namespace tether {

/// Bytes shard `shard` of `num_shards` holds for `table` once every key has
/// been touched: ROW ⌈num_keys / num_shards⌉ rows (hash partitioning spreads
/// keys evenly) × ((dim + the optimizer's state floats) × 4 +
/// kServerIndexBytesPerRow), 0 when num_keys is 0 (unbounded: rows appear
/// as they are pushed); DENSE the shard's slice (DenseRange) × (1 + state
/// per weight) × 4 (+ Adam's step count). With delay compensation each row
/// and slice also counts its backup_workers backups (DelayBackupFloats). Steady state: a table that grows
/// briefly holds its old and new arrays together, which is not counted.
/// A budgeted row table (TableSpec.budget) counts ShardRowBound rows, each
/// also with its key (8 bytes) and eviction metadata
/// (RowEviction::kBytesPerRow) when it admits or evicts, plus the admission
/// sketch (RowAdmission::SketchBytes).
uint64_t ShardTableBytes(const TableSpec& table, int shard, int num_shards);

/// The most rows a shard holds of row table `table`: ⌈num_keys /
/// num_shards⌉, capped by budget.max_rows; max_rows alone when num_keys is
/// 0; 0 when both are (unbounded).
uint64_t ShardRowBound(const TableSpec& table, int num_shards);

/// Bytes of the best epoch's copy of `table` on shard `shard` of
/// `num_shards` (train.keep_best_model, server/kept_model.h): its weights
/// alone, ROW ⌈num_keys / num_shards⌉ × dim × 4, DENSE the slice × 4; 0 for
/// a row table of unbounded keys.
uint64_t KeptCopyBytes(const TableSpec& table, int shard, int num_shards);

/// The shards server process `process` of `num_shards` holds with
/// cluster.replicas = `replicas`: its own shard `process` first, then a copy
/// of each of the `replicas` shards before it, process − 1, ..., process −
/// replicas (mod num_shards), whose chains it is in (InitialChain,
/// replication/chain_view.h). 1 + replicas entries (at most num_shards).
std::vector<int> ShardsOfProcess(int process, int num_shards, int replicas);

/// Whether server process `process` of `num_shards` holds `tables` for
/// every shard it keeps (ShardsOfProcess: 1 + `replicas` shards) within
/// `budget` (bytes 0: no check): Σ over those shards of Σ ShardTableBytes,
/// plus Σ KeptCopyBytes when `kept_copy`. Errors: ResourceExhausted "server
/// shard 1 of 2 does not fit in memory: the job's tables need ... on this
/// shard (w1 ... rows ... , w2 ...), but ... are available (MemAvailable in
/// /proc/meminfo); ...", naming every table with its rows and bytes; with
/// replicas "server process 1 of 3 holds 1 + cluster.replicas = 2 shards
/// (its own, 1, and a copy of shard 0), which do not fit in memory: ... in
/// this process (...: shard 1: w1 ...; shard 0: w1 ...) ...", also
/// suggesting fewer replicas.
Status CheckShardFits(const std::vector<TableSpec>& tables, int process, int num_shards, const MemoryBudget& budget,
                      bool kept_copy = false, int replicas = 0);

/// Whether worker 0's `tables` keep shard `shard` of `num_shards` within its
/// own budget `budget_bytes` (cluster.server_memory_bytes; 0: no check):
/// every row table bounded (ShardRowBound > 0) and Σ ShardTableBytes ≤ the
/// budget. Errors: ResourceExhausted naming the unbounded table, or the
/// bytes needed and the budget, and that workers and servers need the same
/// --server_memory.
Status CheckShardWithinBudget(const std::vector<TableSpec>& tables, int shard, int num_shards, uint64_t budget_bytes);

}  // namespace tether
