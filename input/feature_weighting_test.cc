#include "input/feature_weighting.h"

#include <gtest/gtest.h>

#include <cmath>

#include "input/reader.h"

namespace tether {
namespace {

Dataset Tiny() {
  // Four rows of an XMC file: feature 0 in every row, 1 in two, 2 in one, 3 in none.
  const std::string text =
      "4 4 2\n"
      "0 0:1 1:2\n"
      "1 0:1 1:1 2:4\n"
      "0 0:3\n"
      "1 0:1\n";
  ReadOptions o;
  o.format = DataFormat::kXmc;
  o.index_base = 0;
  StatusOr<Dataset> d = ParseDataset(text, "tiny.txt", o);
  EXPECT_TRUE(d.ok()) << d.status().ToString();
  return std::move(d).value();
}

// idf(f) = ln((1 + N) / (1 + df)) + 1 with N = 4: df = [4, 2, 1, 0].
TEST(FeatureWeightingTest, TfIdfWeightsOnATinyFile) {
  Dataset d = Tiny();
  std::vector<uint64_t> df;
  CountDocumentFrequencies(d.features, &df);
  EXPECT_EQ(df, (std::vector<uint64_t>{4, 2, 1, 0}));
  const std::vector<float> idf = InverseDocumentFrequencies(df, d.features.rows);
  ASSERT_EQ(idf.size(), 4u);
  EXPECT_EQ(idf[0], 1.0f);                                   // ln(5/5) + 1
  EXPECT_EQ(idf[1], static_cast<float>(std::log(5.0 / 3.0) + 1.0));  // 1.5108256
  EXPECT_EQ(idf[2], static_cast<float>(std::log(2.5) + 1.0));        // 1.9162907
  EXPECT_EQ(idf[3], static_cast<float>(std::log(5.0) + 1.0));        // 2.6094379: never seen
  ASSERT_TRUE(ApplyFeatureWeights(idf, &d.features).ok());
  // Row 1: 0:1 1:1 2:4 → [1, 1.5108256, 4 × 1.9162907].
  EXPECT_EQ(d.features.values[2], 1.0f);
  EXPECT_EQ(d.features.values[3], idf[1]);
  EXPECT_EQ(d.features.values[4], 4.0f * idf[2]);
  EXPECT_EQ(d.features.values[0], 1.0f);
  EXPECT_EQ(d.features.values[1], 2.0f * idf[1]);
}

// Shares counted one after the other sum to the whole file's counts.
TEST(FeatureWeightingTest, SharesAddUp) {
  const Dataset d = Tiny();
  std::vector<uint64_t> df;
  CountDocumentFrequencies(SliceRows(d.features, 0, 2), &df);
  CountDocumentFrequencies(SliceRows(d.features, 2, 4), &df);
  EXPECT_EQ(df, (std::vector<uint64_t>{4, 2, 1, 0}));
}

TEST(FeatureWeightingTest, ColumnWithoutWeightIsRefusedUntouched) {
  Dataset d = Tiny();
  const std::vector<float> before = d.features.values;
  const Status st = ApplyFeatureWeights({2.0f, 2.0f}, &d.features);
  EXPECT_EQ(st.message(), "feature weights: column 2 has no weight (2 weights)");
  EXPECT_EQ(d.features.values, before);
}

}  // namespace
}  // namespace tether
