#include "worker/eval/validation_evaluation.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/net/eval_frames.h"

namespace tether {
namespace {

TEST(ValidationEvaluationTest, MetricNamedFindsTheValueOrNaN) {
  const std::vector<std::pair<std::string, double>> m{{"precision_at_1", 0.625}, {"precision_at_3", 0.375}};
  EXPECT_EQ(MetricNamed(m, "precision_at_3"), 0.375);
  EXPECT_TRUE(std::isnan(MetricNamed(m, "auc")));
}

TEST(ValidationEvaluationTest, TheWatchedMetricDefaultsByLabelKind) {
  JobConfig c;
  c.mutable_model()->set_type(XMC_MLP);
  EXPECT_EQ(ValidationMetric(c), "precision_at_1");
  c.mutable_model()->set_type(SPARSE_LR);
  EXPECT_EQ(ValidationMetric(c), "accuracy");
  c.mutable_train()->mutable_early_stopping()->set_metric("log_loss");
  EXPECT_EQ(ValidationMetric(c), "log_loss");
  EXPECT_EQ(LabelKindName(LabelKind::kMultiLabel), "multi-label");
  EXPECT_EQ(LabelKindName(LabelKind::kBinary), "binary");
  EXPECT_EQ(LabelKindName(LabelKind::kMultiClass), "multiclass");
}

TEST(ValidationEvaluationTest, ValidationRoundsMeetNoOtherRound) {
  // Epochs 1..2^40-1 of the validation split stay above the final round.
  EXPECT_GT(kValidationEvalRound + 1, kFinalEvalRound);
  EXPECT_NE(kValidationEvalRound, kFinalEvalRound);
}

}  // namespace
}  // namespace tether
