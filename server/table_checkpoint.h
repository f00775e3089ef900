// A server shard's tables in a checkpoint: its ServerTables written to, and
// restored from, shard files (checkpoint/shard_file.h says the format;
// checkpoint/checkpoint.h the layout of a checkpoint). The protocol that
// takes the cut lives in server/checkpoint_round.cc.
//
// Thread-safety: functions are re-entrant; the tables passed belong to the
// caller (a shard's event loop) for the duration of the call.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/env.h"
#include "core/status.h"
#include "proto/checkpoint.pb.h"
#include "server/table.h"

namespace tether {

/// Writes `tables` (this shard's part of every table, in id order) to
/// ckpt_dir/shard-<shard>.tables; `*written` gets its name, size and XXH3-64 checksum.
/// Cost: one sequential pass over the tables (the rows are written as they
/// lie in memory). Errors: IOError naming the file (nothing is left under
/// the final name then).
Status WriteShardCheckpoint(FileSystem* fs, const std::string& ckpt_dir, int shard, int num_shards, int64_t clock,
                            const std::vector<std::unique_ptr<ServerTable>>& tables, CheckpointFile* written);

/// Loads the rows of shard `shard` of `num_shards` (any number: rows are
/// re-sharded by key, dense slices re-cut by range) from every shard file
/// of the checkpoint into `tables` (this shard's tables, already made from
/// the job's specs, whose shapes must equal the manifest's). Table versions
/// are restored when the number of shards is the checkpoint's. Each file's
/// checksum is checked as it is read. Delay compensation's backups are not
/// written: after a restore every backup is the restored weights
/// (ServerTable::ResetDelayBackups). Errors: DataLoss naming the file (checksum,
/// truncation, a header that disagrees with the manifest), IOError.
Status RestoreShardTables(const std::string& ckpt_dir, const CheckpointManifest& manifest, int shard, int num_shards,
                          std::vector<std::unique_ptr<ServerTable>>* tables);

}  // namespace tether
