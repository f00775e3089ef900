#include "checkpoint/chunk_state.h"

#include <utility>

#include "checkpoint/checkpoint.h"

namespace tether {
namespace {

std::string Both(const std::string& field, const std::string& checkpoint, const std::string& job,
                 const std::string& why) {
  return field + ": the checkpoint has " + checkpoint + ", the job has " + job + " (" + why + ")";
}

}  // namespace

Status WriteChunkState(FileSystem* fs, const std::string& ckpt_dir, const ChunkCoordinatorState& state,
                       CheckpointFile* written) {
  return WriteListedFile(fs, ckpt_dir, kChunkStateName, state.SerializeAsString(), written);
}

StatusOr<std::optional<ChunkCoordinatorState>> ReadChunkState(const std::string& ckpt_dir,
                                                              const CheckpointManifest& manifest) {
  const CheckpointFile* entry = nullptr;
  for (const CheckpointFile& f : manifest.files())
    if (f.name() == kChunkStateName) entry = &f;
  if (entry == nullptr) return std::optional<ChunkCoordinatorState>();
  const std::string path = CheckpointJoinPath(ckpt_dir, kChunkStateName);
  TETHER_ASSIGN_OR_RETURN(const std::string bytes, ReadListedFile(ckpt_dir, *entry, FileLister::kManifest));
  ChunkCoordinatorState state;
  if (!state.ParseFromString(bytes)) return Status::DataLoss(path + ": not a data-on-demand state");
  if (state.format_version() != kChunkStateFormatVersion)
    return Status::DataLoss(path + ": format version " + std::to_string(state.format_version()) +
                            "; this build reads version " + std::to_string(kChunkStateFormatVersion));
  if (state.clock() != manifest.clock())
    return Status::DataLoss(path + ": written at clock " + std::to_string(state.clock()) +
                            ", but the checkpoint is at clock " + std::to_string(manifest.clock()));
  return std::optional<ChunkCoordinatorState>(std::move(state));
}

std::string DiffChunkShape(const ChunkCoordinatorState& checkpoint, const DataOnDemandChunk& job) {
  if (job.file_bytes_size() > 0)
    return Both("data.streaming", "false", "true",
                "a checkpoint's dealing state numbers rows of a training set in memory; streamed data on demand "
                "has no checkpoints");
  if (checkpoint.train_rows() != job.train_rows())
    return Both("train_rows (rows of the training set)", std::to_string(checkpoint.train_rows()),
                std::to_string(job.train_rows()),
                "the training data changed: the chunks completed before the checkpoint would not be the same rows");
  if (checkpoint.chunk_rows() != job.chunk_rows())
    return Both("train.chunk_rows", std::to_string(checkpoint.chunk_rows()), std::to_string(job.chunk_rows()),
                "the completed chunks are rows [begin, end) of that size: resume with the checkpoint's chunk_rows");
  if (checkpoint.taper() != job.taper())
    return Both("train.chunk_taper", checkpoint.taper() ? "true" : "false", job.taper() ? "true" : "false",
                "the completed chunks are indices into the epoch's chunk list, which the taper changes: resume "
                "with the checkpoint's chunk_taper");
  if (checkpoint.seed() != job.seed())
    return Both("train.seed", std::to_string(checkpoint.seed()), std::to_string(job.seed()),
                "each epoch's dealing order is drawn from the seed: resume with the checkpoint's seed");
  return "";
}

}  // namespace tether
