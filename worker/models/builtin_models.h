// Constructors of the built-in models (worker/models/model.cc,
// worker/models/sampled_xmc_model.cc), for their entries in the model registry
// (worker/models/model_registry.cc). Each takes the job's tables (TablesForJob;
// they outlive the model), a borrowed backend and the worker's rank, and
// returns InvalidArgument when a table it needs is missing or misshapen.
#pragma once

#include <memory>
#include <vector>

#include "core/status.h"
#include "proto/config.pb.h"
#include "proto/tables.pb.h"
#include "compute/backend.h"
#include "worker/models/model.h"

namespace tether {

/// XMC_MLP: the full softmax/BCE model, or the sampled softmax when
/// model.sampled_labels > 0 (CreateSampledXmcMlpModel).
StatusOr<std::unique_ptr<Model>> CreateXmcMlpModel(const JobConfig& config, const std::vector<TableSpec>& tables,
                                                   Backend* backend, int rank);
StatusOr<std::unique_ptr<Model>> CreateSparseLrModel(const JobConfig& config, const std::vector<TableSpec>& tables,
                                                     Backend* backend, int rank);
StatusOr<std::unique_ptr<Model>> CreateDenseMlpModel(const JobConfig& config, const std::vector<TableSpec>& tables,
                                                     Backend* backend, int rank);

}  // namespace tether
