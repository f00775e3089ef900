// data.validation_split in the job config: read by the trainer, the
// alternative of train.validation_fraction (the two exclude each other),
// refused where the fraction is, naming itself; its path resolved and
// checked as train_split's.
#include <gtest/gtest.h>

#include <string>

#include "core/config.h"

namespace tether {
namespace {

// data.validation_split: read by the trainer, the alternative of
// train.validation_fraction, refused where the fraction is, naming itself.
TEST(ConfigTest, ValidationSplitFile) {
  auto c = LoadJobConfig("tests/data/bibtex_fixed.pbtxt");
  ASSERT_TRUE(c.ok());
  const auto message = [](const JobConfig& j) { return ValidateJobConfig(j).message(); };
  JobConfig j = *c;
  j.mutable_data()->set_validation_split("val.split");
  EXPECT_TRUE(ValidateJobConfig(j).ok()) << message(j);
  EXPECT_TRUE(HasValidationSplit(j));
  EXPECT_EQ(ValidationSplitField(j), "data.validation_split");
  j.mutable_train()->mutable_early_stopping()->set_patience(2);
  j.mutable_train()->set_keep_best_model(true);
  EXPECT_TRUE(ValidateJobConfig(j).ok()) << message(j);
  j.mutable_train()->set_validation_fraction(0.2);
  EXPECT_EQ(message(j), "config field data.validation_split: and train.validation_fraction exclude each other (the "
                        "rows a file names, or the rows a hash chooses): set one of the two");
  j.mutable_train()->set_validation_fraction(0);
  j.mutable_train()->set_data_on_demand(true);
  EXPECT_EQ(message(j),
            "config field data.validation_split: needs each worker's own partition: not with train.data_on_demand");
  j.mutable_train()->set_data_on_demand(false);
  j.mutable_train()->set_eval_every_epochs(1);
  EXPECT_EQ(message(j).rfind("config field data.validation_split: reads the test split only at the end", 0), 0u)
      << message(j);
  j.mutable_train()->set_eval_every_epochs(0);
  j.mutable_cluster()->set_max_workers(j.cluster().num_workers() + 1);
  EXPECT_NE(message(j).find("data.validation_split: is evaluated by the initial workers only"), std::string::npos)
      << message(j);
  j.mutable_cluster()->set_max_workers(0);
  j.mutable_data()->set_train_file(j.data().train_file() + "," + j.data().train_file());
  j.mutable_data()->clear_train_split();
  EXPECT_EQ(message(j).rfind("config field data.validation_split: needs one numbering of the training rows", 0), 0u)
      << message(j);
  j = *c;
  j.mutable_data()->set_validation_split("val.split");
  j.mutable_data()->clear_train_split();
  j.mutable_data()->set_streaming(true);
  EXPECT_EQ(message(j), "config field data.validation_split: needs the training rows in memory: not with "
                        "data.streaming");
  EXPECT_FALSE(HasValidationSplit(*c));
  EXPECT_EQ(ValidationSplitField(*c), "");
}

// A relative validation_split in a config file is taken against the
// config's folder, as train_split is, and must exist.
TEST(ConfigTest, ValidationSplitPathResolvedAndChecked) {
  JobConfig j;
  j.mutable_data()->set_validation_split("splits/val.txt");
  ResolveDataPaths(&j, "/base");
  EXPECT_EQ(j.data().validation_split(), "/base/splits/val.txt");
  const Status st = CheckDataFilesExist(j);
  EXPECT_EQ(st.code(), Status::Code::kNotFound);
  EXPECT_EQ(st.message().rfind("config field data.validation_split: '/base/splits/val.txt' does not exist", 0), 0u)
      << st.message();
}

// A metric the job's model does not report is refused with the config,
// naming the keys the model has (tether-launch and every process exit 2).
TEST(ConfigTest, EarlyStoppingMetricOfTheModel) {
  auto c = LoadJobConfig("tests/data/bibtex_fixed.pbtxt");
  ASSERT_TRUE(c.ok());
  JobConfig j = *c;
  j.mutable_train()->set_validation_fraction(0.2);
  j.mutable_train()->mutable_early_stopping()->set_metric("ndcg_at_3");
  EXPECT_TRUE(ValidateJobConfig(j).ok()) << ValidateJobConfig(j).message();
  j.mutable_train()->mutable_early_stopping()->set_metric("auc");
  EXPECT_EQ(ValidateJobConfig(j).message(),
            "config field train.early_stopping.metric: 'auc' is not a metric of multi-label models: use "
            "precision_at_1, precision_at_3, precision_at_5, ndcg_at_1, ndcg_at_3 or ndcg_at_5");
  j.mutable_model()->set_name("sparse_lr");
  j.mutable_train()->mutable_early_stopping()->set_metric("precision_at_1");
  EXPECT_EQ(ValidateJobConfig(j).message(),
            "config field train.early_stopping.metric: 'precision_at_1' is not a metric of binary models: use "
            "accuracy, auc or log_loss");
  j.mutable_model()->clear_name();
  j.mutable_model()->set_type(DENSE_MLP);
  j.mutable_train()->mutable_early_stopping()->set_metric("auc");
  EXPECT_EQ(ValidateJobConfig(j).message(),
            "config field train.early_stopping.metric: 'auc' is not a metric of multiclass models: use accuracy or "
            "log_loss");
  j.mutable_train()->mutable_early_stopping()->set_metric("log_loss");
  EXPECT_TRUE(ValidateJobConfig(j).ok()) << ValidateJobConfig(j).message();
}

// tether-server checks the same: a metric the model does not report is
// refused with the server's config, with the workers' message.
TEST(ConfigTest, EarlyStoppingMetricIsRefusedByTheServerToo) {
  auto c = LoadJobConfig("tests/data/bibtex_fixed.pbtxt");
  ASSERT_TRUE(c.ok());
  JobConfig j = *c;
  j.mutable_train()->set_validation_fraction(0.2);
  j.mutable_train()->mutable_early_stopping()->set_metric("ndcg_at_3");
  EXPECT_TRUE(ValidateServerConfig(j).ok()) << ValidateServerConfig(j).message();
  j.mutable_train()->mutable_early_stopping()->set_metric("auc");
  const std::string want =
      "config field train.early_stopping.metric: 'auc' is not a metric of multi-label models: use "
      "precision_at_1, precision_at_3, precision_at_5, ndcg_at_1, ndcg_at_3 or ndcg_at_5";
  EXPECT_EQ(ValidateServerConfig(j).message(), want);
  EXPECT_EQ(ValidateJobConfig(j).message(), want);
  j.mutable_train()->mutable_early_stopping()->set_metric("ndcg_at_3");
  j.mutable_train()->mutable_early_stopping()->set_patience(-1);
  EXPECT_EQ(ValidateServerConfig(j).message(),
            "config field train.early_stopping.patience: must be ≥ 0 (0: never stops early)");
  j.mutable_train()->mutable_early_stopping()->set_patience(2);
  j.mutable_train()->clear_validation_fraction();
  EXPECT_EQ(ValidateServerConfig(j).message(),
            "config field train.early_stopping: needs a validation split: set train.validation_fraction or "
            "data.validation_split");
}

}  // namespace
}  // namespace tether
