// The one place tether-export reads a checkpoint: a TrainedModel from a
// checkpoint directory (LoadTrainedModel, server/checkpoint.h). Kept apart
// so the export tool builds before the checkpoint reader exists: until
// server/checkpoint.h is in the tree, LoadCheckpointModel refuses with
// FailedPrecondition saying so (it never invents a model).
//
// Thread-safety: as LoadTrainedModel's.
#pragma once

#include <string>

#include "core/status.h"
#include "core/trained_model.h"

namespace tether {

/// LoadTrainedModel(checkpoint_dir): a checkpoint or a directory of
/// checkpoints (the latest complete one). Errors: LoadTrainedModel's;
/// FailedPrecondition when this build has no checkpoint reader.
StatusOr<TrainedModel> LoadCheckpointModel(const std::string& checkpoint_dir);

}  // namespace tether
