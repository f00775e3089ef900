#include "server/table_budget_checkpoint.h"

#include <xxhash.h>

#include <fstream>
#include <sstream>

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
  const std::string name = BudgetFileName(shard);
  const std::string bytes = state.SerializeAsString();
  TETHER_RETURN_IF_ERROR(fs->CreateDirs(ckpt_dir));
  TETHER_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> f, fs->NewAtomicFile(CheckpointJoinPath(ckpt_dir, name)));
  TETHER_RETURN_IF_ERROR(f->Append(bytes));
  TETHER_RETURN_IF_ERROR(f->Commit());
  written->set_name(name);
  written->set_bytes(bytes.size());
  written->set_xxh3(XXH3_64bits(bytes.data(), bytes.size()));
  return Status::OK();
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
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound(path + ": missing, but the checkpoint's MANIFEST lists it");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string bytes = ss.str();
  if (bytes.size() != entry->bytes())
    return Status::DataLoss(path + ": " + std::to_string(bytes.size()) + " bytes on disk, but the manifest says " +
                            std::to_string(entry->bytes()) + " (a truncated or replaced file)");
  const uint64_t sum = XXH3_64bits(bytes.data(), bytes.size());
  if (sum != entry->xxh3())
    return Status::DataLoss(path + ": checksum mismatch: XXH3-64 " + ChecksumHex(sum) + ", the manifest says " +
                            ChecksumHex(entry->xxh3()) + " (the file is corrupt)");
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
