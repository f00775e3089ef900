#include "server/kept_model_checkpoint.h"

#include <limits>

#include "checkpoint/checkpoint.h"

namespace tether {

std::string KeptModelFileName(int shard) { return "shard-" + std::to_string(shard) + ".kept"; }

Status WriteKeptModelFile(FileSystem* fs, const std::string& ckpt_dir, int shard, int num_shards, int64_t clock,
                          const KeptModel& kept, const KeptModel::Tables& tables, CheckpointFile* written) {
  if (kept.epoch() == 0) return Status::OK();
  KeptModelState state;
  state.set_format_version(kKeptModelFormatVersion);
  state.set_shard(shard);
  state.set_num_shards(num_shards);
  state.set_clock(clock);
  kept.Save(tables, &state);
  // One Protobuf message holds at most 2 GiB; past it serialising fails.
  if (state.ByteSizeLong() > static_cast<size_t>(std::numeric_limits<int32_t>::max()))
    return Status::ResourceExhausted(CheckpointJoinPath(ckpt_dir, KeptModelFileName(shard)) + " would be " +
                                     std::to_string(state.ByteSizeLong()) +
                                     " bytes, past the 2 GiB a kept model file holds; use more servers");
  return WriteListedFile(fs, ckpt_dir, KeptModelFileName(shard), state.SerializeAsString(), written);
}

namespace {

// The manifest's entry for shard `s`'s kept file; null when it lists none.
const CheckpointFile* KeptEntry(const CheckpointManifest& m, int s) {
  const std::string name = KeptModelFileName(s);
  for (const CheckpointFile& f : m.files())
    if (f.name() == name) return &f;
  return nullptr;
}

}  // namespace

Status RestoreKeptModel(const std::string& ckpt_dir, const CheckpointManifest& manifest, int shard, int num_shards,
                        const KeptModel::Tables& tables, KeptModel* kept) {
  // A final checkpoint's tables already hold the kept epoch's weights (put
  // back before it) and nothing is left to train: its copy is not needed,
  // so it evaluates and exports on any number of servers.
  if (manifest.final()) return Status::OK();
  const CheckpointFile* first = nullptr;
  for (int s = 0; s < manifest.num_servers() && first == nullptr; ++s) first = KeptEntry(manifest, s);
  if (first == nullptr) return Status::OK();
  if (num_shards != manifest.num_servers())
    return Status::FailedPrecondition(
        CheckpointJoinPath(ckpt_dir, first->name()) + ": the checkpoint holds the best epoch's model as kept by " +
        std::to_string(manifest.num_servers()) + " server(s), by row; it is restored only on as many servers, not " +
        std::to_string(num_shards) + ": resume with cluster.num_servers (--num_servers) " +
        std::to_string(manifest.num_servers()));
  const CheckpointFile* entry = KeptEntry(manifest, shard);
  if (entry == nullptr)
    return Status::DataLoss(ckpt_dir + "/MANIFEST: lists kept model files but none for shard " +
                            std::to_string(shard));
  const std::string path = CheckpointJoinPath(ckpt_dir, entry->name());
  TETHER_ASSIGN_OR_RETURN(const std::string bytes, ReadListedFile(ckpt_dir, *entry, FileLister::kManifest));
  KeptModelState state;
  if (!state.ParseFromString(bytes)) return Status::DataLoss(path + ": not a shard's kept model");
  if (state.format_version() != kKeptModelFormatVersion)
    return Status::DataLoss(path + ": format version " + std::to_string(state.format_version()) +
                            "; this build reads version " + std::to_string(kKeptModelFormatVersion));
  if (state.clock() != manifest.clock() || state.shard() != shard || state.num_shards() != manifest.num_servers())
    return Status::DataLoss(path + ": written by shard " + std::to_string(state.shard()) + " of " +
                            std::to_string(state.num_shards()) + " at clock " + std::to_string(state.clock()) +
                            ", but the checkpoint is shard " + std::to_string(shard) + " of " +
                            std::to_string(manifest.num_servers()) + " at clock " +
                            std::to_string(manifest.clock()));
  const Status st = kept->Load(state, tables);
  return st.ok() ? st : Status::DataLoss(path + ": " + st.message());
}

}  // namespace tether
