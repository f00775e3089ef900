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

std::vector<int> ShardsOfProcess(int process, int num_shards, int replicas) {
  std::vector<int> shards;
  for (int k = 0; k <= replicas && k < num_shards; ++k)
    shards.push_back(((process - k) % num_shards + num_shards) % num_shards);
  return shards;
}

namespace {

// What one shard's copy needs: its bytes, and its tables as the message
// lists them ("w1 51 rows 4896, b1 64"), those of unbounded keys apart.
struct ShardNeed {
  uint64_t bytes = 0;
  std::string list, unbounded;
};

ShardNeed NeedOf(const std::vector<TableSpec>& tables, int shard, int num_shards, bool kept_copy) {
  ShardNeed n;
  uint64_t kept = 0;
  for (const TableSpec& t : tables) {
    const uint64_t bytes = ShardTableBytes(t, shard, num_shards);
    n.bytes += bytes;
    if (kept_copy) kept += KeptCopyBytes(t, shard, num_shards);
    if (IsRowTable(t) && ShardRowBound(t, num_shards) == 0) {
      n.unbounded += (n.unbounded.empty() ? "" : ", ") + t.name();
      continue;
    }
    n.list += (n.list.empty() ? "" : ", ") + t.name() + " " +
              (IsRowTable(t) ? std::to_string(ShardRowBound(t, num_shards)) + " rows " : std::string()) +
              std::to_string(bytes);
  }
  if (kept_copy) n.list += ", the best epoch's copy of the weights " + std::to_string(kept);
  n.bytes += kept;
  return n;
}

// "server shard 1 of 2", or with replicas "server process 1 of 3 holds 1 +
// cluster.replicas = 2 shards (its own, 1, and a copy of shard 0), which".
std::string Holder(const std::vector<int>& shards, int process, int num_shards) {
  if (shards.size() == 1) return "server shard " + std::to_string(process) + " of " + std::to_string(num_shards);
  std::string copies;
  for (size_t i = 1; i < shards.size(); ++i)
    copies += (i == 1 ? "" : i + 1 == shards.size() ? " and " : ", ") + std::to_string(shards[i]);
  return "server process " + std::to_string(process) + " of " + std::to_string(num_shards) + " holds 1 + " +
         "cluster.replicas = " + std::to_string(shards.size()) + " shards (its own, " + std::to_string(process) +
         ", and a copy of shard" + (shards.size() > 2 ? "s " : " ") + copies + "), which";
}

}  // namespace

Status CheckShardFits(const std::vector<TableSpec>& tables, int process, int num_shards, const MemoryBudget& budget,
                      bool kept_copy, int replicas) {
  const std::vector<int> shards = ShardsOfProcess(process, num_shards, replicas);
  uint64_t need = 0;
  std::string list, unbounded;
  for (const int shard : shards) {
    const ShardNeed n = NeedOf(tables, shard, num_shards, kept_copy);
    need += n.bytes;
    list += (list.empty() ? "" : "; ") + (shards.size() > 1 ? "shard " + std::to_string(shard) + ": " : "") + n.list;
    if (unbounded.empty()) unbounded = n.unbounded;  // the same tables on every shard
  }
  if (budget.bytes == 0 || need <= budget.bytes) return Status::OK();
  const bool one = shards.size() == 1;
  return Status::ResourceExhausted(
      Holder(shards, process, num_shards) + (one ? " does" : " do") + " not fit in memory: the job's tables need " +
      FormatBytes(need) + (one ? " on this shard" : " in this process") +
      " (weights, optimizer state and row index, in bytes: " + list + ")" +
      (unbounded.empty() ? "" : "; tables of unbounded keys not counted: " + unbounded) + ", but " +
      FormatBytes(budget.bytes) + " are available (" + budget.source + "); run more servers (cluster.num_servers)" +
      (one ? "" : ", fewer replicas (cluster.replicas)") +
      ", or give each more memory (docs/OPERATIONS.md, \"Memory sizing\")" +
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
