#include "server/model_average.h"

#include <gtest/gtest.h>

#include <map>
#include <vector>

namespace tether {
namespace {

// What the merge applied: table → key → θ (starting at 0), and dense slices.
struct Model {
  std::map<uint32_t, std::map<uint64_t, std::vector<float>>> rows;
  std::map<uint32_t, std::vector<float>> dense;
  int row_calls = 0;
  ModelAverager::RowsFn Rows() {
    return [this](uint32_t t, const uint64_t* keys, uint64_t n, uint32_t dim, const float* step) {
      ++row_calls;
      for (uint64_t i = 0; i < n; ++i) {
        if (i > 0) {
          EXPECT_LT(keys[i - 1], keys[i]) << "keys must come sorted";
        }
        auto& r = rows[t][keys[i]];
        r.resize(dim, 0.0f);
        for (uint32_t j = 0; j < dim; ++j) r[j] += step[i * dim + j];
      }
      return Status::OK();
    };
  }
  ModelAverager::DenseFn Dense() {
    return [this](uint32_t t, const float* step, uint64_t n) {
      auto& d = dense[t];
      d.resize(n, 0.0f);
      for (uint64_t j = 0; j < n; ++j) d[j] += step[j];
      return Status::OK();
    };
  }
};

TEST(ModelAverager, WeightsByUpdates) {
  ModelAverager avg(0.0);
  Model model;
  // Worker 0: 3 updates, Δ(key 7) = (3, 6); worker 1: 1 update, Δ(key 7) =
  // (-1, 2), Δ(key 9) = (4, 4).
  const uint64_t k0[] = {7};
  const float d0[] = {3, 6};
  const uint64_t k1[] = {7, 9};
  const float d1[] = {-1, 2, 4, 4};
  ASSERT_TRUE(avg.AddRows(0, 0, 2, k0, 1, 2, d0).ok());
  ASSERT_TRUE(avg.AddRows(1, 0, 2, k1, 2, 2, d1).ok());
  ASSERT_TRUE(avg.Complete(0, 0, 3).ok());
  // Round 0 not closed yet (worker 1 has not ended it): nothing applied.
  auto none = avg.MergeThrough(0, model.Rows(), model.Dense());
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, 0);
  ASSERT_TRUE(avg.Complete(1, 0, 1).ok());
  auto merged = avg.MergeThrough(1, model.Rows(), model.Dense());
  ASSERT_TRUE(merged.ok()) << merged.status().ToString();
  EXPECT_EQ(*merged, 1);
  // key 7: (3·(3,6) + 1·(-1,2)) / 4 = (2, 5); key 9: (4,4)/4 = (1, 1).
  EXPECT_FLOAT_EQ(model.rows[2][7][0], 2.0f);
  EXPECT_FLOAT_EQ(model.rows[2][7][1], 5.0f);
  EXPECT_FLOAT_EQ(model.rows[2][9][0], 1.0f);
  EXPECT_FLOAT_EQ(model.rows[2][9][1], 1.0f);
  EXPECT_EQ(avg.rounds_merged(), 1);
  EXPECT_EQ(avg.deltas_merged(), 2u);
  EXPECT_EQ(avg.deltas_discarded(), 0u);
  EXPECT_EQ(avg.next_round(), 1);
  // A late delta for the merged round is refused, naming the round.
  const Status late = avg.AddRows(0, 0, 2, k0, 1, 2, d0);
  EXPECT_EQ(late.code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(late.message().find("round 0"), std::string::npos) << late.message();
}

TEST(ModelAverager, DenseAndRowsTogether) {
  ModelAverager avg(0.0);
  Model model;
  const float a[] = {2, 4, 6};
  const float b[] = {4, 0, 0};
  ASSERT_TRUE(avg.AddDense(0, 5, 1, a, 3).ok());
  ASSERT_TRUE(avg.AddDense(1, 5, 1, b, 3).ok());
  ASSERT_TRUE(avg.Complete(0, 5, 1).ok());
  ASSERT_TRUE(avg.Complete(1, 5, 1).ok());
  ASSERT_EQ(*avg.MergeThrough(6, model.Rows(), model.Dense()), 1);
  EXPECT_EQ(model.dense[1], (std::vector<float>{3, 2, 3}));
  EXPECT_EQ(model.row_calls, 0);
}

TEST(ModelAverager, MomentumCarriesVelocityToUntouchedRows) {
  ModelAverager avg(0.5);
  Model model;
  const uint64_t k[] = {1};
  const float d[] = {8};
  ASSERT_TRUE(avg.AddRows(0, 0, 0, k, 1, 1, d).ok());
  ASSERT_TRUE(avg.Complete(0, 0, 2).ok());
  ASSERT_EQ(*avg.MergeThrough(1, model.Rows(), model.Dense()), 1);
  EXPECT_FLOAT_EQ(model.rows[0][1][0], 8.0f);  // v = 8
  // Round 1: key 1 untouched (another key moves): v = 0.5·8 = 4.
  const uint64_t k2[] = {2};
  const float d2[] = {2};
  ASSERT_TRUE(avg.AddRows(0, 1, 0, k2, 1, 1, d2).ok());
  ASSERT_TRUE(avg.Complete(0, 1, 1).ok());
  ASSERT_EQ(*avg.MergeThrough(2, model.Rows(), model.Dense()), 1);
  EXPECT_FLOAT_EQ(model.rows[0][1][0], 12.0f);
  EXPECT_FLOAT_EQ(model.rows[0][2][0], 2.0f);
  // Round 2: key 1 gets Δ = 2 again: v = 0.5·4 + 2 = 4 → θ = 16; key 2:
  // v = 1 → θ = 3.
  ASSERT_TRUE(avg.AddRows(0, 2, 0, k, 1, 1, d2).ok());
  ASSERT_TRUE(avg.Complete(0, 2, 7).ok());
  ASSERT_EQ(*avg.MergeThrough(3, model.Rows(), model.Dense()), 1);
  EXPECT_FLOAT_EQ(model.rows[0][1][0], 16.0f);
  EXPECT_FLOAT_EQ(model.rows[0][2][0], 3.0f);
}

TEST(ModelAverager, WorkerLeavingMidRoundIsDiscarded) {
  ModelAverager avg(0.0);
  Model model;
  const uint64_t k[] = {3, 4};
  const float d0[] = {2, 2};
  const float d1[] = {100, 100};
  ASSERT_TRUE(avg.AddRows(0, 0, 0, k, 2, 1, d0).ok());
  ASSERT_TRUE(avg.AddRows(1, 0, 0, k, 2, 1, d1).ok());
  ASSERT_TRUE(avg.Complete(0, 0, 1).ok());
  EXPECT_EQ(avg.Drop(1), 2u);  // worker 1 left before ending round 0
  EXPECT_EQ(avg.deltas_dropped(), 2u);
  EXPECT_EQ(avg.deltas_discarded(), 1u);
  EXPECT_EQ(avg.Drop(1), 0u);  // nothing pending any more: nothing discarded
  EXPECT_EQ(avg.deltas_discarded(), 1u);
  ASSERT_EQ(*avg.MergeThrough(1, model.Rows(), model.Dense()), 1);
  EXPECT_EQ(avg.deltas_merged(), 1u);
  // Only worker 0's delta, with only its weight.
  EXPECT_FLOAT_EQ(model.rows[0][3][0], 2.0f);
  EXPECT_FLOAT_EQ(model.rows[0][4][0], 2.0f);
}

TEST(ModelAverager, ZeroWeightRoundAndOrdering) {
  ModelAverager avg(0.0);
  Model model;
  const uint64_t k[] = {1};
  const float d[] = {5};
  // A worker that ends a round with no update (0 weight, no delta) and
  // another round later: rounds merge in order; the empty round changes
  // nothing.
  ASSERT_TRUE(avg.Complete(0, 0, 0).ok());
  ASSERT_TRUE(avg.AddRows(0, 1, 0, k, 1, 1, d).ok());
  ASSERT_TRUE(avg.Complete(0, 1, 1).ok());
  ASSERT_EQ(*avg.MergeThrough(2, model.Rows(), model.Dense()), 1);
  EXPECT_FLOAT_EQ(model.rows[0][1][0], 5.0f);
  EXPECT_EQ(avg.rounds_merged(), 1);  // the empty round is not counted, nor a delta in it
  EXPECT_EQ(avg.deltas_merged(), 1u);
  // A rank cannot start a round before ending the one it is in.
  ASSERT_TRUE(avg.AddRows(1, 2, 0, k, 1, 1, d).ok());
  EXPECT_EQ(avg.AddRows(1, 3, 0, k, 1, 1, d).code(), Status::Code::kFailedPrecondition);
}

}  // namespace
}  // namespace tether
