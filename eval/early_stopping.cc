#include "eval/early_stopping.h"

#include <cmath>
#include <utility>

namespace tether {
namespace {

bool IsOneOf(const std::string& m, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (m == n) return true;
  return false;
}

}  // namespace

EarlyStopper::EarlyStopper(std::string metric, int patience, double min_delta)
    : metric_(std::move(metric)), patience_(patience), min_delta_(min_delta), higher_(metric_ != "log_loss") {}

std::string EarlyStopper::MetricProblem(const std::string& m, const std::string& kind) {
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

bool EarlyStopper::Add(int epoch, double value) {
  last_epoch_ = epoch;
  if (std::isnan(value)) return false;
  const bool improves = best_epoch_ == 0 || (higher_ ? value > best_value_ + min_delta_ : value < best_value_ - min_delta_);
  if (!improves) return false;
  best_epoch_ = epoch;
  best_value_ = value;
  return true;
}

bool EarlyStopper::ShouldStop() const {
  return patience_ > 0 && best_epoch_ > 0 && last_epoch_ - best_epoch_ >= patience_;
}

}  // namespace tether
