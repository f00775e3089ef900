// Delay compensation's arithmetic (DC-ASGD-c, Zheng et al., ICML 2017):
// g + λ·g⊙g⊙(w_now − w_bak) on values whose products are exact in float.
#include "optim/delay_compensation.h"

#include <gtest/gtest.h>

#include <vector>

namespace tether {
namespace {

TEST(DelayCompensationTest, AddsLambdaTimesTheSquaredGradientTimesTheDrift) {
  const std::vector<float> g = {2.0f, -1.0f, 0.5f, 0.0f, 4.0f};
  const std::vector<float> w_now = {1.0f, 3.0f, -2.0f, 7.0f, 0.25f};
  const std::vector<float> w_bak = {0.5f, 1.0f, 2.0f, -1.0f, 0.25f};
  std::vector<float> out(g.size());
  CompensateDelay(g.data(), w_now.data(), w_bak.data(), g.size(), 0.25f, out.data());
  // λ = 1/4: 2 + (1/4)·4·(1/2) = 2.5; −1 + (1/4)·1·2 = −0.5;
  // 0.5 + (1/4)·(1/4)·(−4) = 0.25; a zero gradient stays 0; no drift: g.
  EXPECT_EQ(out, (std::vector<float>{2.5f, -0.5f, 0.25f, 0.0f, 4.0f}));
}

TEST(DelayCompensationTest, LambdaZeroOrNoDriftLeavesTheGradientBitForBit) {
  const std::vector<float> g = {0.1f, -3.7f, 1e-20f};
  const std::vector<float> w = {0.3f, 0.7f, -5.0f};
  const std::vector<float> moved = {1.3f, -0.7f, 5.0f};
  std::vector<float> out(3);
  CompensateDelay(g.data(), moved.data(), w.data(), 3, 0.0f, out.data());
  EXPECT_EQ(out, g);
  CompensateDelay(g.data(), w.data(), w.data(), 3, 100.0f, out.data());
  EXPECT_EQ(out, g);
}

TEST(DelayCompensationTest, InPlaceGivesTheSameValues) {
  std::vector<float> g = {3.0f, -2.0f};
  const std::vector<float> w_now = {0.0f, 1.0f}, w_bak = {1.0f, 0.0f};
  CompensateDelay(g.data(), w_now.data(), w_bak.data(), 2, 0.5f, g.data());
  // 3 + 0.5·9·(−1) = −1.5; −2 + 0.5·4·1 = 0.
  EXPECT_EQ(g, (std::vector<float>{-1.5f, 0.0f}));
}

}  // namespace
}  // namespace tether
