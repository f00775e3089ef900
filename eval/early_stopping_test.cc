#include "eval/early_stopping.h"

#include <gtest/gtest.h>

#include <cmath>

namespace tether {
namespace {

// Patience 2: the best epoch is 3; epochs 4 and 5 do not improve, so
// training ends after epoch 5 with epoch 3's model.
TEST(EarlyStoppingTest, StopsAfterPatienceEpochsWithoutImprovement) {
  EarlyStopper s("precision_at_1", 2, 0.0);
  EXPECT_TRUE(s.higher_is_better());
  EXPECT_TRUE(s.Add(1, 0.50));
  EXPECT_TRUE(s.Add(2, 0.55));
  EXPECT_TRUE(s.Add(3, 0.60));
  EXPECT_FALSE(s.ShouldStop());
  EXPECT_FALSE(s.Add(4, 0.59));
  EXPECT_FALSE(s.ShouldStop());
  EXPECT_FALSE(s.Add(5, 0.60));  // equal is not better
  EXPECT_TRUE(s.ShouldStop());
  EXPECT_EQ(s.best_epoch(), 3);
  EXPECT_EQ(s.best_value(), 0.60);
}

// A rule restored after epoch 4 (a resume) decides epochs 5 and 6 as the
// rule fed every epoch does.
TEST(EarlyStoppingTest, RestoredRuleContinuesAsTheUninterruptedOne) {
  EarlyStopper whole("precision_at_1", 2, 0.0);
  for (int e = 1; e <= 4; ++e) whole.Add(e, e == 3 ? 0.6 : 0.5);
  EarlyStopper resumed("precision_at_1", 2, 0.0);
  resumed.Restore(whole.best_epoch(), whole.best_value(), whole.last_epoch());
  EXPECT_EQ(resumed.best_epoch(), 3);
  EXPECT_FALSE(resumed.ShouldStop());
  EXPECT_FALSE(whole.Add(5, 0.55));
  EXPECT_FALSE(resumed.Add(5, 0.55));
  EXPECT_TRUE(whole.ShouldStop());
  EXPECT_TRUE(resumed.ShouldStop());
  EXPECT_EQ(resumed.best_epoch(), 3);
  EXPECT_EQ(resumed.best_value(), 0.6);
  EarlyStopper afresh("precision_at_1", 2, 0.0);  // what a resume did without the history
  EXPECT_TRUE(afresh.Add(5, 0.55));
  EXPECT_FALSE(afresh.ShouldStop());
}

TEST(EarlyStoppingTest, PatienceZeroNeverStopsButKeepsTheBest) {
  EarlyStopper s("precision_at_1", 0, 0.0);
  for (int e = 1; e <= 20; ++e) s.Add(e, e == 7 ? 0.9 : 0.1);
  EXPECT_FALSE(s.ShouldStop());
  EXPECT_EQ(s.best_epoch(), 7);
}

TEST(EarlyStoppingTest, LogLossIsBetterLowerAndMinDeltaCounts) {
  EarlyStopper s("log_loss", 1, 0.01);
  EXPECT_FALSE(s.higher_is_better());
  EXPECT_TRUE(s.Add(1, 0.50));
  EXPECT_FALSE(s.Add(2, 0.495));  // better, but by less than min_delta
  EXPECT_TRUE(s.ShouldStop());
  EXPECT_TRUE(s.Add(3, 0.45));
  EXPECT_FALSE(s.ShouldStop());
  EXPECT_EQ(s.best_epoch(), 3);
  EXPECT_FALSE(s.Add(4, std::nan("")));
  EXPECT_TRUE(s.ShouldStop());
}

TEST(EarlyStoppingTest, MetricsByLabelKind) {
  EXPECT_EQ(EarlyStopper::MetricProblem("precision_at_3", "multi-label"), "");
  EXPECT_EQ(EarlyStopper::MetricProblem("auc", "binary"), "");
  EXPECT_EQ(EarlyStopper::MetricProblem("log_loss", "multiclass"), "");
  EXPECT_EQ(EarlyStopper::MetricProblem("auc", "multiclass"),
            "is not a metric of multiclass models: use accuracy or log_loss");
  EXPECT_EQ(EarlyStopper::MetricProblem("accuracy", "multi-label"),
            "is not a metric of multi-label models: use precision_at_1, precision_at_3, precision_at_5, ndcg_at_1, "
            "ndcg_at_3 or ndcg_at_5");
}

}  // namespace
}  // namespace tether
