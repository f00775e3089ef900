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
    return (e - b + optimizer.StateFloats(e - b)) * sizeof(float);
  }
  const uint64_t rows = ShardRowBound(t, num_shards);
  uint64_t per_row = (t.dim() + optimizer.StateFloats(t.dim())) * sizeof(float) + kServerIndexBytesPerRow;
  if (AdmitsOrEvicts(t)) per_row += sizeof(uint64_t);  // the row's key, by row number
  if (t.budget().evict() != EVICT_NONE) per_row += RowEviction::kBytesPerRow;
  return rows * per_row + RowAdmission::SketchBytes(t.budget());
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

}  // namespace tether
