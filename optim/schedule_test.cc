#include "optim/schedule.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/schedule_config.h"

namespace tether {
namespace {

LearningRateSchedule Make(LearningRateSchedule::Decay decay, int64_t warmup, int64_t decay_clocks, float final_factor) {
  LearningRateSchedule s;
  s.set_decay(decay);
  s.set_warmup_clocks(warmup);
  s.set_decay_clocks(decay_clocks);
  s.set_final_factor(final_factor);
  return s;
}

TEST(ScheduleTest, UnsetIsOneEverywhere) {
  const LearningRateSchedule s;
  EXPECT_FALSE(ScheduleActive(s));
  for (int64_t c : {int64_t{-5}, int64_t{0}, int64_t{1}, int64_t{1000}, int64_t{1} << 40}) EXPECT_EQ(ScheduleFactor(s, c), 1.0f) << c;
  EXPECT_EQ(DescribeSchedule(s), "constant");
}

// Warm-up: (c + 1) / W for c < W, then 1 (CONSTANT) for ever.
TEST(ScheduleTest, LinearWarmupThenConstant) {
  const LearningRateSchedule s = Make(LearningRateSchedule::CONSTANT, 4, 0, 0.0f);
  EXPECT_TRUE(ScheduleActive(s));
  EXPECT_EQ(ScheduleFactor(s, -1), 0.25f);
  EXPECT_EQ(ScheduleFactor(s, 0), 0.25f);
  EXPECT_EQ(ScheduleFactor(s, 1), 0.5f);
  EXPECT_EQ(ScheduleFactor(s, 2), 0.75f);
  EXPECT_EQ(ScheduleFactor(s, 3), 1.0f);
  EXPECT_EQ(ScheduleFactor(s, 4), 1.0f);
  EXPECT_EQ(ScheduleFactor(s, 400), 1.0f);
}

// Cosine over 8 clocks to 0.2 after 2 warm-up clocks: at d = c − 2,
// 0.2 + 0.8·(1 + cos(π d / 8)) / 2; from d = 8 on, 0.2.
TEST(ScheduleTest, CosineDecayAtGivenClocks) {
  const LearningRateSchedule s = Make(LearningRateSchedule::COSINE, 2, 8, 0.2f);
  EXPECT_EQ(ScheduleFactor(s, 0), 0.5f);
  EXPECT_EQ(ScheduleFactor(s, 1), 1.0f);
  EXPECT_EQ(ScheduleFactor(s, 2), 1.0f);                                   // d = 0: the top
  EXPECT_FLOAT_EQ(ScheduleFactor(s, 4), 0.2f + 0.8f * 0.5f * (1.0f + std::sqrt(0.5f)));  // d = 2: cos(π/4)
  EXPECT_FLOAT_EQ(ScheduleFactor(s, 6), 0.6f);                             // d = 4: cos(π/2) = 0
  EXPECT_FLOAT_EQ(ScheduleFactor(s, 8), 0.2f + 0.8f * 0.5f * (1.0f - std::sqrt(0.5f)));
  EXPECT_EQ(ScheduleFactor(s, 10), 0.2f);
  EXPECT_EQ(ScheduleFactor(s, 1000), 0.2f);
  // Never rises while it decays.
  for (int64_t c = 2; c < 12; ++c) EXPECT_LE(ScheduleFactor(s, c + 1), ScheduleFactor(s, c)) << c;
  EXPECT_EQ(DescribeSchedule(s), "cosine decay over 8 clocks to 0.2 after a 2-clock warm-up");
}

TEST(ScheduleTest, LinearDecayAtGivenClocks) {
  const LearningRateSchedule s = Make(LearningRateSchedule::LINEAR, 0, 4, 0.0f);
  EXPECT_EQ(ScheduleFactor(s, 0), 1.0f);
  EXPECT_EQ(ScheduleFactor(s, 1), 0.75f);
  EXPECT_EQ(ScheduleFactor(s, 2), 0.5f);
  EXPECT_EQ(ScheduleFactor(s, 3), 0.25f);
  EXPECT_EQ(ScheduleFactor(s, 4), 0.0f);
  EXPECT_EQ(ScheduleFactor(s, 5), 0.0f);
}

// Epochs become clocks of the nominal epoch; an unset decay_epochs runs the
// decay to the end of train.epochs.

}  // namespace
}  // namespace tether
