#include "eval/early_stopping.h"

#include <cmath>
#include <utility>

#include "core/validation_metric.h"

namespace tether {

EarlyStopper::EarlyStopper(std::string metric, int patience, double min_delta)
    : metric_(std::move(metric)), patience_(patience), min_delta_(min_delta), higher_(metric_ != "log_loss") {}

std::string EarlyStopper::MetricProblem(const std::string& m, const std::string& kind) {
  return ValidationMetricProblem(m, kind);
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
