#include "server/table_checkpoint.h"

#include <algorithm>

#include "checkpoint/checkpoint.h"
#include "checkpoint/shard_file.h"
#include "core/partition.h"
#include "core/table_spec.h"
#include "optim/optimizer.h"

namespace tether {

Status WriteShardCheckpoint(FileSystem* fs, const std::string& ckpt_dir, int shard, int num_shards, int64_t clock,
                            const std::vector<std::unique_ptr<ServerTable>>& tables, CheckpointFile* written) {
  std::vector<ShardFileTable> parts(tables.size());
  for (size_t i = 0; i < tables.size(); ++i) {
    const ServerTable& t = *tables[i];
    ShardFileTable& p = parts[i];
    p.spec = &t.spec();
    p.version = t.version();
    p.stride = t.stride();
    if (IsDenseTable(t.spec())) {
      p.dense_begin = t.dense_begin();
      p.dense_end = t.dense_end();
    } else {
      p.keys = t.KeysByRow();
    }
    p.data = t.raw_data();
    p.floats = t.raw_floats();
  }
  return WriteShardFile(fs, ckpt_dir, shard, num_shards, clock, parts, written);
}

Status RestoreShardTables(const std::string& ckpt_dir, const CheckpointManifest& manifest, int shard, int num_shards,
                          std::vector<std::unique_ptr<ServerTable>>* tables) {
  if (static_cast<int>(tables->size()) != manifest.tables_size())
    return Status::FailedPrecondition(ckpt_dir + ": the checkpoint has " + std::to_string(manifest.tables_size()) +
                                      " tables, the job " + std::to_string(tables->size()));
  const bool same_sharding = num_shards == manifest.num_servers();
  for (int old = 0; old < manifest.num_servers(); ++old) {
    // Hash partitioning: with another number of shards, any old shard may
    // hold rows of this one. With the same, only its own file.
    if (same_sharding && old != shard) continue;
    std::vector<bool> reserved(tables->size(), false);
    auto row = [&](int i, const ShardCheckpointHeader::Table& t, uint64_t key, const float* v) -> Status {
      ServerTable& table = *(*tables)[i];
      if (!reserved[i]) {
        // One allocation per table and file, not a regrowth every doubling.
        reserved[i] = true;
        table.ReserveRows(table.num_rows() + (same_sharding ? t.rows() : t.rows() / num_shards + t.rows() / 16 + 64));
      }
      if (t.stride() != table.stride())
        return Status::DataLoss(ckpt_dir + "/" + ShardFileName(old) + ": table " + t.name() + " rows have " +
                                std::to_string(t.stride()) + " floats, the job's " + std::to_string(table.stride()));
      // Versions only mean something per shard: kept when the sharding is
      // (a table without rows was never pushed: its version is 0).
      if (same_sharding) table.set_version(t.version());
      if (!same_sharding && ShardForKey(key, num_shards) != shard) return Status::OK();
      return table.RestoreRow(key, v);
    };
    auto dense = [&](int i, const ShardCheckpointHeader::Table& t, const float* v) -> Status {
      ServerTable& table = *(*tables)[i];
      if (same_sharding) table.set_version(t.version());
      const uint64_t ob = t.dense_begin(), oe = t.dense_end(), on = oe - ob;
      const uint64_t nb = table.dense_begin(), ne = table.dense_end(), nn = ne - nb;
      const uint64_t lo = std::max(ob, nb), hi = std::min(oe, ne);
      float* out = table.mutable_raw_data();
      const Optimizer opt(table.spec().optimizer());
      const uint64_t state_per_weight = static_cast<uint64_t>(opt.StatePerWeight());
      const uint64_t extra = opt.StateFloats(1) - state_per_weight;  // Adam's step count
      if (t.state_floats() != on * state_per_weight + extra || table.raw_floats() != nn + opt.StateFloats(nn))
        return Status::DataLoss(ckpt_dir + "/" + ShardFileName(old) + ": dense table " + t.name() +
                                " has another optimizer state layout than the job's");
      for (uint64_t j = lo; j < hi; ++j) {
        out[j - nb] = v[j - ob];
        for (uint64_t s = 0; s < state_per_weight; ++s) out[nn + s * nn + (j - nb)] = v[on + s * on + (j - ob)];
      }
      // Adam's step count of the slice (one float after the moments), from
      // the old slice that holds the new one's first index.
      if (extra == 1 && lo < hi && lo == nb) out[nn + state_per_weight * nn] = v[on + state_per_weight * on];
      return Status::OK();
    };
    TETHER_RETURN_IF_ERROR(ReadShardFile(ckpt_dir, manifest, old, row, dense));
  }
  // Delay compensation's backups are not in a checkpoint: each starts as
  // the restored weights (server/delay_backups.h).
  for (auto& t : *tables) t->ResetDelayBackups();
  return Status::OK();
}

}  // namespace tether
