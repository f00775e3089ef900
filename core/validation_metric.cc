#include "core/validation_metric.h"

#include <initializer_list>

namespace tether {
namespace {

bool IsOneOf(const std::string& m, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (m == n) return true;
  return false;
}

}  // namespace

std::string ValidationMetricProblem(const std::string& m, const std::string& kind) {
  if (kind == "multi-label") {
    if (IsOneOf(m, {"precision_at_1", "precision_at_3", "precision_at_5", "ndcg_at_1", "ndcg_at_3", "ndcg_at_5"}))
      return "";
    return "is not a metric of multi-label models: use precision_at_1, precision_at_3, precision_at_5, ndcg_at_1, "
           "ndcg_at_3 or ndcg_at_5";
  }
  if (kind == "binary") {
    if (IsOneOf(m, {"accuracy", "auc", "log_loss"})) return "";
    return "is not a metric of binary models: use accuracy, auc or log_loss";
  }
  if (IsOneOf(m, {"accuracy", "log_loss"})) return "";
  return "is not a metric of multiclass models: use accuracy or log_loss";
}

std::string BuiltinLabelKindName(const JobConfig& config) {
  const std::string& name = config.model().name();
  if (name.empty()) {
    switch (config.model().type()) {
      case SPARSE_LR: return "binary";
      case DENSE_MLP: return "multiclass";
      default: return "multi-label";
    }
  }
  if (name == "xmc_mlp") return "multi-label";
  if (name == "sparse_lr") return "binary";
  if (name == "dense_mlp") return "multiclass";
  return "";
}

}  // namespace tether
