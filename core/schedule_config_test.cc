#include "core/schedule_config.h"

#include <gtest/gtest.h>

#include <cmath>

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

TEST(ScheduleTest, EpochsResolveIntoClocks) {
  LearningRateSchedule s;
  s.set_decay(LearningRateSchedule::COSINE);
  s.set_warmup_epochs(0.5f);
  ASSERT_TRUE(ResolveScheduleEpochs(&s, /*clocks_per_epoch=*/39, /*epochs=*/10, "optimizer.schedule").ok());
  EXPECT_FALSE(s.has_warmup_epochs());
  EXPECT_EQ(s.warmup_clocks(), 20);  // 19.5 rounds to 20
  EXPECT_EQ(s.decay_clocks(), 390 - 20);
  EXPECT_EQ(ScheduleProblem(s, ADAM), "");

  LearningRateSchedule d;
  d.set_decay(LearningRateSchedule::LINEAR);
  d.set_decay_epochs(2.0f);
  ASSERT_TRUE(ResolveScheduleEpochs(&d, 77, 10, "optimizer.schedule").ok());
  EXPECT_EQ(d.warmup_clocks(), 0);
  EXPECT_EQ(d.decay_clocks(), 154);

  LearningRateSchedule both;
  both.set_warmup_epochs(1.0f);
  both.set_warmup_clocks(3);
  const Status st = ResolveScheduleEpochs(&both, 10, 5, "optimizer.schedule");
  EXPECT_EQ(st.message(), "config field optimizer.schedule.warmup_epochs: and warmup_clocks are both set: give one");

  LearningRateSchedule neg;
  neg.set_decay_epochs(-1.0f);
  EXPECT_EQ(ResolveScheduleEpochs(&neg, 10, 5, "table[w1].optimizer.schedule").message(),
            "config field table[w1].optimizer.schedule.decay_epochs: must be a finite number ≥ 0");
  LearningRateSchedule nan;
  nan.set_warmup_epochs(std::nanf(""));
  EXPECT_FALSE(ResolveScheduleEpochs(&nan, 10, 5, "optimizer.schedule").ok());
}

TEST(ScheduleTest, ProblemsAreNamed) {
  EXPECT_EQ(ScheduleProblem(Make(LearningRateSchedule::CONSTANT, -1, 0, 0), ADAM), "warmup_clocks: must be ≥ 0");
  EXPECT_EQ(ScheduleProblem(Make(LearningRateSchedule::COSINE, 0, 0, 0), ADAM),
            "decay_clocks: must be ≥ 1 with decay COSINE (the training is shorter than its warm-up?)");
  EXPECT_EQ(ScheduleProblem(Make(LearningRateSchedule::LINEAR, 0, 5, 1.5f), ADAM), "final_factor: must be in [0, 1]");
  EXPECT_EQ(ScheduleProblem(Make(LearningRateSchedule::LINEAR, 0, 5, std::nanf("")), SGD),
            "final_factor: must be in [0, 1]");
  EXPECT_EQ(ScheduleProblem(Make(LearningRateSchedule::COSINE, 3, 5, 0), FTRL),
            "decay: a schedule needs optimizer type ADAM, ADAGRAD or SGD, not FTRL (FTRL divides by its rate alpha)");
  EXPECT_EQ(ScheduleProblem(Make(LearningRateSchedule::CONSTANT, 0, 0, 0), FTRL), "");  // inactive: allowed
  LearningRateSchedule unresolved;
  unresolved.set_warmup_epochs(1.0f);
  EXPECT_EQ(ScheduleProblem(unresolved, ADAM), "warmup_epochs: was not resolved into clocks (a shard reads clocks only)");
}

}  // namespace
}  // namespace tether
