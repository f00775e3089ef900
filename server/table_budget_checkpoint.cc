#include "server/table_budget_checkpoint.h"

#include <limits>
#include <memory>
#include <optional>

#include "checkpoint/checkpoint.h"
#include "proto/budget_state.pb.h"

namespace tether {

std::string BudgetFileName(int shard) { return "shard-" + std::to_string(shard) + ".budget"; }

Status WriteShardBudgetState(FileSystem* fs, const std::string& ckpt_dir, int shard, int num_shards, int64_t clock,
                             const std::vector<std::unique_ptr<ServerTable>>& tables, CheckpointFile* written) {
  ShardBudgetState state;
  state.set_format_version(kBudgetStateFormatVersion);
  state.set_shard(shard);
  state.set_num_shards(num_shards);
  state.set_clock(clock);
  for (const auto& t : tables)
    if (t->budgeted()) t->SaveBudgetState(state.add_tables());
  if (state.tables_size() == 0) return Status::OK();
  // One Protobuf message holds at most 2 GiB (~10 bytes a row: 2·10^8 rows
  // of eviction metadata); past it serialising fails, so say so.
  if (state.ByteSizeLong() > static_cast<size_t>(std::numeric_limits<int32_t>::max()))
    return Status::ResourceExhausted(CheckpointJoinPath(ckpt_dir, BudgetFileName(shard)) + " would be " +
                                     std::to_string(state.ByteSizeLong()) +
                                     " bytes, past the 2 GiB a budget state file holds; use more servers");
  return WriteListedFile(fs, ckpt_dir, BudgetFileName(shard), state.SerializeAsString(), written);
}

namespace {

// Shard `old`'s budget file, checked against its manifest entry; nullopt
// when the manifest lists none.
StatusOr<std::optional<ShardBudgetState>> ReadBudgetFile(const std::string& ckpt_dir, const CheckpointManifest& m,
                                                         int old) {
  const std::string name = BudgetFileName(old);
  const CheckpointFile* entry = nullptr;
  for (const CheckpointFile& f : m.files())
    if (f.name() == name) entry = &f;
  if (entry == nullptr) return std::optional<ShardBudgetState>();
  const std::string path = CheckpointJoinPath(ckpt_dir, name);
  TETHER_ASSIGN_OR_RETURN(const std::string bytes, ReadListedFile(ckpt_dir, *entry, FileLister::kManifest));
  ShardBudgetState state;
  if (!state.ParseFromString(bytes)) return Status::DataLoss(path + ": not a shard's budget state");
  if (state.format_version() != kBudgetStateFormatVersion)
    return Status::DataLoss(path + ": format version " + std::to_string(state.format_version()) +
                            "; this build reads version " + std::to_string(kBudgetStateFormatVersion));
  if (state.clock() != m.clock() || state.shard() != old || state.num_shards() != m.num_servers())
    return Status::DataLoss(path + ": written by shard " + std::to_string(state.shard()) + " of " +
                            std::to_string(state.num_shards()) + " at clock " + std::to_string(state.clock()) +
                            ", but the checkpoint is shard " + std::to_string(old) + " of " +
                            std::to_string(m.num_servers()) + " at clock " + std::to_string(m.clock()));
  return std::optional<ShardBudgetState>(std::move(state));
}

}  // namespace

Status RestoreShardBudgetState(const std::string& ckpt_dir, const CheckpointManifest& manifest, int shard,
                               int num_shards, std::vector<std::unique_ptr<ServerTable>>* tables) {
  const bool same_sharding = num_shards == manifest.num_servers();
  for (int old = 0; old < manifest.num_servers(); ++old) {
    if (same_sharding && old != shard) continue;
    TETHER_ASSIGN_OR_RETURN(std::optional<ShardBudgetState> state, ReadBudgetFile(ckpt_dir, manifest, old));
    if (!state) continue;
    for (const TableBudgetState& t : state->tables()) {
      if (t.table_id() >= tables->size() || !(*tables)[t.table_id()]->budgeted())
        return Status::DataLoss(CheckpointJoinPath(ckpt_dir, BudgetFileName(old)) + ": table id " +
                                std::to_string(t.table_id()) + " has no budget in the job");
      ServerTable& table = *(*tables)[t.table_id()];
      const Status st = same_sharding ? table.RestoreBudgetState(t) : table.MergeSketch(t);
      if (!st.ok()) return Status::DataLoss(CheckpointJoinPath(ckpt_dir, BudgetFileName(old)) + ": " + st.message());
    }
  }
  return Status::OK();
}

}  // namespace tether
