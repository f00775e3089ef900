#include "tools/checkpoint_model.h"

// server/checkpoint.h (StatusOr<TrainedModel> LoadTrainedModel(const
// std::string& checkpoint_dir)) is written in parallel with this tool; once
// it is in the tree this file needs nothing else (its library, tether_server,
// is linked already), and the #if can go.
#if __has_include("server/checkpoint.h")
#include "server/checkpoint.h"
#define TETHER_HAVE_CHECKPOINT_READER 1
#endif

namespace tether {

StatusOr<TrainedModel> LoadCheckpointModel(const std::string& checkpoint_dir) {
#ifdef TETHER_HAVE_CHECKPOINT_READER
  return LoadTrainedModel(checkpoint_dir);
#else
  return Status::FailedPrecondition(checkpoint_dir +
                                    ": this build has no checkpoint reader (server/checkpoint.h, LoadTrainedModel) "
                                    "yet; write a model at the end of a job with tether-worker --in_process "
                                    "--model_out instead");
#endif
}

}  // namespace tether
