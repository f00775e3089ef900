// DenseMlp: gradients of every layer against central finite differences of
// an independent double-precision forward pass (one and two hidden layers),
// Predict, DensifyRows, shape errors, buffer reuse and a learnable toy
// problem under plain SGD.
#include "worker/models/dense_mlp.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "compute/cpu_backend.h"

namespace tether {
namespace {

CsrMatrix OneHot(const std::vector<int>& cls, int64_t classes) {
  CsrMatrix m;
  m.cols = classes;
  const float one = 1.0f;
  for (int c : cls) {
    const auto u = static_cast<uint32_t>(c);
    m.AppendRow(&u, &one, c >= 0 ? 1 : 0);  // c < 0: a row without a class
  }
  return m;
}

struct DoubleNet {
  std::vector<int64_t> widths;
  std::vector<std::vector<double>> w, b;
  float dropout = 0.0f, label_smoothing = 0.0f;
  uint64_t seed = 0;  // the pass's dropout seed (DenseMlp::set_dropout_seed)
};

// Mean softmax cross-entropy straight from the definitions.
double ReferenceLoss(const DoubleNet& net, const std::vector<double>& x, int64_t batch, const std::vector<int>& cls) {
  const int n = static_cast<int>(net.widths.size()) - 1;
  double total = 0;
  for (int64_t r = 0; r < batch; ++r) {
    std::vector<double> a(x.begin() + r * net.widths[0], x.begin() + (r + 1) * net.widths[0]);
    for (int i = 0; i < n; ++i) {
      std::vector<double> z(net.b[i]);
      for (int64_t o = 0; o < net.widths[i + 1]; ++o)
        for (int64_t k = 0; k < net.widths[i]; ++k) z[o] += a[k] * net.w[i][k * net.widths[i + 1] + o];
      if (i + 1 < n)
        for (double& v : z) v = std::max(v, 0.0);
      if (i + 1 < n && net.dropout > 0) {
        // Layer i's mask: DropoutKeeps on the layer's seed, element r·width + o.
        const uint64_t layer_seed = DropoutHash(net.seed, static_cast<uint64_t>(i));
        const float scale = 1.0f / (1.0f - net.dropout);
        for (int64_t o = 0; o < net.widths[i + 1]; ++o)
          if (!DropoutKeeps(layer_seed, static_cast<uint64_t>(r * net.widths[i + 1] + o), DropoutThreshold(net.dropout)))
            z[o] = 0;
          else
            z[o] *= scale;
      }
      a = z;
    }
    if (cls[r] < 0) continue;
    double mx = a[0];
    for (double v : a) mx = std::max(mx, v);
    double sum = 0, mean = 0;
    for (double v : a) sum += std::exp(v - mx), mean += v / static_cast<double>(a.size());
    const double eps = net.label_smoothing;
    total += mx + std::log(sum) - (1 - eps) * a[cls[r]] - eps * mean;
  }
  return total / batch;
}

void CheckGradients(const std::vector<int64_t>& widths, float dropout = 0.0f, float label_smoothing = 0.0f) {
  std::mt19937 rng(17);
  std::normal_distribution<double> normal(0.0, 0.8);
  const int64_t batch = 5;
  const int n = static_cast<int>(widths.size()) - 1;
  DoubleNet net{widths, {}, {}, dropout, label_smoothing, /*seed=*/31};
  for (int i = 0; i < n; ++i) {
    net.w.emplace_back(widths[i] * widths[i + 1]);
    net.b.emplace_back(widths[i + 1]);
    for (double& v : net.w[i]) v = static_cast<float>(normal(rng));
    for (double& v : net.b[i]) v = static_cast<float>(normal(rng));
  }
  std::vector<double> xd(batch * widths[0]);
  for (double& v : xd) v = static_cast<float>(normal(rng));
  const std::vector<int> cls{2, 0, -1, 1, 2};  // row 2 has no class
  const CsrMatrix y = OneHot(cls, widths.back());

  std::vector<std::vector<float>> wf(n), bf(n);
  DenseMlpParams p;
  for (int i = 0; i < n; ++i) {
    wf[i].assign(net.w[i].begin(), net.w[i].end());
    bf[i].assign(net.b[i].begin(), net.b[i].end());
    p.w.push_back(wf[i].data());
    p.b.push_back(bf[i].data());
  }
  const std::vector<float> x(xd.begin(), xd.end());
  CpuBackend backend(1);
  DenseMlp model(widths, &backend);
  model.set_regularization(dropout, label_smoothing);
  model.set_dropout_seed(net.seed);
  DenseMlpGrads g;
  StatusOr<float> loss = model.ComputeGradients(x.data(), batch, ViewOf(y), p, &g);
  ASSERT_TRUE(loss.ok()) << loss.status().ToString();
  const double ref = ReferenceLoss(net, xd, batch, cls);
  EXPECT_NEAR(loss.value(), ref, 1e-5 * std::max(1.0, ref));

  // Central differences in double: exact to ~1e-9; the tolerance covers
  // the model's float arithmetic.
  const double h = 1e-6;
  auto check = [&](std::vector<double>* param, const std::vector<float>& grad, const std::string& name) {
    ASSERT_EQ(grad.size(), param->size()) << name;
    double max_fd = 0;
    for (size_t k = 0; k < param->size(); ++k) {
      const double saved = (*param)[k];
      (*param)[k] = saved + h;
      const double up = ReferenceLoss(net, xd, batch, cls);
      (*param)[k] = saved - h;
      const double down = ReferenceLoss(net, xd, batch, cls);
      (*param)[k] = saved;
      const double fd = (up - down) / (2 * h);
      EXPECT_NEAR(grad[k], fd, 1e-6 + 1e-5 * std::fabs(fd)) << name << "[" << k << "]";
      max_fd = std::max(max_fd, std::fabs(fd));
    }
    EXPECT_GT(max_fd, 1e-2) << name;  // not a vacuous check
  };
  for (int i = 0; i < n; ++i) {
    check(&net.w[i], g.w[i], "w" + std::to_string(i + 1));
    check(&net.b[i], g.b[i], "b" + std::to_string(i + 1));
  }
}

TEST(DenseMlpTest, OneHiddenLayerGradientsMatchFiniteDifferences) { CheckGradients({4, 6, 3}); }
TEST(DenseMlpTest, TwoHiddenLayersGradientsMatchFiniteDifferences) { CheckGradients({5, 7, 4, 3}); }
TEST(DenseMlpTest, NoHiddenLayerIsSoftmaxRegression) { CheckGradients({6, 3}); }
// Dropout on both hidden layers (each its own mask) and label smoothing.
TEST(DenseMlpTest, DropoutAndSmoothingGradientsMatchFiniteDifferences) { CheckGradients({5, 7, 4, 3}, 0.3f, 0.2f); }

TEST(DenseMlpTest, PredictMatchesHandComputation) {
  // 2 inputs → 2 hidden (ReLU) → 2 classes.
  const std::vector<float> w1{1, -1, 2, 1}, b1{0, 0.5f}, w2{1, 0, 0, 1}, b2{0.1f, -0.1f};
  const std::vector<float> x{1, 1, -1, 0};
  CpuBackend backend(1);
  DenseMlp model({2, 2, 2}, &backend);
  std::vector<float> scores;
  ASSERT_TRUE(model.Predict(x.data(), 2, {{w1.data(), w2.data()}, {b1.data(), b2.data()}}, &scores).ok());
  // Row 0: z1 = (1·1 + 1·2, 1·−1 + 1·1 + 0.5) = (3, 0.5); row 1: (−1, 1.5) → relu (0, 1.5).
  EXPECT_EQ(scores, (std::vector<float>{3.1f, 0.4f, 0.1f, 1.4f}));
}

TEST(DenseMlpTest, DensifyRowsAndErrors) {
  CsrMatrix x;
  x.cols = 4;
  const uint32_t idx[] = {1, 3};
  const float val[] = {2.0f, -1.0f};
  x.AppendRow(idx, val, 2);
  x.AppendRow(nullptr, nullptr, 0);
  x.AppendRow(idx + 1, val + 1, 1);
  std::vector<float> dense(99, 7.0f);
  DensifyRows(x, 1, 3, &dense);
  EXPECT_EQ(dense, (std::vector<float>{0, 0, 0, 0, 0, 0, 0, -1}));

  CpuBackend backend(1);
  DenseMlp model({4, 3, 2}, &backend);
  DenseMlpGrads g;
  const std::vector<float> w1(12), b1(3), w2(6), b2(2), in(8);
  const DenseMlpParams p{{w1.data(), w2.data()}, {b1.data(), b2.data()}};
  EXPECT_FALSE(model.ComputeGradients(in.data(), 2, ViewOf(OneHot({0}, 2)), p, &g).ok());  // 1 label row for 2
  EXPECT_FALSE(model.ComputeGradients(in.data(), 2, ViewOf(OneHot({0, 1}, 3)), p, &g).ok());  // 3 classes > 2
  EXPECT_FALSE(model.ComputeGradients(in.data(), 0, ViewOf(OneHot({}, 2)), p, &g).ok());
  EXPECT_FALSE(model.ComputeGradients(in.data(), 2, ViewOf(OneHot({0, 1}, 2)), {{w1.data()}, {b1.data()}}, &g).ok());
  EXPECT_FALSE(
      model.ComputeGradients(in.data(), 2, ViewOf(OneHot({0, 1}, 2)), {{w1.data(), nullptr}, {b1.data(), b2.data()}}, &g)
          .ok());
  StatusOr<float> ok = model.ComputeGradients(in.data(), 2, ViewOf(OneHot({0, 1}, 2)), p, &g);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_NEAR(ok.value(), std::log(2.0f), 1e-6);  // all-zero weights: uniform softmax
}

TEST(DenseMlpTest, GradientBuffersAreReusedAcrossCalls) {
  CpuBackend backend(1);
  DenseMlp model({3, 8, 2}, &backend);
  std::vector<float> w1(24, 0.1f), b1(8), w2(16, -0.2f), b2(2), x(3 * 16, 0.5f);
  const DenseMlpParams p{{w1.data(), w2.data()}, {b1.data(), b2.data()}};
  std::vector<int> cls(16, 1);
  const CsrMatrix y = OneHot(cls, 2);
  DenseMlpGrads g;
  ASSERT_TRUE(model.ComputeGradients(x.data(), 16, ViewOf(y), p, &g).ok());
  const float* w1_grad = g.w[0].data();
  const float* b2_grad = g.b[1].data();
  ASSERT_TRUE(model.ComputeGradients(x.data(), 8, RowSliceOf(y, 0, 8), p, &g).ok());
  EXPECT_EQ(g.w[0].data(), w1_grad);
  EXPECT_EQ(g.b[1].data(), b2_grad);
}

TEST(DenseMlpTest, LearnsXorWithSgd) {
  // XOR needs the hidden layer: 4 points, 2 classes.
  const std::vector<float> x{0, 0, 0, 1, 1, 0, 1, 1};
  const CsrMatrix y = OneHot({0, 1, 1, 0}, 2);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> w1(2 * 8), b1(8), w2(8 * 2), b2(2);
  for (auto* v : {&w1, &w2}) {
    for (float& e : *v) e = u(rng);
  }
  CpuBackend backend(1);
  DenseMlp model({2, 8, 2}, &backend);
  DenseMlpGrads g;
  const DenseMlpParams p{{w1.data(), w2.data()}, {b1.data(), b2.data()}};
  float last = 0;
  for (int step = 0; step < 2000; ++step) {
    StatusOr<float> loss = model.ComputeGradients(x.data(), 4, ViewOf(y), p, &g);
    ASSERT_TRUE(loss.ok());
    last = loss.value();
    std::vector<float>* params[] = {&w1, &b1, &w2, &b2};
    const std::vector<float>* grads[] = {&g.w[0], &g.b[0], &g.w[1], &g.b[1]};
    for (int t = 0; t < 4; ++t)
      for (size_t k = 0; k < params[t]->size(); ++k) (*params[t])[k] -= 0.5f * (*grads[t])[k];
  }
  EXPECT_LT(last, 0.05f);
  std::vector<float> scores;
  ASSERT_TRUE(model.Predict(x.data(), 4, p, &scores).ok());
  EXPECT_GT(scores[0], scores[1]);
  EXPECT_LT(scores[2], scores[3]);
  EXPECT_LT(scores[4], scores[5]);
  EXPECT_GT(scores[6], scores[7]);
}

}  // namespace
}  // namespace tether
