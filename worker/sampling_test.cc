#include "worker/sampling.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <set>

namespace tether {
namespace {

CsrMatrix Labels(const std::vector<std::vector<uint32_t>>& rows, int64_t cols) {
  CsrMatrix m;
  m.cols = cols;
  for (const auto& r : rows) {
    std::vector<float> ones(r.size(), 1.0f);
    m.AppendRow(r.data(), ones.data(), r.size());  // also counts the row
  }
  return m;
}

TEST(EpochOrderTest, IsAPermutationThatDependsOnSeedRankAndEpoch) {
  std::vector<int64_t> a, b, c, d;
  EpochOrder(1, 0, 0, 1000, &a);
  EpochOrder(1, 0, 0, 1000, &b);
  EpochOrder(1, 0, 1, 1000, &c);
  EpochOrder(1, 1, 0, 1000, &d);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_NE(a, d);
  std::vector<int64_t> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 1000; ++i) ASSERT_EQ(sorted[i], i);
}

TEST(SampleOutputLabelsTest, KeepsPositivesAddsUniformNegativesAndRemaps) {
  const CsrMatrix y = Labels({{3, 17}, {}, {17, 99990}}, 100000);
  std::mt19937_64 rng(7);
  std::vector<uint64_t> keys;
  CsrMatrix y_local;
  ASSERT_TRUE(SampleOutputLabels(y, 100000, 64, &rng, &keys, &y_local).ok());
  ASSERT_EQ(keys.size(), 64u);
  EXPECT_TRUE(std::is_sorted(keys.begin(), keys.end()));
  EXPECT_EQ(std::set<uint64_t>(keys.begin(), keys.end()).size(), 64u);
  ASSERT_EQ(y_local.rows, 3);
  EXPECT_EQ(y_local.cols, 64);
  EXPECT_EQ(y_local.row_ptr, y.row_ptr);
  for (int64_t p = 0; p < y.nnz(); ++p) EXPECT_EQ(keys[y_local.col_idx[p]], y.col_idx[p]);
  for (uint64_t k : keys) EXPECT_LT(k, 100000u);
}

TEST(SampleOutputLabelsTest, AllLabelsWhenKCoversThem) {
  const CsrMatrix y = Labels({{4}, {0, 2}}, 5);
  std::mt19937_64 rng(1);
  std::vector<uint64_t> keys;
  CsrMatrix y_local;
  ASSERT_TRUE(SampleOutputLabels(y, 5, 64, &rng, &keys, &y_local).ok());
  EXPECT_EQ(keys, (std::vector<uint64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(y_local.col_idx, y.col_idx);  // identity remap: the full softmax
}

TEST(SampleOutputLabelsTest, MorePositivesThanKKeepsThemAll) {
  const CsrMatrix y = Labels({{1, 5, 9}, {2, 7}}, 1000);
  std::mt19937_64 rng(1);
  std::vector<uint64_t> keys;
  CsrMatrix y_local;
  ASSERT_TRUE(SampleOutputLabels(y, 1000, 3, &rng, &keys, &y_local).ok());
  EXPECT_EQ(keys, (std::vector<uint64_t>{1, 2, 5, 7, 9}));
}

TEST(SampleOutputLabelsTest, WorkersDrawDifferentNegatives) {
  // Rank 0 keeps the single-worker seed, so one-worker runs do not change.
  EXPECT_EQ(NegativeSamplingSeed(1, 0), 1 * 0x9E3779B97F4A7C15ull + 17);
  std::set<uint64_t> seeds;
  for (int r = 0; r < 64; ++r) seeds.insert(NegativeSamplingSeed(1, r));
  EXPECT_EQ(seeds.size(), 64u);
  // The same minibatch on two workers: same positives, different negatives.
  const CsrMatrix y = Labels({{3}, {10, 11}}, 1000);
  std::mt19937_64 rng0(NegativeSamplingSeed(1, 0)), rng1(NegativeSamplingSeed(1, 1));
  std::vector<uint64_t> k0, k1;
  CsrMatrix l0, l1;
  ASSERT_TRUE(SampleOutputLabels(y, 1000, 50, &rng0, &k0, &l0).ok());
  ASSERT_TRUE(SampleOutputLabels(y, 1000, 50, &rng1, &k1, &l1).ok());
  ASSERT_EQ(k0.size(), 50u);
  ASSERT_EQ(k1.size(), 50u);
  for (uint64_t pos : {3u, 10u, 11u}) {
    EXPECT_TRUE(std::binary_search(k0.begin(), k0.end(), pos));
    EXPECT_TRUE(std::binary_search(k1.begin(), k1.end(), pos));
  }
  std::vector<uint64_t> common;
  std::set_intersection(k0.begin(), k0.end(), k1.begin(), k1.end(), std::back_inserter(common));
  // 47 uniform negatives each out of 997: a handful shared by chance, not 47.
  EXPECT_LT(common.size(), 3u + 15u);
}

TEST(SampleOutputLabelsTest, RejectsBadArguments) {
  const CsrMatrix y = Labels({{1000}}, 1001);
  std::mt19937_64 rng(1);
  std::vector<uint64_t> keys;
  CsrMatrix y_local;
  EXPECT_EQ(SampleOutputLabels(y, 1000, 10, &rng, &keys, &y_local).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(SampleOutputLabels(y, 2000, 0, &rng, &keys, &y_local).code(), Status::Code::kInvalidArgument);
}

}  // namespace
}  // namespace tether
