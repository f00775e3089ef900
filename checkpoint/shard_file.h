// Shard files: one server shard's part of every table in a checkpoint,
// DIR/ckpt-.../shard-<s>.tables. The format, and how a file is written from
// tables in memory and read back row by row, without knowing how a server
// holds its tables (server/table_checkpoint.h writes and restores a shard's
// ServerTables through this; LoadTrainedModel, checkpoint/trained_model.h,
// reads the weights for export).
//
// Format (little-endian), kCheckpointFormatVersion:
//   8 bytes   "TTHRCKPT"
//   4 bytes   n, the length of the header
//   n bytes   ShardCheckpointHeader (binary protobuf): shard, num_shards,
//             clock, and per table (in id order) its id, name, version,
//             optimizer type, stride and, for a ROW table, its number of
//             rows, for a DENSE table, its slice [dense_begin, dense_end)
//             and the floats of optimizer state after the weights;
//   then per table, in the header's order:
//     ROW:    rows × uint64 keys, then rows × stride floats (each row its
//             weights, then its optimizer state), in the same order;
//     DENSE:  (dense_end − dense_begin) weights, then state_floats floats.
// The file is checked as a whole against its manifest entry (size and
// XXH3-64), so a reader refuses a truncated or corrupt file naming it.
//
// Thread-safety: the functions are re-entrant; a ShardFileTable only points
// at memory the caller keeps unchanged until WriteShardFile returns.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/env.h"
#include "core/status.h"
#include "proto/checkpoint.pb.h"
#include "proto/tables.pb.h"

namespace tether {

/// One table's part of a shard, as its owner holds it in memory.
struct ShardFileTable {
  const TableSpec* spec = nullptr;  // id, name, kind, optimizer type; not owned
  uint64_t version = 0;             // updates applied on this shard
  uint32_t stride = 0;              // ROW: floats per row (weights, then state); DENSE: recorded as given
  // DENSE: the slice of the table this shard holds, [dense_begin, dense_end).
  uint64_t dense_begin = 0;
  uint64_t dense_end = 0;
  // ROW: the key of each row, in the order the rows lie in `data`.
  std::vector<uint64_t> keys;
  // ROW: keys.size() × stride floats; DENSE: the slice's weights, then its
  // optimizer state. Not owned.
  const float* data = nullptr;
  uint64_t floats = 0;
};

/// Writes `tables` (this shard's part of every table, in id order) to
/// ckpt_dir/shard-<shard>.tables atomically; `*written` gets its name, size
/// and XXH3-64 checksum. Cost: one sequential pass over the tables (the rows
/// are written as they lie in memory). Errors: IOError naming the file
/// (nothing is left under the final name then).
Status WriteShardFile(FileSystem* fs, const std::string& ckpt_dir, int shard, int num_shards, int64_t clock,
                      const std::vector<ShardFileTable>& tables, CheckpointFile* written);

/// Called for each row of a ROW table: the table's index in the manifest,
/// its header entry, the row's key and its `header.stride()` floats (valid
/// for the call only). A non-OK status stops the read and is returned.
using ShardRowFn =
    std::function<Status(int table, const ShardCheckpointHeader::Table& header, uint64_t key, const float* row)>;
/// Called once for each DENSE table: its index, its header entry, and its
/// (dense_end − dense_begin) weights followed by state_floats floats of
/// state (valid for the call only).
using ShardDenseFn =
    std::function<Status(int table, const ShardCheckpointHeader::Table& header, const float* values)>;

/// Reads shard file `shard` of the checkpoint in ckpt_dir (`manifest` read
/// from it), calling `row` for each row and `dense` for each dense slice,
/// in the file's order, and checks the whole file against its manifest
/// entry. Errors: DataLoss naming the file (not listed, truncated, bad
/// magic number or header, a header that disagrees with the manifest,
/// checksum), NotFound, IOError; or what a callback returned.
Status ReadShardFile(const std::string& ckpt_dir, const CheckpointManifest& manifest, int shard,
                     const ShardRowFn& row, const ShardDenseFn& dense);

}  // namespace tether
