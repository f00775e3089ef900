#include "server/coordinator/adaptive_batches.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace tether {
namespace {

using Clock = std::chrono::steady_clock;

Clock::time_point At(double seconds) {
  return Clock::time_point(std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds)));
}

AdaptiveBatchClock Report(int64_t rows, int b = 60, int lo = 10, int hi = 200) {
  AdaptiveBatchClock r;
  r.set_rows(rows);
  r.set_batch_size(b);
  r.set_minibatch_size(60);
  r.mutable_config()->set_enabled(true);
  r.mutable_config()->set_b_min(lo);
  r.mutable_config()->set_b_max(hi);
  r.mutable_config()->set_warmup_clocks(0);
  r.mutable_config()->set_window_clocks(1);
  r.mutable_config()->set_smoothing(1.0);
  return r;
}

// Busy time is the time between two CLOCKs less the bound wait between
// them: rank 1 is twice as fast once its wait is left out.
TEST(AdaptiveBatchesTest, BusyTimeLeavesTheBoundWaitOut) {
  AdaptiveBatches a;
  // First CLOCKs: no previous one to time from; B.
  EXPECT_EQ(*a.Report(0, Report(60), 0.0, At(100)), 60);
  EXPECT_EQ(*a.Report(1, Report(60), 0.0, At(100)), 60);
  // 60 s later each: rank 0 busy 60 s, rank 1 waited 30 s of it.
  EXPECT_EQ(*a.Report(0, Report(60), 0.0, At(160)), 60);  // alone with a rate: B
  EXPECT_EQ(*a.Report(1, Report(60), 30.0, At(160)), 80);  // 2 rows/s: 120 · 2/3
  // The first clock's rows count toward the first measured one.
  EXPECT_DOUBLE_EQ(a.controller()->rate(0), 2.0);
  EXPECT_DOUBLE_EQ(a.controller()->rate(1), 4.0);
}

TEST(AdaptiveBatchesTest, BusySecondsLeaveTheBoundWaitOut) {
  EXPECT_DOUBLE_EQ(AdaptiveBatches::BusySeconds(10.0, 0.0), 10.0);
  EXPECT_DOUBLE_EQ(AdaptiveBatches::BusySeconds(10.0, 3.0), 7.0);
  EXPECT_DOUBLE_EQ(AdaptiveBatches::BusySeconds(10.0, 12.0), 0.0);  // never negative
}

// A fast worker that waited for a data chunk between two CLOCKs reports
// the wait: that clock is no measure of its pace, so it keeps its rate and
// its larger batch instead of looking as slow as the worker it waited on.
TEST(AdaptiveBatchesTest, AClockWithIdleTimeIsNoMeasure) {
  AdaptiveBatches a;
  EXPECT_EQ(*a.Report(0, Report(60), 0.0, At(100)), 60);
  EXPECT_EQ(*a.Report(1, Report(60), 0.0, At(100)), 60);
  EXPECT_EQ(*a.Report(0, Report(60), 0.0, At(130)), 60);  // 4 rows/s, alone: B
  EXPECT_EQ(*a.Report(1, Report(60), 0.0, At(160)), 40);  // 2 rows/s against 4: 120 · 1/3
  EXPECT_EQ(*a.Report(0, Report(60), 0.0, At(145)), 80);  // 4 rows/s: 120 · 2/3
  // Rank 0 then waits 45 s for a chunk: its clock is left out.
  AdaptiveBatchClock idle = Report(60);
  idle.set_idle_s(45.0);
  EXPECT_EQ(*a.Report(0, idle, 0.0, At(200)), 80);
  EXPECT_DOUBLE_EQ(a.controller()->rate(0), 4.0);
  // Its next clock is timed from the idle one: 60 rows in 15 s.
  EXPECT_EQ(*a.Report(0, Report(60), 0.0, At(215)), 80);
  EXPECT_DOUBLE_EQ(a.controller()->rate(0), 4.0);
}

TEST(AdaptiveBatchesTest, IdleTimeIsNoSettingAndMustBeADuration) {
  AdaptiveBatches a;
  AdaptiveBatchClock first = Report(60);
  first.set_idle_s(2.0);
  ASSERT_TRUE(a.Report(0, first, 0, At(1)).ok());
  // Another idle time is not other settings.
  AdaptiveBatchClock other = Report(60);
  other.set_idle_s(7.0);
  EXPECT_TRUE(a.Report(1, other, 0, At(2)).ok());
  AdaptiveBatchState state;
  a.Snapshot(&state);
  EXPECT_FALSE(state.settings().has_idle_s());
  for (const double bad : {-1.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
    AdaptiveBatchClock r = Report(60);
    r.set_idle_s(bad);
    const StatusOr<int> refused = a.Report(0, r, 0, At(3));
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_EQ(refused.status().code(), Status::Code::kInvalidArgument);
    EXPECT_NE(refused.status().message().find("CLOCK from worker 0: adaptive batch idle_s"), std::string::npos)
        << refused.status().message();
  }
}

TEST(AdaptiveBatchesTest, OtherSettingsAreRefusedNamingBoth) {
  AdaptiveBatches a;
  ASSERT_TRUE(a.Report(0, Report(60), 0, At(1)).ok());
  const StatusOr<int> other = a.Report(1, Report(60, 60, 20), 0, At(2));
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(other.status().message().find("b_min: 20"), std::string::npos) << other.status().message();
  EXPECT_NE(other.status().message().find("b_min: 10"), std::string::npos) << other.status().message();
  // Settings the controller refuses, on the first report.
  AdaptiveBatches b;
  const StatusOr<int> bad = b.Report(0, Report(60, 60, 100, 200), 0, At(1));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("train.adaptive_batch refused"), std::string::npos);
  EXPECT_EQ(b.controller(), nullptr);
}

TEST(AdaptiveBatchesTest, AForgottenRankStartsAfresh) {
  AdaptiveBatches a;
  ASSERT_TRUE(a.Report(0, Report(60), 0, At(0)).ok());
  ASSERT_TRUE(a.Report(1, Report(60), 0, At(0)).ok());
  ASSERT_TRUE(a.Report(0, Report(60), 0, At(60)).ok());
  ASSERT_TRUE(a.Report(1, Report(60), 0, At(30)).ok());
  a.Forget(1);
  EXPECT_EQ(a.controller()->num_workers(), 1);
  // Its next CLOCK is a first one again: no busy time, no rate.
  EXPECT_EQ(*a.Report(1, Report(60), 0, At(1000)), 60);
  EXPECT_DOUBLE_EQ(a.controller()->rate(1), 0.0);
}

TEST(AdaptiveBatchesTest, ARestoredCopyAnswersExactlyAsTheOriginal) {
  AdaptiveBatches a, fresh;
  AdaptiveBatchState empty;
  fresh.Snapshot(&empty);
  EXPECT_FALSE(empty.has_settings());
  for (int i = 0; i < 6; ++i)
    for (int r = 0; r < 3; ++r) ASSERT_TRUE(a.Report(r, Report(60 + r), 0.1 * i, At(10.0 * i + r)).ok());
  AdaptiveBatchState state;
  a.Snapshot(&state);
  AdaptiveBatches b;
  ASSERT_TRUE(b.Restore(state).ok());
  for (int i = 6; i < 20; ++i) {
    const int r = i % 3;
    const double wait = 0.3 * i, t = 10.0 * i + 0.7 * r;
    EXPECT_EQ(*a.Report(r, Report(50 + i), wait, At(t)), *b.Report(r, Report(50 + i), wait, At(t))) << i;
  }
  AdaptiveBatchState sa, sb;
  a.Snapshot(&sa);
  b.Snapshot(&sb);
  EXPECT_EQ(sa.SerializeAsString(), sb.SerializeAsString());
  // Restoring the empty state forgets everything.
  ASSERT_TRUE(b.Restore(empty).ok());
  EXPECT_EQ(b.controller(), nullptr);
}

}  // namespace
}  // namespace tether
