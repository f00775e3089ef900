#include "server/shard_memory.h"

#include <algorithm>

#include "core/partition.h"
#include "core/table_spec.h"
#include "optim/optimizer.h"
#include "server/row_admission.h"
#include "server/row_eviction.h"

namespace tether {

uint64_t ShardTableBytes(const TableSpec& t, int shard, int num_shards) {
  const Optimizer optimizer(t.optimizer());
  if (IsDenseTable(t)) {
    const auto [b, e] = DenseRange(t.size(), shard, num_shards);
    return (e - b + optimizer.StateFloats(e - b) + DelayBackupFloats(t, e - b)) * sizeof(float);
  }
  const uint64_t rows = ShardRowBound(t, num_shards);
  return rows * ShardRowBytes(t) + RowAdmission::SketchBytes(t.budget());
}

uint64_t ShardRowBound(const TableSpec& t, int num_shards) {
  const uint64_t n = static_cast<uint64_t>(num_shards);
  const uint64_t keys = (t.num_keys() + n - 1) / n, cap = t.budget().max_rows();
  if (cap == 0) return keys;
  return keys == 0 ? cap : std::min(keys, cap);
}

uint64_t KeptCopyBytes(const TableSpec& t, int shard, int num_shards) {
  if (IsDenseTable(t)) {
    const auto [b, e] = DenseRange(t.size(), shard, num_shards);
    return (e - b) * sizeof(float);
  }
  return ShardRowBound(t, num_shards) * t.dim() * sizeof(float);
}

Status CheckShardFits(const std::vector<TableSpec>& tables, int shard, int num_shards, const MemoryBudget& budget,
                      bool kept_copy) {
  uint64_t need = 0, kept = 0;
  std::string list, unbounded;
  for (const TableSpec& t : tables) {
    const uint64_t bytes = ShardTableBytes(t, shard, num_shards);
    need += bytes;
    if (kept_copy) kept += KeptCopyBytes(t, shard, num_shards);
    if (IsRowTable(t) && ShardRowBound(t, num_shards) == 0) {
      unbounded += (unbounded.empty() ? "" : ", ") + t.name();
      continue;
    }
    list += (list.empty() ? "" : ", ") + t.name() + " " +
            (IsRowTable(t) ? std::to_string(ShardRowBound(t, num_shards)) + " rows " : std::string()) +
            std::to_string(bytes);
  }
  if (kept_copy) list += ", the best epoch's copy of the weights " + std::to_string(kept);
  need += kept;
  if (budget.bytes == 0 || need <= budget.bytes) return Status::OK();
  return Status::ResourceExhausted(
      "server shard " + std::to_string(shard) + " of " + std::to_string(num_shards) +
      " does not fit in memory: the job's tables need " + FormatBytes(need) +
      " on this shard (weights, optimizer state and row index, in bytes: " + list + ")" +
      (unbounded.empty() ? "" : "; tables of unbounded keys not counted: " + unbounded) + ", but " +
      FormatBytes(budget.bytes) + " are available (" + budget.source +
      "); run more servers (cluster.num_servers), or give each more memory (docs/OPERATIONS.md, \"Memory "
      "sizing\")" +
      (kept_copy ? std::string(", or drop the copy (train.keep_best_model: false)") : std::string()));
}

Status CheckShardWithinBudget(const std::vector<TableSpec>& tables, int shard, int num_shards, uint64_t budget_bytes) {
  if (budget_bytes == 0) return Status::OK();
  const std::string same = "; give the workers and the servers the same cluster.server_memory_bytes (--server_memory)";
  uint64_t need = 0;
  for (const TableSpec& t : tables) {
    if (IsRowTable(t) && ShardRowBound(t, num_shards) == 0)
      return Status::ResourceExhausted("row table " + t.name() + " has no row limit, but this shard's budget is " +
                                       std::to_string(budget_bytes) + " bytes" + same);
    need += ShardTableBytes(t, shard, num_shards);
  }
  if (need <= budget_bytes) return Status::OK();
  return Status::ResourceExhausted("the tables need " + std::to_string(need) + " bytes on shard " +
                                   std::to_string(shard) + ", but its budget is " + std::to_string(budget_bytes) +
                                   " bytes" + same);
}

}  // namespace tether
