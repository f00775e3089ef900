// The helpers every benchmark's table rests on: list and shape parsing, the
// percentiles, the number formats, and the random keys both sides of the
// ps-lite comparison draw.
#include "bench/bench_util.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "bench/random_keys.h"

namespace tether {
namespace {

TEST(BenchUtilTest, ParsesListsAndShapes) {
  EXPECT_EQ(ParseList("100,1e5,,3"), (std::vector<int64_t>{100, 100000, 3}));
  EXPECT_EQ(ParseNames("pull,,push"), (std::vector<std::string>{"pull", "push"}));
  std::vector<std::pair<int64_t, int64_t>> shapes;
  ASSERT_TRUE(ParseShapes("kv", "1x1,1e5x64", &shapes));
  EXPECT_EQ(shapes, (std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {100000, 64}}));
  EXPECT_FALSE(ParseShapes("kv", "10", &shapes));
  EXPECT_FALSE(ParseShapes("kv", "0x4", &shapes));
}

TEST(BenchUtilTest, SummarizesAndFormats) {
  const Summary odd = Summarize({3, 1, 2});
  EXPECT_EQ(odd.reps, 3);
  EXPECT_EQ(odd.median, 2);
  EXPECT_EQ(odd.p99, 3);
  EXPECT_EQ(Summarize({4, 1, 3, 2}).median, 2.5);
  std::vector<double> hundred(100);
  for (int i = 0; i < 100; ++i) hundred[i] = i + 1;
  EXPECT_EQ(Summarize(hundred).p99, 99);  // nearest rank
  EXPECT_EQ(Summarize({}).reps, 0);
  EXPECT_EQ(Si(999), "999");
  EXPECT_EQ(Si(1500), "1.5k");
  EXPECT_EQ(Si(1.2e6), "1.20M");
  EXPECT_EQ(Si(3e9), "3.00G");
  EXPECT_EQ(Fmt("%.3f", 0.5), "0.500");
}

TEST(RandomKeysTest, SortedUniqueAndTheSameForASeed) {
  const std::vector<uint64_t> a = RandomSortedKeys(1000, 7), b = RandomSortedKeys(1000, 7);
  ASSERT_EQ(a.size(), 1000u);
  EXPECT_EQ(a, b);
  EXPECT_TRUE(std::is_sorted(a.begin(), a.end()));
  EXPECT_EQ(std::adjacent_find(a.begin(), a.end()), a.end());
  EXPECT_NE(RandomSortedKeys(1000, 8), a);
  EXPECT_TRUE(RandomSortedKeys(0, 1).empty());
}

}  // namespace
}  // namespace tether
