#include "launch/elastic_schedule.h"

#include <gtest/gtest.h>

namespace tether {
namespace {

TEST(ElasticScheduleTest, ParsesAndSortsSteps) {
  auto s = ParseElasticSchedule("4:-1,2:+2", /*num_workers=*/1, /*max_workers=*/3);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_EQ(s->size(), 2u);
  EXPECT_EQ((*s)[0].epoch, 2);
  EXPECT_EQ((*s)[0].delta, 2);
  EXPECT_EQ((*s)[1].epoch, 4);
  EXPECT_EQ((*s)[1].delta, -1);
  auto none = ParseElasticSchedule("", 1, 1);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

TEST(ElasticScheduleTest, RefusesBadStepsWithTheReason) {
  const auto why = [](const std::string& text, int w, int max) {
    auto s = ParseElasticSchedule(text, w, max);
    return s.ok() ? std::string("ok") : s.status().message();
  };
  EXPECT_NE(why("2+2", 1, 4).find("expected EPOCH:+N"), std::string::npos);
  EXPECT_NE(why("1:+1", 1, 4).find("epoch must be an integer ≥ 2"), std::string::npos);
  EXPECT_NE(why("x:+1", 1, 4).find("epoch must be"), std::string::npos);
  EXPECT_NE(why("2:+0", 1, 4).find("count must be"), std::string::npos);
  EXPECT_NE(why("2:+1,", 1, 4).find("expected EPOCH"), std::string::npos);
  EXPECT_NE(why("2:-1", 1, 4).find("at least one must stay"), std::string::npos);
  // Ranks are never reused: +2, -1, +1 starts ranks 1, 2, 3.
  EXPECT_NE(why("2:+2,3:-1,4:+1", 1, 3).find("beyond cluster.max_workers = 3"), std::string::npos);
  EXPECT_EQ(why("2:+2,3:-1,4:+1", 1, 4), "ok");
}

}  // namespace
}  // namespace tether
