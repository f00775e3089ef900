#include "checkpoint/latest_checkpoint.h"

#include <filesystem>
#include <system_error>
#include <utility>

#include <glog/logging.h>

#include "checkpoint/checkpoint.h"
#include "checkpoint/dir_lock.h"

namespace tether {
namespace {

StatusOr<LoadedCheckpoint> ReadOne(const std::string& dir) {
  LoadedCheckpoint out;
  out.dir = dir;
  TETHER_ASSIGN_OR_RETURN(out.manifest, ReadManifest(dir));
  TETHER_ASSIGN_OR_RETURN(out.model, LoadTrainedModel(dir));
  return out;
}

// Whether `dir`, chosen as `folder`'s latest complete checkpoint, is no
// longer that: pruned whole or in part (its MANIFEST gone), or passed by a
// newer one. A read that failed then is worth another choice.
bool ChoiceIsStale(const std::string& folder, const std::string& dir) {
  std::error_code ec;
  if (!std::filesystem::exists(CheckpointJoinPath(dir, kManifestName), ec)) return true;
  const StatusOr<std::string> now = ResolveCheckpoint(folder);
  return now.ok() && *now != dir;
}

Status PrunedEveryTime(const std::string& folder, int tries, const Status& last) {
  const std::string writer = CheckpointDirLock::LiveWriter(folder);
  const std::string who = writer.empty()
                              ? "another process deletes its checkpoints (a job's checkpoint.keep_last prunes them)"
                              : "it is in use by a live job (" + writer +
                                    ") that prunes its older checkpoints as it writes new ones "
                                    "(checkpoint.keep_last)";
  return Status::Unavailable("checkpoint folder " + folder + ": the latest checkpoint was pruned while it was read, " +
                             std::to_string(tries) + " times in a row (last: " + last.message() + "); " + who +
                             ": export once the job has ended, from a copy of one of its checkpoints (cp -r), or "
                             "give the job a larger checkpoint.keep_last");
}

}  // namespace

StatusOr<LoadedCheckpoint> LoadLatestCheckpoint(const std::string& path, const CheckpointChosenFn& chosen, int tries) {
  Status last = Status::OK();
  for (int attempt = 1; attempt <= tries; ++attempt) {
    TETHER_ASSIGN_OR_RETURN(const std::string dir, ResolveCheckpoint(path));
    if (chosen) chosen(dir);
    StatusOr<LoadedCheckpoint> read = ReadOne(dir);
    if (read.ok()) return read;
    // A checkpoint named on its own has no other to choose.
    if (dir == path || !ChoiceIsStale(path, dir)) return read.status();
    last = read.status();
    LOG(WARNING) << "checkpoint " << dir << " was pruned while it was read (" << last.message()
                 << "); choosing the latest complete checkpoint of " << path << " again";
  }
  return PrunedEveryTime(path, tries, last);
}

}  // namespace tether
