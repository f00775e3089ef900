// Data on demand in checkpoints (train.data_on_demand with checkpoint.dir):
// the chunk coordinator's state (ChunkCoordinatorState in
// proto/checkpoint.proto) as shard 0 writes it into each checkpoint
// (chunks.state, beside shard-0.tables), and how a resume reads and checks
// it. ChunkCoordinator::SaveState / RestoreState and ChunkService::SaveState
// / Resume (the conversion from the server's objects) are defined in
// server/coordinator/chunk_checkpoint.cc.
//
// What the state holds, and why it is consistent with the model rows of the
// same checkpoint: shard 0 writes it in the same turn of its event loop as
// its table file, once every worker still training has sent CHECKPOINT at
// the cut's clock c (server/checkpoint_round.cc). A worker sends
// a chunk's completion (CHUNK_NEXT, synchronous) only after every push of
// that chunk's rows, and its CHECKPOINT after that; each shard applies a
// worker's messages in order. So a chunk completed in the state has all
// its updates in every shard file; a chunk dealt and not completed (held)
// may have some: a resume deals it again first, counted as re-dealt, and its
// earlier pushes stay applied (at-least-once for updates, exactly once for
// completed chunks: the same as when a worker is killed).
//
// Thread-safety: the functions are re-entrant; the state is a value.
#pragma once

#include <optional>
#include <string>

#include "core/env.h"
#include "core/status.h"
#include "proto/checkpoint.pb.h"
#include "proto/wire.pb.h"

namespace tether {

/// File name of the coordinator state inside a checkpoint directory.
inline constexpr char kChunkStateName[] = "chunks.state";
/// ChunkCoordinatorState.format_version this build writes and reads.
inline constexpr uint32_t kChunkStateFormatVersion = 1;

/// Writes `state` to ckpt_dir/chunks.state atomically (temporary name,
/// fsync, rename); `*written` gets its name, size and XXH3-64. Errors:
/// IOError naming the file (nothing under the final name then).
Status WriteChunkState(FileSystem* fs, const std::string& ckpt_dir, const ChunkCoordinatorState& state,
                       CheckpointFile* written);

/// The state of a checkpoint (`manifest` read from ckpt_dir), checked
/// against the manifest's size and checksum; std::nullopt when the
/// checkpoint has none (a job with the static split, or a checkpoint
/// written before data on demand could checkpoint). Errors: DataLoss
/// naming the file (size, checksum, not a state, another format version,
/// or a clock other than the manifest's), NotFound when the manifest lists
/// it and it is missing.
StatusOr<std::optional<ChunkCoordinatorState>> ReadChunkState(const std::string& ckpt_dir,
                                                              const CheckpointManifest& manifest);

/// Compares the job's shape (`job`: DataOnDemandChunk's train_rows,
/// chunk_rows, taper, seed as a worker sends them) with a checkpoint's state:
/// "" when a resume may continue it, else a message naming the field
/// (train_rows, chunk_rows, chunk_taper, seed) with both values. epochs
/// may differ. A streamed job (job.file_bytes set) never continues a
/// checkpoint: its chunks are byte ranges, the state's are rows in memory
/// (the message names data.streaming).
std::string DiffChunkShape(const ChunkCoordinatorState& checkpoint, const DataOnDemandChunk& job);

}  // namespace tether
