#include "worker/eval/validation_evaluation.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/net/eval_frames.h"
#include "worker/trainer.h"

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

// A finished run's outcome goes into a checkpoint entry and back into the
// report of a resume with nothing left to train, every field as it was.
TEST(ValidationEvaluationTest, AnOutcomeRoundTripsThroughTheReport) {
  TrainReport r;
  r.validation_rows = 952;
  r.validation_metric = "precision_at_1";
  r.best_epoch = 2;
  r.validation_metrics = {{"precision_at_1", 0.53}, {"auc", std::nan("")}};
  r.epochs_trained = 3;
  r.stopped_early = true;
  const ValidationOutcome o = OutcomeOfReport(r, 2);
  EXPECT_EQ(o.scored_epoch(), 2);
  TrainReport back;
  ReportOutcome(o, &back);
  EXPECT_EQ(back.validation_rows, 952);
  EXPECT_EQ(back.validation_metric, "precision_at_1");
  EXPECT_EQ(back.best_epoch, 2);
  EXPECT_EQ(back.epochs_trained, 3);
  EXPECT_EQ(back.scored_epoch, 2);
  EXPECT_TRUE(back.stopped_early);
  ASSERT_EQ(back.validation_metrics.size(), 2u);
  EXPECT_EQ(back.validation_metrics[0], (std::pair<std::string, double>{"precision_at_1", 0.53}));
  EXPECT_EQ(back.validation_metrics[1].first, "auc");
  EXPECT_TRUE(std::isnan(back.validation_metrics[1].second));
}

TEST(ValidationEvaluationTest, ValidationRoundsMeetNoOtherRound) {
  // Epochs 1..2^40-1 of the validation split stay above the final round.
  EXPECT_GT(kValidationEvalRound + 1, kFinalEvalRound);
  EXPECT_NE(kValidationEvalRound, kFinalEvalRound);
}

}  // namespace
}  // namespace tether
