#include "cli/nominal_epoch.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "core/schedule_config.h"
#include "tests/testing/temp_dir.h"

namespace tether {
namespace {

class NominalEpochTest : public ::testing::Test {
 protected:
  std::string WriteTemp(const std::string& name, const std::string& text) const {
    std::ofstream(dir_.File(name)) << text;
    return dir_.File(name);
  }

  JobConfig Xmc(int64_t rows, int workers) const {
    std::string text = std::to_string(rows) + " 3 2\n";
    for (int64_t r = 0; r < rows; ++r) text += "0 1:1\n";
    JobConfig c;
    c.mutable_data()->set_format(XMC);
    c.mutable_data()->set_train_file(WriteTemp("xmc" + std::to_string(rows) + ".txt", text));
    c.mutable_data()->set_index_base(0);
    c.mutable_cluster()->set_num_workers(workers);
    c.mutable_train()->set_minibatch_size(64);
    return c;
  }

  testing::ScopedTempDir dir_;
};

// Bibtex's split: 4880 training rows, 2 workers of 2440 rows, 39 minibatches
// of 64 each; one worker: 77.
TEST_F(NominalEpochTest, ClocksPerEpochFromTheJobsRows) {
  JobConfig c = Xmc(1, 2);
  EXPECT_EQ(NominalClocksPerEpoch(c, 4880), 39);
  c.mutable_cluster()->set_num_workers(1);
  EXPECT_EQ(NominalClocksPerEpoch(c, 4880), 77);
  c.mutable_train()->set_minibatches_per_clock(4);
  EXPECT_EQ(NominalClocksPerEpoch(c, 4880), 20);
  EXPECT_EQ(NominalClocksPerEpoch(c, 0), 1);
}

TEST_F(NominalEpochTest, RowsFromHeaderSplitAndValidation) {
  JobConfig c = Xmc(100, 1);
  StatusOr<int64_t> rows = NominalTrainingRows(c);
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  EXPECT_EQ(*rows, 100);
  c.mutable_train()->set_validation_fraction(0.2);
  EXPECT_EQ(*NominalTrainingRows(c), 80);
  c.mutable_data()->set_train_split(WriteTemp("split.txt", "1\n2\n3\n5\n8\n13\n21\n34\n55\n89\n"));
  EXPECT_EQ(*NominalTrainingRows(c), 8);  // 10 − round(2.0)
  c.mutable_train()->set_validation_fraction(0);
  c.mutable_data()->set_validation_split(WriteTemp("val.txt", "3\n8\n"));
  EXPECT_EQ(*NominalTrainingRows(c), 8);
  // A validation row outside train_split takes no training row.
  c.mutable_data()->set_validation_split(WriteTemp("val_outside.txt", "3\n4\n"));
  EXPECT_EQ(*NominalTrainingRows(c), 9);
  c.mutable_data()->clear_train_split();
  EXPECT_EQ(*NominalTrainingRows(c), 98);

  JobConfig lib;
  lib.mutable_data()->set_format(LIBSVM);
  lib.mutable_data()->set_train_file(WriteTemp("rows.libsvm", "1 1:1\n\n-1 2:1\r\n1 3:2"));
  EXPECT_EQ(*NominalTrainingRows(lib), 3);
  lib.mutable_data()->set_train_file(lib.data().train_file() + "," + lib.data().train_file());
  EXPECT_FALSE(NominalTrainingRows(lib).ok());
}

// The job's schedule and a table's, each in epochs, into clocks.
TEST_F(NominalEpochTest, ResolvesEverySchedule) {
  JobConfig c = Xmc(4880, 2);
  c.mutable_train()->set_epochs(10);
  LearningRateSchedule* s = c.mutable_optimizer()->mutable_schedule();
  s->set_decay(LearningRateSchedule::COSINE);
  s->set_warmup_epochs(1);
  TableConfig* t = c.add_table();
  t->set_name("w1");
  t->mutable_optimizer()->mutable_schedule()->set_warmup_epochs(0.5f);
  ASSERT_TRUE(ResolveScheduleClocks(&c).ok());
  EXPECT_EQ(c.optimizer().schedule().warmup_clocks(), 39);
  EXPECT_EQ(c.optimizer().schedule().decay_clocks(), 390 - 39);
  EXPECT_FALSE(c.optimizer().schedule().has_warmup_epochs());
  EXPECT_EQ(c.table(0).optimizer().schedule().warmup_clocks(), 20);  // 19.5 → 20
  EXPECT_EQ(ScheduleProblem(c.optimizer().schedule(), ADAM), "");
  // Nothing in epochs: nothing read, nothing changed.
  JobConfig none;
  none.mutable_data()->set_train_file("does-not-exist");
  none.mutable_optimizer()->mutable_schedule()->set_warmup_clocks(7);
  EXPECT_TRUE(ResolveScheduleClocks(&none).ok());
  EXPECT_EQ(none.optimizer().schedule().warmup_clocks(), 7);
}

// A decay with no length runs over the whole training: 10 epochs of 39
// clocks, less a warm-up of 5 clocks.
TEST_F(NominalEpochTest, ADecayWithoutLengthRunsToTheEnd) {
  JobConfig c = Xmc(4880, 2);
  c.mutable_train()->set_epochs(10);
  LearningRateSchedule* s = c.mutable_optimizer()->mutable_schedule();
  s->set_decay(LearningRateSchedule::COSINE);
  s->set_warmup_clocks(5);
  ASSERT_TRUE(ResolveScheduleClocks(&c).ok());
  EXPECT_EQ(c.optimizer().schedule().decay_clocks(), 390 - 5);
  EXPECT_EQ(ScheduleProblem(c.optimizer().schedule(), ADAM), "");
  // A length given in clocks is kept.
  s->set_decay_clocks(100);
  ASSERT_TRUE(ResolveScheduleClocks(&c).ok());
  EXPECT_EQ(c.optimizer().schedule().decay_clocks(), 100);
}

}  // namespace
}  // namespace tether
