#include "optim/optimizer.h"

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

// AdamW (Loshchilov & Hutter, ICLR 2019): the weight shrinks by 1 − lr·λ
// before Adam's step, and the moments are those of plain Adam.
TEST(OptimizerTest, AdamWTwoStepsMatchHandComputed) {
  OptimizerConfig c;
  c.set_type(ADAM);
  c.set_learning_rate(0.1f);
  c.set_epsilon(0.0f);
  c.set_weight_decay(0.5f);
  Optimizer opt(c);
  ASSERT_EQ(opt.StateFloats(1), 3u);
  float w[1] = {1.0f};
  float state[3];
  opt.InitState(state, 1);
  const float g1[1] = {0.5f};
  ASSERT_TRUE(opt.Apply(w, state, g1, 1));
  // t=1: m = 0.05 (as without decay); w = 1·(1 − 0.1·0.5) − 0.1·0.5/0.5 = 0.95 − 0.1 = 0.85
  EXPECT_FLOAT_EQ(state[0], 0.05f);
  EXPECT_NEAR(w[0], 0.85f, 1e-6);
  const float g2[1] = {-1.0f};
  ASSERT_TRUE(opt.Apply(w, state, g2, 1));
  // t=2: the moments as without decay (m̂ = −0.2894737, √v̂ = 0.7906881);
  // w = 0.85·0.95 + 0.1·0.2894737/0.7906881 = 0.8075 + 0.0366106 = 0.8441106
  EXPECT_NEAR(state[0], -0.055f, 1e-7);
  EXPECT_NEAR(state[1], 0.00124975f, 5e-8);
  EXPECT_NEAR(w[0], 0.8441106f, 2e-6);
  // lr_scale (a schedule's factor) scales the decay with the step:
  // keep = 1 − 0.5·0.1·0.5 = 0.975.
  // A zero gradient (with ε > 0, so Adam's own step is 0) leaves only it.
  c.set_epsilon(1e-8f);
  const Optimizer with_eps(c);
  float w2[1] = {2.0f};
  float state2[3];
  with_eps.InitState(state2, 1);
  const float g0[1] = {0.0f};
  ASSERT_TRUE(with_eps.Apply(w2, state2, g0, 1, /*lr_scale=*/0.5f));
  EXPECT_FLOAT_EQ(w2[0], 2.0f * 0.975f);
}

// weight_decay 0 is the loop without decay: the same bits as an optimizer
// that never heard of it, on a long row with a vector tail.
TEST(OptimizerTest, AdamWithoutDecayIsUnchangedBitForBit) {
  OptimizerConfig a;
  a.set_type(ADAM);
  a.set_learning_rate(0.01f);
  OptimizerConfig b = a;
  b.set_weight_decay(0.0f);
  Optimizer oa(a), ob(b);
  constexpr int kN = 37;
  float wa[kN], wb[kN], sa[2 * kN + 1], sb[2 * kN + 1], g[kN];
  for (int i = 0; i < kN; ++i) wa[i] = wb[i] = 0.03f * static_cast<float>(i - 17);
  oa.InitState(sa, kN);
  ob.InitState(sb, kN);
  for (int t = 0; t < 50; ++t) {
    for (int i = 0; i < kN; ++i) g[i] = std::cos(0.7f * static_cast<float>(t * kN + i));
    ASSERT_TRUE(oa.Apply(wa, sa, g, kN, 0.75f));
    ASSERT_TRUE(ob.Apply(wb, sb, g, kN, 0.75f));
  }
  for (int i = 0; i < kN; ++i) EXPECT_EQ(wa[i], wb[i]) << i;
}

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

namespace tether {
namespace {

// FTRL-Proximal, McMahan et al. (KDD 2013), Algorithm 1, per coordinate:
//   σ = (√(n + g²) − √n)/α;  z += g − σ·w;  n += g²;
//   w = 0 if |z| ≤ λ1, else −(z − sgn(z)·λ1) / ((β + √n)/α + λ2).
// With α = β = λ1 = 1, λ2 = 0 and gradients whose running n are squares,
// every value is exact in float:
//  coordinate 0: g = 3, 4:   n = 9, 25; σ = 3, 2; z = 3, 3 + 4 − 2·(−0.5) = 8;
//                            w = −(3 − 1)/(1 + 3) = −0.5, −(8 − 1)/(1 + 5) = −7/6
//  coordinate 1: g = 0.5, −0.5: z = 0.5, then 0 (w was 0): |z| ≤ λ1, w = 0 exactly
//  coordinate 2: g = −4, 0:  n = 16, 16; z = −4, −4; w = 3/5 both times
TEST(OptimizerTest, FtrlTwoStepsMatchThePapersUpdate) {
  OptimizerConfig c;
  c.set_type(FTRL);
  c.set_alpha(1.0f);
  c.set_beta(1.0f);
  c.set_l1(1.0f);
  c.set_learning_rate(123.0f);  // not read by FTRL
  Optimizer opt(c);
  EXPECT_EQ(opt.StatePerWeight(), 2);
  EXPECT_EQ(opt.StateFloats(3), 6u);
  float w[3] = {0.0f, 0.0f, 0.0f};
  std::vector<float> state(opt.StateFloats(3), -1.0f);
  opt.InitState(state.data(), 3);
  for (float s : state) EXPECT_EQ(s, 0.0f);
  const float g1[3] = {3.0f, 0.5f, -4.0f};
  ASSERT_TRUE(opt.Apply(w, state.data(), g1, 3));
  EXPECT_EQ(w[0], -0.5f);
  EXPECT_EQ(w[1], 0.0f);
  EXPECT_EQ(w[2], 0.6f);
  EXPECT_EQ(state[0], 3.0f);   // z
  EXPECT_EQ(state[1], 0.5f);
  EXPECT_EQ(state[2], -4.0f);
  EXPECT_EQ(state[3], 9.0f);   // n
  EXPECT_EQ(state[4], 0.25f);
  EXPECT_EQ(state[5], 16.0f);
  const float g2[3] = {4.0f, -0.5f, 0.0f};
  ASSERT_TRUE(opt.Apply(w, state.data(), g2, 3));
  EXPECT_EQ(w[0], -7.0f / 6.0f);
  EXPECT_EQ(state[0], 8.0f);
  EXPECT_EQ(state[3], 25.0f);
  EXPECT_EQ(w[1], 0.0f);
  EXPECT_EQ(state[1], 0.0f);
  EXPECT_EQ(state[4], 0.5f);
  EXPECT_EQ(w[2], 0.6f);
  EXPECT_EQ(state[2], -4.0f);
  EXPECT_EQ(state[5], 16.0f);
  EXPECT_NE(opt.Describe().find("FTRL (alpha 1, beta 1, l1 1, l2 0)"), std::string::npos) << opt.Describe();
}

// Against the paper's update in double over many steps, with λ2 and a
// staleness scale of the step (α·lr_scale).
TEST(OptimizerTest, FtrlMatchesDoubleReferenceOverManySteps) {
  OptimizerConfig c;
  c.set_type(FTRL);
  c.set_alpha(0.3f);
  c.set_beta(1.0f);
  c.set_l1(0.05f);
  c.set_l2(0.5f);
  Optimizer opt(c);
  constexpr int kN = 17;
  std::vector<float> w(kN, 0.0f), state(opt.StateFloats(kN));
  opt.InitState(state.data(), kN);
  std::vector<double> rw(kN, 0.0), rz(kN, 0.0), rn(kN, 0.0);
  const double alpha = 0.3 * 0.5, beta = 1.0, l1 = static_cast<double>(0.05f), l2 = 0.5;
  std::vector<float> g(kN);
  for (int step = 0; step < 200; ++step) {
    for (int i = 0; i < kN; ++i) g[i] = 0.05f * static_cast<float>(((step * 7 + i * 3) % 11) - 5);
    ASSERT_TRUE(opt.Apply(w.data(), state.data(), g.data(), kN, /*lr_scale=*/0.5f));
    for (int i = 0; i < kN; ++i) {
      const double gi = g[i];
      const double sigma = (std::sqrt(rn[i] + gi * gi) - std::sqrt(rn[i])) / alpha;
      rz[i] += gi - sigma * rw[i];
      rn[i] += gi * gi;
      rw[i] = std::fabs(rz[i]) <= l1 ? 0.0
                                     : -(rz[i] - (rz[i] > 0 ? 1 : -1) * l1) / ((beta + std::sqrt(rn[i])) / alpha + l2);
    }
  }
  for (int i = 0; i < kN; ++i) {
    EXPECT_NEAR(w[i], rw[i], 1e-4 * std::max(1.0, std::fabs(rw[i]))) << i;
    EXPECT_NEAR(state[i], rz[i], 1e-4 * std::max(1.0, std::fabs(rz[i]))) << i;
    EXPECT_NEAR(state[kN + i], rn[i], 1e-4 * std::max(1.0, rn[i])) << i;
    if (std::fabs(rz[i]) < 0.99 * l1) {
      EXPECT_EQ(w[i], 0.0f) << i;  // clear of the λ1 edge
    }
  }
}

// L1 makes exact zeros: a coordinate whose gradients keep |z| ≤ λ1 stays
// exactly 0 however many steps it takes, and one pushed past λ1 leaves 0.
TEST(OptimizerTest, FtrlL1KeepsSmallCoordinatesExactlyZero) {
  OptimizerConfig c;
  c.set_type(FTRL);
  c.set_alpha(0.1f);
  c.set_beta(1.0f);
  c.set_l1(2.0f);
  Optimizer opt(c);
  float w[2] = {0.0f, 0.0f};
  std::vector<float> state(opt.StateFloats(2));
  opt.InitState(state.data(), 2);
  for (int step = 0; step < 1000; ++step) {
    // Coordinate 0 alternates ±0.5 (|z| stays ≤ 0.5); coordinate 1 always 0.01.
    const float g[2] = {step % 2 == 0 ? 0.5f : -0.5f, 0.01f};
    ASSERT_TRUE(opt.Apply(w, state.data(), g, 2));
    ASSERT_EQ(w[0], 0.0f) << step;
    if (step < 190) {
      ASSERT_EQ(w[1], 0.0f) << step;  // z = 0.01·(step+1) < 2
    }
  }
  EXPECT_LT(w[1], 0.0f);  // z = 10 > λ1
}

// A coordinate's first step starts from the weight the table's initializer
// gave it: with a zero gradient the weight is unchanged.
TEST(OptimizerTest, FtrlStartsFromTheInitialWeight) {
  OptimizerConfig c;
  c.set_type(FTRL);
  c.set_alpha(1.0f);
  c.set_beta(1.0f);
  c.set_l1(0.5f);
  Optimizer opt(c);
  float w[2] = {0.25f, -2.0f};
  std::vector<float> state(opt.StateFloats(2));
  opt.InitState(state.data(), 2);
  const float g[2] = {0.0f, 0.0f};
  ASSERT_TRUE(opt.Apply(w, state.data(), g, 2));
  EXPECT_EQ(w[0], 0.25f);  // z = −0.25·(β/α) − λ1 = −0.75: w = −(−0.75 + 0.5)/1
  EXPECT_EQ(w[1], -2.0f);
  EXPECT_EQ(state[0], -0.75f);
  EXPECT_EQ(state[1], 2.5f);
}

}  // namespace
}  // namespace tether
