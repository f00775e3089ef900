#include "core/top_k.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

namespace tether {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<uint32_t> Top(const std::vector<float>& s, int64_t k) {
  std::vector<uint32_t> out(static_cast<size_t>(k));
  SelectTopK(s.data(), static_cast<int64_t>(s.size()), k, out.data());
  return out;
}

TEST(TopKTest, ScoreDescendingThenSmallerIndexThenNaNLast) {
  const std::vector<float> s = {0.5f, kNaN, 2.0f, 0.5f, -kInf, kNaN, 2.0f, kInf};
  EXPECT_EQ(Top(s, 8), (std::vector<uint32_t>{7, 2, 6, 0, 3, 4, 1, 5}));
  EXPECT_EQ(Top(s, 3), (std::vector<uint32_t>{7, 2, 6}));
  EXPECT_EQ(Top(s, 1), (std::vector<uint32_t>{7}));
  EXPECT_TRUE(Top(s, 0).empty());
}

TEST(TopKTest, AllNaNOrAllTiedRankByIndex) {
  EXPECT_EQ(Top({kNaN, kNaN, kNaN}, 2), (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(Top({1.0f, 1.0f, 1.0f, 1.0f}, 3), (std::vector<uint32_t>{0, 1, 2}));
}

// The heap selection equals a full sort by the same order, on random rows
// with many ties and NaNs.
TEST(TopKTest, EqualsTheHeadOfAFullSort) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> value(0, 6);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<float> s(1 + rng() % 40);
    for (float& x : s) {
      const int v = value(rng);
      x = v == 6 ? kNaN : static_cast<float>(v) - 2.0f;
    }
    std::vector<uint32_t> all(s.size());
    std::iota(all.begin(), all.end(), 0u);
    std::sort(all.begin(), all.end(), TopKOrder{s.data()});
    const int64_t k = 1 + static_cast<int64_t>(rng() % s.size());
    EXPECT_EQ(Top(s, k), std::vector<uint32_t>(all.begin(), all.begin() + k)) << "trial " << trial;
  }
}

TEST(TopKTest, SameScoreTiesNaNWithNaNOnly) {
  EXPECT_TRUE(SameScore(1.0f, 1.0f));
  EXPECT_TRUE(SameScore(0.0f, -0.0f));
  EXPECT_TRUE(SameScore(kNaN, kNaN));
  EXPECT_FALSE(SameScore(kNaN, 1.0f));
  EXPECT_FALSE(SameScore(1.0f, 2.0f));
}

}  // namespace
}  // namespace tether
