#include "telemetry/progress_eta.h"

#include <gtest/gtest.h>

namespace tether {
namespace {

TEST(ProgressEtaTest, LinearInTheShareDone) {
  // 2 of 10 epochs in 40 s: 8 more at 20 s each.
  EXPECT_DOUBLE_EQ(EtaSeconds(40, 2, 0.0, 10), 160);
  // Half of the first of 4 epochs in 5 s: 3.5 epochs at 10 s.
  EXPECT_DOUBLE_EQ(EtaSeconds(5, 0, 0.5, 4), 35);
  EXPECT_DOUBLE_EQ(EtaSeconds(100, 4, 0.0, 4), 0);
}

TEST(ProgressEtaTest, NoEstimateBeforeAnyWork) {
  EXPECT_LT(EtaSeconds(3, 0, 0.0, 10), 0);
  EXPECT_LT(EtaSeconds(3, 1, 0.0, 0), 0);
  EXPECT_EQ(FormatEta(EtaSeconds(3, 0, 0.0, 10)), "?");
}

TEST(ProgressEtaTest, FractionsOutOfRangeAreClamped) {
  EXPECT_DOUBLE_EQ(EtaSeconds(10, 1, 2.0, 4), 10);   // 2 of 4 epochs
  EXPECT_DOUBLE_EQ(EtaSeconds(10, 1, -1.0, 4), 30);  // 1 of 4
  EXPECT_DOUBLE_EQ(EtaSeconds(10, 9, 0.0, 4), 0);    // past the end
}

TEST(ProgressEtaTest, FormatsSecondsMinutesAndHours) {
  EXPECT_EQ(FormatEta(0), "0s");
  EXPECT_EQ(FormatEta(44.2), "45s");
  EXPECT_EQ(FormatEta(250), "4m 10s");
  EXPECT_EQ(FormatEta(7500), "2h 05m");
  EXPECT_EQ(FormatEta(1e300), "277777h 46m");
}

}  // namespace
}  // namespace tether
