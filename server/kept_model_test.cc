#include "server/kept_model.h"

#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
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

KeptModelState SavedState(const KeptModel& kept, const KeptModel::Tables& t) {
  KeptModelState s;
  kept.SaveState(&s, t);
  return s;
}

bool SameState(const KeptModelState& a, const KeptModelState& b) {
  return google::protobuf::util::MessageDifferencer::Equals(a, b);
}

// A copy held and not yet put back, restored over tables equal to the
// sender's: the same state, and the restore puts the same weights back.
TEST(KeptModelStateTest, ACopyNotYetRestoredIsCarried) {
  KeptModel::Tables t = MakeTables(), u = MakeTables();
  for (KeptModel::Tables* x : {&t, &u}) testing::StepKept(*x, {1, 5, 9}, 0.5f);
  KeptModel a, b;
  ASSERT_TRUE(a.Keep(2, t));
  for (KeptModel::Tables* x : {&t, &u}) testing::StepKept(*x, {5, 11}, -0.25f);
  const KeptModelState state = SavedState(a, t);
  EXPECT_EQ(state.epoch(), 2);
  EXPECT_FALSE(state.restored());
  ASSERT_TRUE(b.RestoreState(state, u).ok());
  EXPECT_TRUE(SameState(state, SavedState(b, u)));
  EXPECT_EQ(b.epoch(), 2);
  EXPECT_EQ(b.bytes(), a.bytes());
  EXPECT_FALSE(b.Keep(2, u));
  const StatusOr<bool> ra = a.Restore(2, &t), rb = b.Restore(2, &u);
  ASSERT_TRUE(ra.ok() && rb.ok());
  EXPECT_TRUE(*ra);
  EXPECT_TRUE(*rb);
  EXPECT_EQ(testing::KeptRows(u, {1, 5, 9, 11}), testing::KeptRows(t, {1, 5, 9, 11}));
  EXPECT_EQ(testing::KeptDense(u), testing::KeptDense(t));
}

// A copy already put back stays put back: a later restore changes nothing
// on either side.
TEST(KeptModelStateTest, ARestoredCopyStaysRestored) {
  // u: the joiner's tables, restored to the sender's (t) by their own room.
  KeptModel::Tables t = MakeTables(), u = MakeTables();
  KeptModel a, b, tables_of_u;
  for (KeptModel::Tables* x : {&t, &u}) testing::StepKept(*x, {3}, 0.5f);
  ASSERT_TRUE(a.Keep(1, t));
  ASSERT_TRUE(tables_of_u.Keep(1, u));
  for (KeptModel::Tables* x : {&t, &u}) testing::StepKept(*x, {3}, 0.5f);
  ASSERT_TRUE(a.Restore(1, &t).ok());
  ASSERT_TRUE(tables_of_u.Restore(1, &u).ok());
  for (KeptModel::Tables* x : {&t, &u}) testing::StepKept(*x, {3}, 0.5f);  // steps after the restore
  const KeptModelState state = SavedState(a, t);
  EXPECT_TRUE(state.restored());
  ASSERT_TRUE(b.RestoreState(state, u).ok());
  EXPECT_TRUE(b.restored());
  EXPECT_TRUE(SameState(state, SavedState(b, u)));
  const StatusOr<bool> again_a = a.Restore(1, &t), again_b = b.Restore(1, &u);
  ASSERT_TRUE(again_a.ok() && again_b.ok());
  EXPECT_FALSE(*again_a);
  EXPECT_FALSE(*again_b);
  EXPECT_EQ(testing::KeptRows(u, {3}), testing::KeptRows(t, {3}));
}

TEST(KeptModelStateTest, NoCopyIsCarriedAsEpochZero) {
  KeptModel::Tables t = MakeTables();
  KeptModel a, b;
  ASSERT_TRUE(b.Keep(3, t));
  const KeptModelState state = SavedState(a, t);
  EXPECT_EQ(state.epoch(), 0);
  EXPECT_EQ(state.tables_size(), 0);
  ASSERT_TRUE(b.RestoreState(state, t).ok());
  EXPECT_EQ(b.epoch(), 0);
  EXPECT_EQ(b.bytes(), 0u);
  EXPECT_TRUE(SameState(state, SavedState(b, t)));
  EXPECT_TRUE(b.Keep(1, t));
}

// Each kind of state the tables cannot hold is refused with DataLoss
// naming the field; the state held is left as it was.
TEST(KeptModelStateTest, MalformedStatesAreRefusedNamingTheField) {
  KeptModel::Tables t = MakeTables();
  testing::StepKept(t, {1, 5}, 0.5f);
  KeptModel a;
  ASSERT_TRUE(a.Keep(2, t));
  const KeptModelState good = SavedState(a, t);
  const std::vector<std::pair<std::string, std::function<void(KeptModelState*)>>> cases = {
      {"shard state: kept.epoch -1 is negative", [](KeptModelState* s) { s->set_epoch(-1); }},
      {"shard state: kept holds tables or a restore without a copy (epoch 0)",
       [](KeptModelState* s) { s->set_epoch(0); }},
      {"shard state: kept: holds 1 tables, the job 2", [](KeptModelState* s) { s->mutable_tables()->RemoveLast(); }},
      {"shard state: kept: table 'w': its 2 rows are not the first rows",
       [](KeptModelState* s) { s->mutable_tables(0)->set_keys(1, 77); }},
      {"shard state: kept: table 'w': 4 bytes of weights",
       [](KeptModelState* s) { s->mutable_tables(0)->set_weights("abcd"); }},
      {"shard state: kept: table 'b': slice [0, 8)",
       [](KeptModelState* s) { s->mutable_tables(1)->set_dense_begin(0); }},
  };
  for (const auto& [want, mutate] : cases) {
    SCOPED_TRACE(want);
    KeptModelState bad = good;
    mutate(&bad);
    KeptModel fresh;
    const Status st = fresh.RestoreState(bad, t);
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.code(), Status::Code::kDataLoss);
    EXPECT_NE(st.message().find(want), std::string::npos) << st.message();
    EXPECT_EQ(fresh.epoch(), 0);
  }
}

}  // namespace
}  // namespace tether
