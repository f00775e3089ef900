// Row tables that every training minibatch reads whole (XMC_MLP's output
// layer w2 under the full softmax: all its labels' rows), against their row
// budgets (budget.max_rows, set by the table's section or by
// cluster.server_memory_bytes): a shard that may hold fewer of such a
// table's rows than it owns would evict, every minibatch, rows that the
// minibatch pushes to after reading them, so the job is refused at start.
//
// Ownership: borrows its arguments. Thread-safety: pure.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "proto/config.pb.h"
#include "proto/tables.pb.h"

namespace tether {

/// For each table of `tables` named in `whole` with a budget.max_rows below
/// the most of its keys one shard owns (MostKeysOnAShard,
/// optim/shard_budget.h): InvalidArgument
/// "config field table[w2].max_rows: ..." (or "config field
/// cluster.server_memory_bytes: ..." when the budget set it), naming the
/// table, the limit and the rows a shard needs. `model`: the model's name
/// for the message ("XMC_MLP").
Status CheckWholeTableBudgets(const JobConfig& config, const std::vector<TableSpec>& tables,
                              const std::vector<std::string>& whole, const std::string& model);

}  // namespace tether
