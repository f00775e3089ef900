#include "worker/train/pacing.h"

#include <gtest/gtest.h>

#include <vector>

namespace tether {
namespace {

TEST(SlowdownIdlerTest, CarriesTheFractionOfAMillisecond) {
  // 2× slower, minibatches of 2.6 ms: rounding each idle down would idle
  // 2 ms per minibatch (1.77× slower); the idler idles 2.6 ms on average.
  SlowdownIdler idler(2.0);
  std::vector<int> asked;
  auto idle = [&](int ms) {
    asked.push_back(ms);
    return Status::OK();
  };
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(idler.Idle(0.0026, idle).ok());
  int total = 0;
  for (int ms : asked) total += ms;
  // 26 ms owed: all of it idled but the fraction still carried (< 1 ms).
  EXPECT_GE(total, 25);
  EXPECT_NEAR(total / 1000.0 + idler.owed_seconds(), 0.026, 1e-9);
  EXPECT_LT(idler.owed_seconds(), 0.001);
  EXPECT_NEAR(idler.idled_seconds(), total / 1000.0, 1e-12);
  ASSERT_EQ(asked.size(), 10u);
  EXPECT_EQ(asked[0], 2);
  EXPECT_EQ(asked[1], 3);  // 0.6 + 2.6 ms owed
}

TEST(SlowdownIdlerTest, SubMillisecondMinibatchesStillIdle) {
  SlowdownIdler idler(3.0);
  int calls = 0, total = 0;
  auto idle = [&](int ms) {
    ++calls;
    total += ms;
    return Status::OK();
  };
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(idler.Idle(0.0003, idle).ok());
  // 60 ms owed (2 × 30 ms of work), idled 1 ms at a time.
  EXPECT_GE(total, 59);
  EXPECT_NEAR(total / 1000.0 + idler.owed_seconds(), 0.060, 1e-9);
  EXPECT_EQ(calls, total);
}

TEST(SlowdownIdlerTest, NoSlowdownNeverIdlesAndErrorsPassThrough) {
  SlowdownIdler none(1.0);
  auto fail = [](int) { return Status::Unavailable("gone"); };
  EXPECT_TRUE(none.Idle(1.0, fail).ok());
  SlowdownIdler slow(2.0);
  EXPECT_EQ(slow.Idle(0.01, fail).code(), Status::Code::kUnavailable);
}

AdaptiveBatchConfig Adaptive(bool on, int b_max) {
  AdaptiveBatchConfig a;
  a.set_enabled(on);
  a.set_b_min(16);
  a.set_b_max(b_max);
  return a;
}

TEST(AdaptiveBatchEndTest, FixedBatchesAreUnchanged) {
  const AdaptiveBatchConfig off = Adaptive(false, 160);
  EXPECT_EQ(AdaptiveBatchEnd(off, 640, 0, 100), 100);
  EXPECT_EQ(AdaptiveBatchEnd(off, 640, 500, 100), 600);
  EXPECT_EQ(AdaptiveBatchEnd(off, 640, 600, 100), 640);  // a 40-row tail stays its own
  EXPECT_EQ(AdaptiveBatchEnd(off, 2440, 2432, 64), 2440);
}

TEST(AdaptiveBatchEndTest, AbsorbsATailOfLessThanHalfABatch) {
  const AdaptiveBatchConfig on = Adaptive(true, 160);
  // 640 rows at b = 100: 6 minibatches (the sixth of 140), not 7.
  int64_t b = 0, n = 0;
  std::vector<int64_t> sizes;
  while (b < 640) {
    const int64_t e = AdaptiveBatchEnd(on, 640, b, 100);
    sizes.push_back(e - b);
    b = e;
    ++n;
  }
  EXPECT_EQ(n, 6);
  EXPECT_EQ(sizes.back(), 140);
  // A tail of half a batch or more is a minibatch of its own.
  EXPECT_EQ(AdaptiveBatchEnd(on, 650, 500, 100), 600);
  EXPECT_EQ(AdaptiveBatchEnd(on, 649, 500, 100), 649);
  // Never above b_max: 100 + 40 > 120.
  EXPECT_EQ(AdaptiveBatchEnd(Adaptive(true, 120), 640, 500, 100), 600);
  // A short block is one minibatch.
  EXPECT_EQ(AdaptiveBatchEnd(on, 30, 0, 100), 30);
}

}  // namespace
}  // namespace tether
