#include "server/kept_model.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "server/testing/kept_model_tables.h"

namespace tether {
namespace {

constexpr uint32_t kDim = testing::kKeptDim;

// A row table (Adam: weights, then two moments and a step count per row)
// and this shard's slice [2, 8) of a dense table
// (server/testing/kept_model_tables.h).
KeptModel::Tables MakeTables() { return testing::MakeKeptTables(ADAM); }
TableSpec Spec(uint32_t id, TableSpec::Kind kind) { return testing::KeptSpec(id, kind, ADAM); }

// The weights after the restore are those at the keep, bit for bit, after
// more steps; the optimizer state is not put back (the next step differs).
TEST(KeptModelTest, RestorePutsTheKeptWeightsBack) {
  KeptModel::Tables t = MakeTables();
  KeptModel kept;
  testing::StepKept(t, {1, 5, 9}, 0.5f);
  ASSERT_TRUE(kept.Keep(1, t));
  const std::vector<float> rows_at_cut = testing::KeptRows(t, {1, 5, 9});
  const std::vector<float> dense_at_cut = testing::KeptDense(t);
  EXPECT_EQ(kept.bytes(), (3 * kDim + 6) * sizeof(float));  // weights only: no moments
  testing::StepKept(t, {1, 5, 9}, -0.25f);
  testing::StepKept(t, {5}, 1.0f);
  ASSERT_NE(testing::KeptRows(t, {1, 5, 9}), rows_at_cut);
  const StatusOr<bool> restored = kept.Restore(1, &t);
  ASSERT_TRUE(restored.ok()) << restored.status().message();
  EXPECT_TRUE(*restored);
  EXPECT_EQ(testing::KeptRows(t, {1, 5, 9}), rows_at_cut);
  EXPECT_EQ(testing::KeptDense(t), dense_at_cut);
  // A second restore (another worker's) finds it done and changes nothing.
  const StatusOr<bool> again = kept.Restore(1, &t);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(*again);
  EXPECT_EQ(testing::KeptRows(t, {1, 5, 9}), rows_at_cut);
}

// Only a later epoch replaces the copy: the second worker's MODEL_CUT of
// the same round, or an older epoch, leaves the first one's cut.
TEST(KeptModelTest, OnlyALaterEpochReplacesTheCopy) {
  KeptModel::Tables t = MakeTables();
  KeptModel kept;
  EXPECT_EQ(kept.epoch(), 0);
  testing::StepKept(t, {2}, 0.5f);
  ASSERT_TRUE(kept.Keep(2, t));
  const std::vector<float> at_2 = testing::KeptRows(t, {2});
  testing::StepKept(t, {2}, 0.5f);
  EXPECT_FALSE(kept.Keep(2, t));
  EXPECT_FALSE(kept.Keep(1, t));
  EXPECT_EQ(kept.epoch(), 2);
  ASSERT_TRUE(kept.Restore(2, &t).ok());
  EXPECT_EQ(testing::KeptRows(t, {2}), at_2);
  testing::StepKept(t, {2}, 0.5f);
  const std::vector<float> at_4 = testing::KeptRows(t, {2});
  ASSERT_TRUE(kept.Keep(4, t));
  EXPECT_FALSE(kept.restored());
  testing::StepKept(t, {2}, 0.5f);
  ASSERT_TRUE(kept.Restore(4, &t).ok());
  EXPECT_EQ(testing::KeptRows(t, {2}), at_4);
}

// A row first touched after the cut holds its initializer's weights after
// the restore: the weights a pull of it gave before it existed.
TEST(KeptModelTest, RowsCreatedAfterTheCutGoBackToTheirInitialWeights) {
  KeptModel::Tables t = MakeTables();
  KeptModel::Tables fresh = MakeTables();
  KeptModel kept;
  testing::StepKept(t, {1}, 0.5f);
  ASSERT_TRUE(kept.Keep(1, t));
  testing::StepKept(t, {1, 40, 41}, 0.5f);
  ASSERT_EQ(t[0]->num_rows(), 3u);
  ASSERT_TRUE(kept.Restore(1, &t).ok());
  EXPECT_EQ(testing::KeptRows(t, {40, 41}), testing::KeptRows(fresh, {40, 41}));
}

// Restores the workers cannot mean are refused, changing nothing.
TEST(KeptModelTest, RefusesARestoreOfNoCopyOrAnotherEpoch) {
  KeptModel::Tables t = MakeTables();
  KeptModel kept;
  const StatusOr<bool> none = kept.Restore(3, &t);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(none.status().message(), "no copy of the model was kept, but the workers ask for epoch 3's");
  testing::StepKept(t, {1}, 0.5f);
  ASSERT_TRUE(kept.Keep(2, t));
  testing::StepKept(t, {1}, 0.5f);
  const std::vector<float> now = testing::KeptRows(t, {1});
  const StatusOr<bool> other = kept.Restore(3, &t);
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().message(),
            "the copy of the model kept here is epoch 2's, but the workers ask for epoch 3's (the workers "
            "disagree on the best epoch)");
  EXPECT_EQ(testing::KeptRows(t, {1}), now);
  KeptModel::Tables fewer;
  fewer.push_back(std::make_unique<ServerTable>(Spec(0, TableSpec::ROW), 0, 0));
  const StatusOr<bool> shape = kept.Restore(2, &fewer);
  ASSERT_FALSE(shape.ok());
  EXPECT_EQ(shape.status().code(), Status::Code::kInvalidArgument);
}

}  // namespace
}  // namespace tether
