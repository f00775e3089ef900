// The metrics a validation split can watch (train.early_stopping.metric), by
// the kind of labels the job's model has: the one list the config's check
// and the worker's early stopping (eval/early_stopping.h) both read.
// Pure functions; thread-safe.
#pragma once

#include <string>

#include "proto/config.pb.h"

namespace tether {

/// "" when `metric` is a validation metric of a model of `kind`
/// ("multi-label": precision_at_1, 3, 5, ndcg_at_1, 3, 5; "binary":
/// accuracy, auc, log_loss; "multiclass": accuracy, log_loss), else why not
/// ("is not a metric of binary models: use accuracy, auc or log_loss").
std::string ValidationMetricProblem(const std::string& metric, const std::string& kind);

/// The label kind ("multi-label", "binary", "multiclass") of the job's
/// model when it is a built-in one (model.name xmc_mlp, sparse_lr,
/// dense_mlp, or model.type when no name is set); "" for a model another
/// library registers by name (its kind is the model registry's:
/// worker/models/model_registry.h).
std::string BuiltinLabelKindName(const JobConfig& config);

}  // namespace tether
