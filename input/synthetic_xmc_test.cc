#include "input/synthetic_xmc.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <unistd.h>

#include "input/reader.h"
#include "tests/testing/temp_dir.h"

namespace tether {
namespace {

SyntheticXmcOptions Small() {
  SyntheticXmcOptions o;
  o.num_features = 2000;
  o.num_labels = 1000;
  o.features_per_row = 40;
  o.labels_per_row = 4;
  o.label_exponent = 1.0;
  o.seed = 7;
  return o;
}

TEST(SyntheticXmcTest, RowsAreValidAndMeansMatchTheOptions) {
  SyntheticXmcGenerator gen(Small());
  CsrMatrix x, y;
  gen.Generate(20000, &x, &y);
  ASSERT_EQ(x.rows, 20000);
  ASSERT_EQ(y.rows, 20000);
  EXPECT_EQ(x.cols, 2000);
  EXPECT_EQ(y.cols, 1000);
  for (int64_t r = 0; r < x.rows; ++r) {
    ASSERT_GE(y.row_ptr[r + 1] - y.row_ptr[r], 1) << "row " << r << " has no label";
    ASSERT_GE(x.row_ptr[r + 1] - x.row_ptr[r], 1) << "row " << r << " has no feature";
    double sq = 0;
    for (int64_t p = x.row_ptr[r]; p < x.row_ptr[r + 1]; ++p) {
      ASSERT_LT(x.col_idx[p], 2000u);
      if (p > x.row_ptr[r]) {
        ASSERT_LT(x.col_idx[p - 1], x.col_idx[p]);
      }
      sq += double{x.values[p]} * x.values[p];
    }
    ASSERT_NEAR(sq, 1.0, 1e-5);
    for (int64_t p = y.row_ptr[r] + 1; p < y.row_ptr[r + 1]; ++p) ASSERT_LT(y.col_idx[p - 1], y.col_idx[p]);
  }
  // k = 1 + Poisson(3): mean 4. Feature draws collapse a little.
  EXPECT_NEAR(static_cast<double>(y.nnz()) / y.rows, 4.0, 0.1);
  const double nnz = static_cast<double>(x.nnz()) / x.rows;
  EXPECT_GT(nnz, 30.0);
  EXPECT_LE(nnz, 40.5);
}

TEST(SyntheticXmcTest, LabelFrequenciesFollowThePowerLaw) {
  SyntheticXmcGenerator gen(Small());
  CsrMatrix x, y;
  gen.Generate(20000, &x, &y);
  std::vector<double> freq(1000, 0);
  for (uint32_t l : y.col_idx) freq[l] += 1;
  std::sort(freq.begin(), freq.end(), std::greater<double>());
  // Least-squares slope of log frequency against log rank over ranks 2..50,
  // where counts are large; Zipf with exponent 1 gives about −1 (drawing
  // without replacement within a row flattens the head a little).
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  int n = 0;
  for (int r = 1; r < 50; ++r) {
    const double lx = std::log(r + 1.0), ly = std::log(freq[r]);
    sx += lx;
    sy += ly;
    sxx += lx * lx;
    sxy += lx * ly;
    ++n;
  }
  const double slope = (n * sxy - sx * sy) / (n * sxx - sx * sx);
  EXPECT_NEAR(slope, -1.0, 0.15);
  // The head dominates: the top 1% of labels carry more than a quarter of
  // all label occurrences (uniform frequencies would give 1%).
  double top = 0, total = 0;
  for (size_t i = 0; i < freq.size(); ++i) {
    total += freq[i];
    if (i < 10) top += freq[i];
  }
  EXPECT_GT(top / total, 0.25);
}

TEST(SyntheticXmcTest, DeterministicPerSeed) {
  CsrMatrix x1, y1, x2, y2, x3, y3;
  SyntheticXmcGenerator(Small()).Generate(500, &x1, &y1);
  SyntheticXmcGenerator(Small()).Generate(500, &x2, &y2);
  SyntheticXmcOptions other = Small();
  other.seed = 8;
  SyntheticXmcGenerator(other).Generate(500, &x3, &y3);
  EXPECT_EQ(x1.col_idx, x2.col_idx);
  EXPECT_EQ(y1.col_idx, y2.col_idx);
  EXPECT_EQ(x1.values, x2.values);
  EXPECT_NE(y1.col_idx, y3.col_idx);
}

TEST(SyntheticXmcTest, FileReadsBackThroughTheXmcReader) {
  testing::ScopedTempDir dir;
  const std::string path = dir.File("synthetic.txt");
  SyntheticXmcGenerator writer(Small());
  ASSERT_TRUE(writer.WriteXmcFile(300, path).ok());
  CsrMatrix x, y;
  SyntheticXmcGenerator(Small()).Generate(300, &x, &y);
  ReadOptions opts;
  opts.format = DataFormat::kXmc;
  opts.index_base = 0;
  auto d = ReadDataset(path, opts);
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->features.rows, 300);
  EXPECT_EQ(d->features.cols, 2000);
  EXPECT_EQ(d->labels.cols, 1000);
  EXPECT_EQ(d->labels.col_idx, y.col_idx);
  EXPECT_EQ(d->features.col_idx, x.col_idx);
  ASSERT_EQ(d->features.values.size(), x.values.size());
  for (size_t i = 0; i < x.values.size(); ++i) ASSERT_NEAR(d->features.values[i], x.values[i], 1e-6);
}

TEST(SyntheticXmcTest, ShapesAndValidation) {
  SyntheticXmcOptions o;
  int64_t train = 0, test = 0;
  ASSERT_TRUE(ApplySyntheticShape("amazon670k", &o, &train, &test).ok());
  EXPECT_EQ(o.num_features, 135909);
  EXPECT_EQ(o.num_labels, 670091);
  EXPECT_EQ(train, 490449);
  EXPECT_EQ(ApplySyntheticShape("amazon", &o, &train, &test).code(), Status::Code::kInvalidArgument);
  o.signal_fraction = 1.5;
  EXPECT_EQ(ValidateSyntheticXmcOptions(o).code(), Status::Code::kInvalidArgument);
}

}  // namespace
}  // namespace tether
