// BatchController: exact sizes from exact throughputs (proportional split,
// clamping with water-filling, warm-up, smoothing, window, membership), and
// convergence to equal clock times under a cost model with a fixed part.
#include "server/coordinator/batch_controller.h"

#include <cmath>

#include <gtest/gtest.h>

namespace tether {
namespace {

BatchControllerOptions Opts(int b, int lo, int hi, int warmup, int window, double smoothing) {
  BatchControllerOptions o;
  o.minibatch_size = b;
  o.b_min = lo;
  o.b_max = hi;
  o.warmup_clocks = warmup;
  o.window_clocks = window;
  o.smoothing = smoothing;
  return o;
}

TEST(BatchControllerTest, RatesOneAndTwoGiveBatchesOneToTwo) {
  BatchController c(Opts(60, 10, 200, /*warmup=*/0, /*window=*/1, /*smoothing=*/1.0));
  // Worker 0 alone has a rate: it keeps B.
  EXPECT_EQ(c.Report(0, 60, 60.0), 60);  // 1 row/s
  EXPECT_EQ(c.Report(1, 60, 30.0), 80);  // 2 rows/s: 120 · 2/3
  EXPECT_EQ(c.Report(0, 60, 60.0), 40);  // 120 · 1/3
  EXPECT_DOUBLE_EQ(c.rate(0), 1.0);
  EXPECT_DOUBLE_EQ(c.rate(1), 2.0);
  // Each now trains its size at its speed (worker 1 twice as fast): the
  // rates stay 1 and 2 and the sizes stay put, 1:2, mean 60.
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(c.Report(0, c.batch(0), c.batch(0) / 1.0), 40);
    EXPECT_EQ(c.Report(1, c.batch(1), c.batch(1) / 2.0), 80);
  }
}

TEST(BatchControllerTest, ThreeWorkersKeepTheMeanBatch) {
  BatchController c(Opts(64, 1, 1000, 0, 1, 1.0));
  c.Report(0, 10, 10.0);  // 1 row/s
  c.Report(1, 20, 10.0);  // 2
  c.Report(2, 30, 10.0);  // 3
  // Targets 192 · r / 6: 32, 64, 96 (each moved fully at its own report).
  EXPECT_EQ(c.Report(0, 10, 10.0), 32);
  EXPECT_EQ(c.Report(1, 20, 10.0), 64);
  EXPECT_EQ(c.Report(2, 30, 10.0), 96);
  EXPECT_EQ(c.batch(0) + c.batch(1) + c.batch(2), 3 * 64);
  EXPECT_EQ(c.num_workers(), 3);
}

TEST(BatchControllerTest, ClampsAtBMaxAndGivesTheExcessToTheOthers) {
  BatchController c(Opts(60, 30, 70, 0, 1, 1.0));
  c.Report(0, 10, 10.0);  // 1 row/s
  // Proportional would be 30 and 90: worker 1 is capped at 70 and worker 0
  // takes the other 50, so the mean stays 60.
  EXPECT_EQ(c.Report(1, 30, 10.0), 70);
  EXPECT_EQ(c.Report(0, 10, 10.0), 50);
}

TEST(BatchControllerTest, ClampsAtBMinAndTakesTheShortfallFromTheOthers) {
  BatchController c(Opts(50, 25, 200, 0, 1, 1.0));
  c.Report(0, 10, 10.0);  // 1 row/s
  // Proportional would be 10 and 90: worker 0 is raised to 25, worker 1 gets 75.
  EXPECT_EQ(c.Report(1, 90, 10.0), 75);
  EXPECT_EQ(c.Report(0, 10, 10.0), 25);
}

TEST(BatchControllerTest, WarmUpClocksAreNeitherMeasuredNorActedOn) {
  BatchController c(Opts(60, 10, 200, /*warmup=*/3, 1, 1.0));
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(c.Report(0, 60, 600.0), 60);  // 0.1 rows/s: would be a tiny batch
    EXPECT_EQ(c.Report(1, 60, 30.0), 60);
    EXPECT_EQ(c.rate(0), 0.0);
  }
  EXPECT_EQ(c.Report(0, 60, 60.0), 60);  // alone measured: B
  EXPECT_EQ(c.Report(1, 60, 30.0), 80);
  EXPECT_EQ(c.Report(0, 60, 60.0), 40);
}

TEST(BatchControllerTest, SmoothingMovesPartOfTheWay) {
  BatchController c(Opts(60, 10, 200, 0, 1, /*smoothing=*/0.5));
  c.Report(0, 60, 60.0);
  // Target 80 from 60: 70, 75, 77.5 (told 78), 78.75 (79), ...
  EXPECT_EQ(c.Report(1, 60, 30.0), 70);
  // Worker 0's target is 40: 60 → 50.
  EXPECT_EQ(c.Report(0, 60, 60.0), 50);
  EXPECT_EQ(c.Report(1, 60, 30.0), 75);
  EXPECT_EQ(c.Report(1, 60, 30.0), 78);
  EXPECT_EQ(c.Report(1, 60, 30.0), 79);
}

TEST(BatchControllerTest, WindowAveragesTheLastClocksAndPendingRowsWait) {
  BatchController c(Opts(60, 10, 200, 0, /*window=*/2, 1.0));
  c.Report(0, 10, 10.0);
  c.Report(0, 30, 10.0);
  EXPECT_DOUBLE_EQ(c.rate(0), 2.0);  // 40 rows in 20 s
  c.Report(0, 50, 10.0);
  EXPECT_DOUBLE_EQ(c.rate(0), 4.0);  // the first clock left the window: 80 / 20
  c.Report(0, 20, 0.0);              // no busy time: its rows wait for the next clock
  EXPECT_DOUBLE_EQ(c.rate(0), 4.0);
  c.Report(0, 20, 10.0);
  EXPECT_DOUBLE_EQ(c.rate(0), 4.5);  // (50 + 40) / 20
}

TEST(BatchControllerTest, RemovedWorkerLeavesTheSplitAndAJoinerTakesPart) {
  BatchController c(Opts(60, 10, 200, 0, 1, 1.0));
  c.Report(0, 60, 60.0);
  c.Report(1, 60, 30.0);
  EXPECT_EQ(c.Report(0, 60, 60.0), 40);
  c.Remove(1);
  EXPECT_EQ(c.num_workers(), 1);
  EXPECT_EQ(c.Report(0, 60, 60.0), 60);  // alone: B
  // Rank 7 joins mid-job (any rank): the split is by the two rates again.
  EXPECT_EQ(c.Report(7, 60, 20.0), 90);  // 3 rows/s: 120 · 3/4
  EXPECT_EQ(c.Report(0, 60, 60.0), 30);
}

// Time per clock = 5 s + b / speed (a fixed part per minibatch, as pulls and
// pushes of the shared rows are): the sizes settle where both workers' clocks
// take equally long, the fast one's larger, the mean B; no oscillation.
TEST(BatchControllerTest, ConvergesToEqualClockTimesWithAFixedCostPerClock) {
  BatchController c(Opts(64, 8, 256, 2, 3, 0.5));
  const double speed[2] = {20.0, 10.0};  // worker 1 is 2x slower
  auto time = [&](int w) { return 5.0 + c.batch(w) / speed[w]; };
  int last[2] = {0, 0};
  for (int i = 0; i < 60; ++i) {
    for (int w = 0; w < 2; ++w) {
      const double t = time(w);
      last[w] = c.Report(w, c.batch(w), t);
    }
  }
  EXPECT_GT(last[0], last[1]);
  EXPECT_NEAR(last[0] + last[1], 128, 1);
  EXPECT_NEAR(time(0), time(1), 0.05 * time(0));
  // Settled: one more round moves neither by more than 1.
  for (int w = 0; w < 2; ++w) EXPECT_NEAR(c.Report(w, c.batch(w), time(w)), last[w], 1);
}

TEST(BatchControllerTest, OptionsAreChecked) {
  EXPECT_EQ(CheckBatchControllerOptions(Opts(64, 0, 256, 0, 1, 0.5)).message(), "b_min 0 must be ≥ 1");
  EXPECT_EQ(CheckBatchControllerOptions(Opts(64, 65, 256, 0, 1, 0.5)).message(),
            "b_min 65 ≤ minibatch_size 64 ≤ b_max 256 does not hold");
  EXPECT_EQ(CheckBatchControllerOptions(Opts(64, 16, 256, 0, 0, 0.5)).message(), "window_clocks 0 must be ≥ 1");
  EXPECT_FALSE(CheckBatchControllerOptions(Opts(64, 16, 256, 0, 1, 0.0)).ok());
  EXPECT_TRUE(CheckBatchControllerOptions(Opts(64, 16, 256, 0, 1, 1.0)).ok());
}

// A copy (Snapshot, Restore into a fresh controller) reports exactly as
// the original from then on: same sizes, same rates, same window.
TEST(BatchControllerTest, ARestoredCopyReportsExactlyAsTheOriginal) {
  const BatchControllerOptions o = Opts(64, 8, 256, /*warmup=*/2, /*window=*/3, /*smoothing=*/0.5);
  BatchController a(o);
  for (int i = 0; i < 7; ++i) {
    a.Report(0, 64, 0.5 + 0.1 * i);
    a.Report(1, 64, i == 0 ? 0.0 : 1.3);  // its first clock has no busy time
    if (i == 4) a.Report(2, 64, 0.7);
  }
  AdaptiveBatchState state;
  a.Snapshot(&state);
  BatchController b(o);
  ASSERT_TRUE(b.Restore(state).ok());
  for (int i = 0; i < 20; ++i) {
    const int rank = i % 3;
    const double busy = 0.2 + 0.05 * ((i * 7) % 11);
    EXPECT_EQ(a.Report(rank, 40 + i, busy), b.Report(rank, 40 + i, busy)) << "report " << i;
    EXPECT_EQ(a.rate(rank), b.rate(rank));
    if (i == 9) {
      a.Remove(1);
      b.Remove(1);
    }
  }
  AdaptiveBatchState sa, sb;
  a.Snapshot(&sa);
  b.Snapshot(&sb);
  EXPECT_EQ(sa.SerializeAsString(), sb.SerializeAsString());
  // A malformed window is refused and changes nothing.
  state.mutable_workers(0)->add_window_rows(5);
  EXPECT_EQ(b.Restore(state).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(b.num_workers(), a.num_workers());
}

}  // namespace
}  // namespace tether
