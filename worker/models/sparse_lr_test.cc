// SparseLr: gradients against central finite differences of an independent
// double-precision loss, the loss value, Predict, shape errors, and a
// separable toy problem learnt by plain SGD.
#include "worker/models/sparse_lr.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "compute/cpu_backend.h"

namespace tether {
namespace {

CsrMatrix MakeCsr(int64_t cols, const std::vector<std::vector<std::pair<uint32_t, float>>>& rows) {
  CsrMatrix m;
  m.cols = cols;
  for (const auto& r : rows) {
    std::vector<uint32_t> idx;
    std::vector<float> val;
    for (const auto& [c, v] : r) {
      idx.push_back(c);
      val.push_back(v);
    }
    m.AppendRow(idx.data(), val.data(), idx.size());
  }
  return m;
}

// Binary labels in the trainer's form: N × 1, entry 0 on positives.
CsrMatrix MakeBinary(const std::vector<int>& y) {
  CsrMatrix m;
  m.cols = 1;
  const uint32_t zero = 0;
  const float one = 1.0f;
  for (int v : y) m.AppendRow(&zero, &one, v > 0 ? 1 : 0);
  return m;
}

double ReferenceLoss(const CsrMatrix& x, const std::vector<int>& y, const std::vector<double>& w, double b) {
  double total = 0;
  for (int64_t r = 0; r < x.rows; ++r) {
    double s = b;
    for (int64_t q = x.row_ptr[r]; q < x.row_ptr[r + 1]; ++q) s += x.values[q] * w[x.col_idx[q]];
    // softplus(s) − y·s, written stably.
    total += std::max(s, 0.0) + std::log1p(std::exp(-std::fabs(s))) - (y[r] > 0 ? s : 0.0);
  }
  return total / x.rows;
}

TEST(SparseLrTest, GradientsMatchFiniteDifferences) {
  // 6 rows over U = 5 local features; row 3 has no features at all.
  const CsrMatrix x = MakeCsr(5, {{{0, 1.0f}, {3, -0.5f}},
                                  {{1, 0.7f}, {2, 1.3f}, {4, 2.0f}},
                                  {{4, -1.1f}},
                                  {},
                                  {{0, 0.4f}, {2, -0.3f}, {3, 1.6f}},
                                  {{1, -1.2f}, {4, 0.8f}}});
  const std::vector<int> y{1, 0, 1, 1, 0, 0};
  const CsrMatrix labels = MakeBinary(y);
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 0.8f);
  std::vector<float> w(5), b{normal(rng)};
  for (float& v : w) v = normal(rng);
  std::vector<double> wd(w.begin(), w.end());
  double bd = b[0];

  CpuBackend backend(1);
  SparseLr model(/*num_features=*/100, &backend);
  SparseLrGrads g;
  StatusOr<float> loss = model.ComputeGradients(x, ViewOf(labels), {w.data(), 5, b.data()}, &g);
  ASSERT_TRUE(loss.ok()) << loss.status().ToString();
  EXPECT_NEAR(loss.value(), ReferenceLoss(x, y, wd, bd), 1e-6);
  ASSERT_EQ(g.w.size(), 5u);
  ASSERT_EQ(g.b.size(), 1u);

  const double h = 1e-6;
  double max_fd = 0;
  for (int j = 0; j < 5; ++j) {
    const double saved = wd[j];
    wd[j] = saved + h;
    const double up = ReferenceLoss(x, y, wd, bd);
    wd[j] = saved - h;
    const double down = ReferenceLoss(x, y, wd, bd);
    wd[j] = saved;
    const double fd = (up - down) / (2 * h);
    EXPECT_NEAR(g.w[j], fd, 1e-6 + 1e-5 * std::fabs(fd)) << "w[" << j << "]";
    max_fd = std::max(max_fd, std::fabs(fd));
  }
  const double fd_b = (ReferenceLoss(x, y, wd, bd + h) - ReferenceLoss(x, y, wd, bd - h)) / (2 * h);
  EXPECT_NEAR(g.b[0], fd_b, 1e-6 + 1e-5 * std::fabs(fd_b));
  EXPECT_GT(max_fd, 1e-2);  // not a vacuous check
  EXPECT_GT(std::fabs(fd_b), 1e-3);
}

TEST(SparseLrTest, PredictGivesLogits) {
  const CsrMatrix x = MakeCsr(3, {{{0, 2.0f}, {2, 1.0f}}, {}, {{1, -1.0f}}});
  const std::vector<float> w{0.5f, 3.0f, -1.0f}, b{0.25f};
  CpuBackend backend(1);
  SparseLr model(3, &backend);
  std::vector<float> scores;
  ASSERT_TRUE(model.Predict(x, {w.data(), 3, b.data()}, &scores).ok());
  EXPECT_EQ(scores, (std::vector<float>{0.25f + 1.0f - 1.0f, 0.25f, 0.25f - 3.0f}));
}

TEST(SparseLrTest, ShapeErrors) {
  const CsrMatrix x = MakeCsr(2, {{{0, 1.0f}}, {{1, 1.0f}}});
  const CsrMatrix y = MakeBinary({1, 0});
  const std::vector<float> w{0, 0}, b{0};
  CpuBackend backend(1);
  SparseLr model(10, &backend);
  SparseLrGrads g;
  EXPECT_FALSE(model.ComputeGradients(x, ViewOf(y), {w.data(), 1, b.data()}, &g).ok());  // U mismatch
  EXPECT_FALSE(model.ComputeGradients(x, ViewOf(MakeBinary({1})), {w.data(), 2, b.data()}, &g).ok());
  EXPECT_FALSE(model.ComputeGradients(x, ViewOf(y), {w.data(), 2, nullptr}, &g).ok());
  EXPECT_FALSE(model.ComputeGradients(CsrMatrix{}, ViewOf(CsrMatrix{}), {w.data(), 0, b.data()}, &g).ok());
  SparseLr narrow(1, &backend);
  StatusOr<float> too_wide = narrow.ComputeGradients(x, ViewOf(y), {w.data(), 2, b.data()}, &g);
  ASSERT_FALSE(too_wide.ok());
  EXPECT_NE(too_wide.status().message().find("exceed num_features"), std::string::npos);
}

TEST(SparseLrTest, LearnsASeparableProblemWithSgd) {
  // Label = feature 0 present; feature 1 is noise present everywhere.
  std::vector<std::vector<std::pair<uint32_t, float>>> rows;
  std::vector<int> y;
  for (int i = 0; i < 40; ++i) {
    if (i % 2 == 0) {
      rows.push_back({{0, 1.0f}, {1, 1.0f}});
    } else {
      rows.push_back({{1, 1.0f}});
    }
    y.push_back(i % 2 == 0);
  }
  const CsrMatrix x = MakeCsr(2, rows), labels = MakeBinary(y);
  std::vector<float> w{0, 0}, b{0};
  CpuBackend backend(1);
  SparseLr model(2, &backend);
  SparseLrGrads g;
  float first = 0, last = 0;
  for (int step = 0; step < 200; ++step) {
    StatusOr<float> loss = model.ComputeGradients(x, ViewOf(labels), {w.data(), 2, b.data()}, &g);
    ASSERT_TRUE(loss.ok());
    if (step == 0) first = loss.value();
    last = loss.value();
    for (int j = 0; j < 2; ++j) w[j] -= 1.0f * g.w[j];
    b[0] -= 1.0f * g.b[0];
  }
  EXPECT_NEAR(first, std::log(2.0f), 1e-6);  // zero weights: p = 1/2 everywhere
  EXPECT_LT(last, 0.05f);
  EXPECT_GT(w[0], 2.0f);
}

}  // namespace
}  // namespace tether
