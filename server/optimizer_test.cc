#include "server/optimizer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace tether {
namespace {

TEST(OptimizerTest, SgdStepMatchesHandComputed) {
  OptimizerConfig c;
  c.set_type(SGD);
  c.set_learning_rate(0.5f);
  Optimizer opt(c);
  EXPECT_EQ(opt.StatePerWeight(), 0);
  float w[3] = {1.0f, -2.0f, 0.25f};
  const float g[3] = {0.2f, -0.4f, 1.0f};
  opt.Apply(w, nullptr, g, 3);
  // w - 0.5 g
  EXPECT_FLOAT_EQ(w[0], 0.9f);
  EXPECT_FLOAT_EQ(w[1], -1.8f);
  EXPECT_FLOAT_EQ(w[2], -0.25f);
}

// SUM adds the gradient as it is: no learning rate, l2, momentum or scale,
// so totals are exact (case C13 counts updates through it).
TEST(OptimizerTest, SumAddsTheGradientExactly) {
  OptimizerConfig c;
  c.set_type(SUM);
  c.set_learning_rate(0.5f);
  c.set_l2(0.25f);
  c.set_momentum(0.9f);
  Optimizer opt(c);
  EXPECT_EQ(opt.StatePerWeight(), 0);
  EXPECT_EQ(opt.StateFloats(3), 0u);
  float w[3] = {0.0f, -2.0f, 0.25f};
  const float g[3] = {1.0f, 1.0f, -0.25f};
  for (int i = 0; i < 2000; ++i) opt.Apply(w, nullptr, g, 3, /*lr_scale=*/0.5f);
  EXPECT_EQ(w[0], 2000.0f);
  EXPECT_EQ(w[1], 1998.0f);
  EXPECT_EQ(w[2], -499.75f);
}

// NOOP (benchmarks) keeps no state and leaves the weights bit for bit as
// they were, whatever the gradient and settings.
TEST(OptimizerTest, NoopLeavesTheWeightsAsTheyAre) {
  OptimizerConfig c;
  c.set_type(NOOP);
  c.set_learning_rate(0.5f);
  c.set_l2(0.25f);
  c.set_momentum(0.9f);
  Optimizer opt(c);
  EXPECT_EQ(opt.StatePerWeight(), 0);
  EXPECT_EQ(opt.StateFloats(3), 0u);
  float w[3] = {0.0f, -2.0f, 0.25f};
  const float g[3] = {1.0f, 1.0f, -0.25f};
  opt.Apply(w, nullptr, g, 3);
  EXPECT_EQ(w[0], 0.0f);
  EXPECT_EQ(w[1], -2.0f);
  EXPECT_EQ(w[2], 0.25f);
}

TEST(OptimizerTest, SgdWithMomentumAndL2) {
  OptimizerConfig c;
  c.set_type(SGD);
  c.set_learning_rate(0.1f);
  c.set_momentum(0.9f);
  c.set_l2(0.5f);
  Optimizer opt(c);
  ASSERT_EQ(opt.StatePerWeight(), 1);
  float w[1] = {2.0f};
  float v[1] = {0.0f};
  const float g[1] = {1.0f};
  opt.Apply(w, v, g, 1);
  // g' = 1 + 0.5·2 = 2; v = 2; w = 2 − 0.1·2 = 1.8
  EXPECT_FLOAT_EQ(v[0], 2.0f);
  EXPECT_FLOAT_EQ(w[0], 1.8f);
  opt.Apply(w, v, g, 1);
  // g' = 1 + 0.9 = 1.9; v = 0.9·2 + 1.9 = 3.7; w = 1.8 − 0.37 = 1.43
  EXPECT_FLOAT_EQ(v[0], 3.7f);
  EXPECT_FLOAT_EQ(w[0], 1.43f);
}

TEST(OptimizerTest, AdagradTwoStepsMatchHandComputed) {
  OptimizerConfig c;
  c.set_type(ADAGRAD);
  c.set_learning_rate(0.1f);
  c.set_initial_accumulator(0.1f);
  c.set_epsilon(0.0f);
  Optimizer opt(c);
  ASSERT_EQ(opt.StatePerWeight(), 1);
  EXPECT_FLOAT_EQ(opt.InitialState(), 0.1f);
  float w[2] = {1.0f, 0.0f};
  float h[2] = {0.1f, 0.1f};
  const float g1[2] = {0.3f, -1.0f};
  opt.Apply(w, h, g1, 2);
  // h = 0.1 + 0.09 = 0.19; w = 1 − 0.1·0.3/√0.19 = 0.9311753
  // h = 0.1 + 1 = 1.1;     w = 0 + 0.1·1/√1.1   = 0.0953463
  EXPECT_FLOAT_EQ(h[0], 0.19f);
  EXPECT_NEAR(w[0], 0.9311753f, 1e-6);
  EXPECT_FLOAT_EQ(h[1], 1.1f);
  EXPECT_NEAR(w[1], 0.0953463f, 1e-6);
  const float g2[2] = {0.3f, 0.0f};
  opt.Apply(w, h, g2, 2);
  // h = 0.28; w = 0.9311753 − 0.03/√0.28 = 0.8744801; second weight unchanged
  EXPECT_NEAR(h[0], 0.28f, 1e-7);
  EXPECT_NEAR(w[0], 0.8744801f, 1e-6);
  EXPECT_NEAR(w[1], 0.0953463f, 1e-6);
}

TEST(OptimizerTest, LearningRateScaleScalesTheStep) {
  OptimizerConfig c;
  c.set_type(SGD);
  c.set_learning_rate(1.0f);
  Optimizer opt(c);
  float w[1] = {0.0f};
  const float g[1] = {1.0f};
  opt.Apply(w, nullptr, g, 1, 0.25f);
  EXPECT_FLOAT_EQ(w[0], -0.25f);
}

}  // namespace
}  // namespace tether

namespace tether {
namespace {

TEST(OptimizerTest, AdamTwoStepsMatchHandComputed) {
  OptimizerConfig c;
  c.set_type(ADAM);
  c.set_learning_rate(0.1f);
  c.set_epsilon(0.0f);
  Optimizer opt(c);
  ASSERT_EQ(opt.StateFloats(1), 3u);  // m, v, step count
  float w[1] = {1.0f};
  float state[3];
  opt.InitState(state, 1);
  EXPECT_EQ(state[0], 0.0f);
  EXPECT_EQ(state[2], 0.0f);
  const float g1[1] = {0.5f};
  opt.Apply(w, state, g1, 1);
  // t=1: m = 0.05, v = 0.00025; m̂ = 0.5, v̂ = 0.25; w = 1 − 0.1·0.5/0.5 = 0.9
  EXPECT_FLOAT_EQ(state[0], 0.05f);
  EXPECT_NEAR(state[1], 0.00025f, 1e-8);  // 1 − β2 rounds to 0.00099999 in float
  EXPECT_FLOAT_EQ(state[2], 1.0f);
  EXPECT_NEAR(w[0], 0.9f, 1e-6);
  const float g2[1] = {-1.0f};
  opt.Apply(w, state, g2, 1);
  // t=2: m = 0.045 − 0.1 = −0.055; v = 0.00024975 + 0.001 = 0.00124975
  // m̂ = −0.055/0.19 = −0.2894737; v̂ = 0.00124975/0.001999 = 0.6251876
  // w = 0.9 + 0.1·0.2894737/0.7906881 = 0.9366106
  EXPECT_NEAR(state[0], -0.055f, 1e-7);
  EXPECT_NEAR(state[1], 0.00124975f, 5e-8);
  EXPECT_NEAR(w[0], 0.9366106f, 2e-6);
}

}  // namespace
}  // namespace tether

namespace tether {
namespace {

// A double-precision Adam with std::pow for the bias correction, to check
// the float kernel (8-wide, exp-based correction, exactly 1 once βᵗ rounds
// away) over many steps, with l2 and a width that leaves a vector tail.
TEST(OptimizerTest, AdamMatchesDoubleReferenceOverManySteps) {
  OptimizerConfig c;
  c.set_type(ADAM);
  c.set_learning_rate(0.01f);
  c.set_l2(0.01f);
  Optimizer opt(c);
  constexpr int kN = 19;
  float w[kN], state[2 * kN + 1];
  double rw[kN], rm[kN] = {}, rv[kN] = {};
  for (int i = 0; i < kN; ++i) rw[i] = w[i] = 0.05f * static_cast<float>(i - 9);
  opt.InitState(state, kN);
  const double b1 = c.beta1(), b2 = c.beta2(), eps = c.epsilon(), lr = c.learning_rate(), l2 = c.l2();
  for (int t = 1; t <= 400; ++t) {  // past t = 166, where 1 − 0.9ᵗ rounds to 1.0f
    float g[kN];
    for (int i = 0; i < kN; ++i) g[i] = std::sin(0.37f * static_cast<float>(t * kN + i)) * (i == 4 ? 0.0f : 1.0f);
    opt.Apply(w, state, g, kN);
    for (int i = 0; i < kN; ++i) {
      const double gi = g[i] + l2 * rw[i];
      rm[i] = b1 * rm[i] + (1 - b1) * gi;
      rv[i] = b2 * rv[i] + (1 - b2) * gi * gi;
      rw[i] -= lr * (rm[i] / (1 - std::pow(b1, t))) / (std::sqrt(rv[i] / (1 - std::pow(b2, t))) + eps);
    }
  }
  EXPECT_EQ(state[2 * kN], 400.0f);
  for (int i = 0; i < kN; ++i) {
    EXPECT_NEAR(w[i], rw[i], 2e-5) << "weight " << i;
    EXPECT_NEAR(state[i], rm[i], 1e-5) << "m " << i;
    EXPECT_NEAR(state[kN + i], rv[i], 1e-6) << "v " << i;
  }
}

// C22: Apply reports whether every value it stored (weights and state) is
// finite, for each optimizer, on long rows (the vectorised loops and their
// tails) with the fault at the last position.
TEST(OptimizerTest, C22ApplyReportsANonFiniteStoreOfEveryKind) {
  const uint64_t n = 37;
  struct Case {
    OptimizerType type;
    float momentum, initial_accumulator, epsilon, g_last;
  };
  for (const Case& k : {Case{SGD, 0, 0.1f, 1e-8f, 3e38f}, Case{SGD, 0.5f, 0.1f, 1e-8f, 3e38f},
                        Case{ADAGRAD, 0, 0, 0, 0}, Case{ADAGRAD, 0, 0.1f, 1e-8f, 3e20f},
                        Case{ADAM, 0, 0.1f, 1e-8f, 3e25f}, Case{SUM, 0, 0.1f, 1e-8f, 3e38f}}) {
    OptimizerConfig c;
    c.set_type(k.type);
    c.set_learning_rate(k.type == SUM ? 0.1f : 1e30f);
    c.set_momentum(k.momentum);
    c.set_initial_accumulator(k.initial_accumulator);
    c.set_epsilon(k.epsilon);
    Optimizer opt(c);
    std::vector<float> w(n, 3e38f), state(opt.StateFloats(n));
    opt.InitState(state.data(), n);
    std::vector<float> g(n, 0.0f);
    // Every value finite: a zero gradient on finite weights (AdaGrad's 0/0
    // case aside, which makes NaN from a zero gradient).
    std::vector<float> w2(n, 1.0f), state2(state);
    const std::vector<float> small(n, 1e-3f);
    EXPECT_TRUE(opt.Apply(w2.data(), state2.data(), small.data(), n)) << k.type;
    g[n - 1] = k.g_last;
    EXPECT_FALSE(opt.Apply(w.data(), state.data(), g.data(), n)) << k.type;
  }
}

}  // namespace
}  // namespace tether
