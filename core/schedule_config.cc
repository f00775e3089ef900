#include "core/schedule_config.h"

#include <cmath>

namespace tether {

bool ScheduleActive(const LearningRateSchedule& s) {
  return s.warmup_clocks() > 0 || (s.decay() != LearningRateSchedule::CONSTANT && s.decay_clocks() > 0);
}

Status ResolveScheduleEpochs(LearningRateSchedule* s, int64_t clocks_per_epoch, int epochs, const std::string& where) {
  const auto bad = [&](const std::string& field, const std::string& why) {
    return Status::InvalidArgument("config field " + where + "." + field + ": " + why);
  };
  const auto clocks = [&](double e) { return static_cast<int64_t>(std::llround(e * static_cast<double>(clocks_per_epoch))); };
  if (s->has_warmup_epochs()) {
    const float e = s->warmup_epochs();
    if (!(e >= 0) || !std::isfinite(e)) return bad("warmup_epochs", "must be a finite number ≥ 0");
    if (s->has_warmup_clocks()) return bad("warmup_epochs", "and warmup_clocks are both set: give one");
    s->set_warmup_clocks(clocks(e));
    s->clear_warmup_epochs();
  }
  if (s->has_decay_epochs()) {
    const float e = s->decay_epochs();
    if (!(e >= 0) || !std::isfinite(e)) return bad("decay_epochs", "must be a finite number ≥ 0");
    if (s->has_decay_clocks()) return bad("decay_epochs", "and decay_clocks are both set: give one");
    s->set_decay_clocks(clocks(e));
    s->clear_decay_epochs();
  } else if (s->decay() != LearningRateSchedule::CONSTANT && !s->has_decay_clocks()) {
    // The decay runs to the end of training: every clock of train.epochs
    // that the warm-up leaves.
    const int64_t total = clocks_per_epoch * static_cast<int64_t>(epochs);
    s->set_decay_clocks(total > s->warmup_clocks() ? total - s->warmup_clocks() : 0);
  }
  return Status::OK();
}

std::string ScheduleProblem(const LearningRateSchedule& s, OptimizerType type) {
  if (s.has_warmup_epochs() || s.has_decay_epochs())
    return std::string(s.has_warmup_epochs() ? "warmup_epochs" : "decay_epochs") +
           ": was not resolved into clocks (a shard reads clocks only)";
  if (s.warmup_clocks() < 0) return "warmup_clocks: must be ≥ 0";
  if (s.decay_clocks() < 0) return "decay_clocks: must be ≥ 0";
  if (!(s.final_factor() >= 0 && s.final_factor() <= 1)) return "final_factor: must be in [0, 1]";
  if (s.decay() != LearningRateSchedule::CONSTANT && s.decay_clocks() < 1)
    return "decay_clocks: must be ≥ 1 with decay " + LearningRateSchedule::Decay_Name(s.decay()) +
           " (the training is shorter than its warm-up?)";
  if (ScheduleActive(s) && type != ADAM && type != ADAGRAD && type != SGD)
    return "decay: a schedule needs optimizer type ADAM, ADAGRAD or SGD, not " + OptimizerType_Name(type) +
           (type == FTRL ? " (FTRL divides by its rate alpha)" : " (no learning rate)");
  return "";
}

}  // namespace tether
