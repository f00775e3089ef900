// A shard's table budgets in a checkpoint: shard-<s>.budget, written beside
// shard-<s>.tables in the same turn of the shard's loop (so both hold the
// state at the cut) and listed in the MANIFEST with its size and XXH3-64.
// It holds, for each row table that admits or evicts (TableSpec.budget),
// the admission sketch, each row's eviction metadata and the counters
// (proto/budget_state.proto). A shard without such tables writes none.
//
// Resume on the same number of shards: each table gets its state back over
// its rows, restored in the shard file's order, so the job continues bit
// for bit. On another number: the old shards' sketches are summed into
// every new shard's (an over-count, which admits a key earlier, never
// later: conservative), and eviction metadata and counters start afresh.
//
// Thread-safety: re-entrant; the tables belong to the caller (the shard's
// loop) for the call.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/env.h"
#include "core/status.h"
#include "proto/checkpoint.pb.h"
#include "server/table.h"

namespace tether {

/// Format of shard-<s>.budget (ShardBudgetState.format_version).
inline constexpr uint32_t kBudgetStateFormatVersion = 1;

/// "shard-3.budget".
std::string BudgetFileName(int shard);

/// Writes the budgets of `tables` to ckpt_dir/shard-<shard>.budget when any
/// table admits or evicts; *written gets its name, size and checksum (left
/// empty when no file is written). Errors: IOError naming the file;
/// ResourceExhausted when the state passes the 2 GiB one file holds (about
/// 2·10^8 rows of eviction metadata on the shard).
Status WriteShardBudgetState(FileSystem* fs, const std::string& ckpt_dir, int shard, int num_shards, int64_t clock,
                             const std::vector<std::unique_ptr<ServerTable>>& tables, CheckpointFile* written);

/// Restores the budgets of `tables` (already restored by RestoreShardTables)
/// from the budget files the manifest lists (see the file comment). A
/// checkpoint without them (written before budgets, or without budgeted
/// tables) restores nothing. Errors: DataLoss naming the file (size,
/// checksum, format, a clock or table that disagrees), NotFound.
Status RestoreShardBudgetState(const std::string& ckpt_dir, const CheckpointManifest& manifest, int shard,
                               int num_shards, std::vector<std::unique_ptr<ServerTable>>* tables);

}  // namespace tether
