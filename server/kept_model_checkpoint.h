// The kept model in a checkpoint: shard-<s>.kept, the copy of the best
// epoch's weights this shard holds (server/kept_model.h,
// train.keep_best_model), written beside shard-<s>.tables in the same turn
// of the shard's loop and listed in the MANIFEST with its size and XXH3-64
// like every file (checkpoint/checkpoint.h WriteListedFile: a temporary
// name, fsync, rename). A shard that holds no copy (no validation split,
// keep_best_model false, no epoch evaluated yet) writes none. A resume puts
// the copy back into KeptModel, so a job resumed after its best epoch keeps
// that epoch's weights as the uninterrupted run does
// (proto/checkpoint.proto KeptModelState).
//
// Resharding: the copy is of rows by row number (KeptModel copies no keys
// of its own), so it is restored only on as many servers as wrote it; a
// resume on another number of servers from a checkpoint that holds one is
// refused, naming the number to resume on. A final checkpoint's copy is
// not restored (its tables hold the kept weights already and nothing is
// left to train), so it resumes on any number of servers.
//
// Thread-safety: re-entrant; the tables and the KeptModel belong to the
// caller (the shard's loop) for the call.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/env.h"
#include "core/status.h"
#include "proto/checkpoint.pb.h"
#include "server/kept_model.h"
#include "server/table.h"

namespace tether {

/// Format of shard-<s>.kept (KeptModelState.format_version).
inline constexpr uint32_t kKeptModelFormatVersion = 1;

/// "shard-3.kept".
std::string KeptModelFileName(int shard);

/// Writes `kept`'s copy of `tables` to ckpt_dir/shard-<shard>.kept when it
/// holds one (kept.epoch() > 0); *written gets its name, size and checksum
/// (left empty when no file is written). Errors: IOError naming the file;
/// ResourceExhausted past the 2 GiB one file holds.
Status WriteKeptModelFile(FileSystem* fs, const std::string& ckpt_dir, int shard, int num_shards, int64_t clock,
                          const KeptModel& kept, const KeptModel::Tables& tables, CheckpointFile* written);

/// Restores into `kept` the copy shard `shard` wrote, from the file the
/// manifest lists; `tables` are already restored (RestoreShardTables). A
/// checkpoint without kept files restores nothing. Errors: DataLoss naming
/// the file (size, checksum, format, a clock, shard, table or row that
/// disagrees), NotFound; FailedPrecondition when the checkpoint holds kept
/// files and `num_shards` differs from the servers that wrote it.
Status RestoreKeptModel(const std::string& ckpt_dir, const CheckpointManifest& manifest, int shard, int num_shards,
                        const KeptModel::Tables& tables, KeptModel* kept);

}  // namespace tether
