#include "server/row_admission.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <random>
#include <vector>

namespace tether {
namespace {

TEST(CountMinSketchTest, CountsExactlyWithoutCollisions) {
  CountMinSketch s(1 << 16, 7);
  EXPECT_EQ(s.width(), 1u << 16);
  EXPECT_EQ(s.bytes(), 4u * (1 << 16) * 2);
  EXPECT_EQ(s.Estimate(42), 0u);
  EXPECT_EQ(s.Add(42), 1u);
  EXPECT_EQ(s.Add(42), 2u);
  EXPECT_EQ(s.Add(43), 1u);
  EXPECT_EQ(s.Estimate(42), 2u);
  EXPECT_EQ(s.Estimate(43), 1u);
  EXPECT_EQ(s.Estimate(44), 0u);
}

TEST(CountMinSketchTest, NeverUnderCountsAndRoundsWidth) {
  CountMinSketch tiny(100, 1);  // 128 counters a row: many collisions
  EXPECT_EQ(tiny.width(), 128u);
  std::mt19937_64 rng(5);
  std::map<uint64_t, uint32_t> truth;
  for (int i = 0; i < 5000; ++i) {
    const uint64_t k = rng() % 700;
    ++truth[k];
    tiny.Add(k);
  }
  uint64_t over = 0;
  for (const auto& [k, n] : truth) {
    ASSERT_GE(tiny.Estimate(k), n) << k;
    over += tiny.Estimate(k) - n;
  }
  EXPECT_GT(over, 0u);  // 700 keys in 128 counters do collide
}

TEST(CountMinSketchTest, SaturatesAt65535) {
  CountMinSketch s(64, 2);
  for (int i = 0; i < 70000; ++i) s.Add(9);
  EXPECT_EQ(s.Estimate(9), CountMinSketch::kMaxCount);
  EXPECT_EQ(s.Add(9), CountMinSketch::kMaxCount);
}

TEST(RowAdmissionTest, Enabled) {
  TableBudget b;
  EXPECT_FALSE(RowAdmission::Enabled(b));
  b.set_max_rows(10);
  EXPECT_FALSE(RowAdmission::Enabled(b));
  b.set_admit_probability(1.0f);
  EXPECT_FALSE(RowAdmission::Enabled(b));
  b.set_admit_probability(0.5f);
  EXPECT_TRUE(RowAdmission::Enabled(b));
  TableBudget k;
  k.set_admit_after(1);
  EXPECT_TRUE(RowAdmission::Enabled(k));
}

TEST(RowAdmissionTest, AdmitAfterKPushesAndCountsOnAfterwards) {
  TableBudget b;
  b.set_admit_after(3);
  RowAdmission a(b, 1, 0);
  EXPECT_FALSE(a.AdmitOnPush(100));
  EXPECT_FALSE(a.AdmitOnPush(100));
  EXPECT_FALSE(a.AdmitOnPush(200));
  EXPECT_TRUE(a.AdmitOnPush(100));  // third push
  EXPECT_EQ(a.sketch().Estimate(100), 3u);
  EXPECT_EQ(a.sketch().Estimate(200), 1u);
  // Its row evicted later, the key is counted on: admitted at its next push.
  EXPECT_TRUE(a.AdmitOnPush(100));
  EXPECT_EQ(a.sketch().Estimate(100), 4u);
  TableBudget one;
  one.set_admit_after(1);
  RowAdmission first(one, 1, 0);
  EXPECT_TRUE(first.AdmitOnPush(5));
}

TEST(RowAdmissionTest, SketchWidthFollowsMaxRows) {
  TableBudget b;
  b.set_admit_after(2);
  EXPECT_EQ(RowAdmission(b, 1, 0).sketch().width(), RowAdmission::kDefaultWidth);
  b.set_max_rows(10);
  EXPECT_EQ(RowAdmission(b, 1, 0).sketch().width(), 4096u);
  b.set_max_rows(100000);
  EXPECT_EQ(RowAdmission(b, 1, 0).sketch().width(), 524288u);
}

// Admission by probability: the same keys at the same pushes for the same
// seed, about p of the first pushes, and another seed another draw.
TEST(RowAdmissionTest, ProbabilityIsRepeatableAndNearP) {
  TableBudget b;
  b.set_admit_probability(0.25f);
  auto run = [&](uint64_t seed) {
    RowAdmission a(b, seed, 2);
    std::vector<int> first_admitted_push(4000, 0);
    for (int round = 1; round <= 3; ++round)
      for (uint64_t k = 0; k < 4000; ++k)
        if (first_admitted_push[k] == 0 && a.AdmitOnPush(k * 7919)) first_admitted_push[k] = round;
    return first_admitted_push;
  };
  const std::vector<int> a = run(11), again = run(11), other = run(12);
  EXPECT_EQ(a, again);
  EXPECT_NE(a, other);
  int at_first = 0, ever = 0;
  for (int r : a) {
    at_first += r == 1;
    ever += r != 0;
  }
  // Binomial(4000, 0.25): mean 1000, sd 27.
  EXPECT_GT(at_first, 900);
  EXPECT_LT(at_first, 1100);
  // Three pushes each: 1 − 0.75³ = 0.578 of the keys.
  EXPECT_GT(ever, 2200);
  EXPECT_LT(ever, 2430);
}

}  // namespace
}  // namespace tether
