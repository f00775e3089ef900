#include "optim/schedule.h"

#include <cmath>
#include <cstdio>

#include "core/schedule_config.h"

namespace tether {

float ScheduleFactor(const LearningRateSchedule& s, int64_t clock) {
  const int64_t c = clock < 0 ? 0 : clock;
  if (c < s.warmup_clocks()) return static_cast<float>(static_cast<double>(c + 1) / static_cast<double>(s.warmup_clocks()));
  if (s.decay() == LearningRateSchedule::CONSTANT || s.decay_clocks() <= 0) return 1.0f;
  const double final_factor = s.final_factor();
  const int64_t d = c - s.warmup_clocks();
  if (d >= s.decay_clocks()) return s.final_factor();
  const double x = static_cast<double>(d) / static_cast<double>(s.decay_clocks());
  // One cosine cycle from its top (x = 0) towards its bottom (x → 1).
  const double shape = s.decay() == LearningRateSchedule::COSINE ? 0.5 * (1.0 + std::cos(M_PI * x)) : 1.0 - x;
  return static_cast<float>(final_factor + (1.0 - final_factor) * shape);
}

std::string DescribeSchedule(const LearningRateSchedule& s) {
  if (!ScheduleActive(s)) return "constant";
  std::string out;
  if (s.decay() != LearningRateSchedule::CONSTANT && s.decay_clocks() > 0) {
    char buf[96];
    std::snprintf(buf, sizeof(buf), "%s decay over %lld clocks to %g", s.decay() == LearningRateSchedule::COSINE ? "cosine" : "linear",
                  static_cast<long long>(s.decay_clocks()), static_cast<double>(s.final_factor()));
    out = buf;
  } else {
    out = "constant";
  }
  if (s.warmup_clocks() > 0) out += " after a " + std::to_string(s.warmup_clocks()) + "-clock warm-up";
  return out;
}

}  // namespace tether
