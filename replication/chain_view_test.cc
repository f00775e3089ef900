#include "replication/chain_view.h"

#include <gtest/gtest.h>

namespace tether {
namespace {

TEST(ChainViewTest, InitialChainsWrapAroundTheProcesses) {
  const ChainView v = InitialChain(2, 3, 1);
  EXPECT_EQ(v.generation, 1u);
  EXPECT_EQ(v.members, (std::vector<int>{2, 0}));
  EXPECT_EQ(v.primary(), 2);
  EXPECT_EQ(v.tail(), 0);
  EXPECT_EQ(InitialChain(1, 4, 2).members, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(InitialChain(0, 1, 0).members, (std::vector<int>{0}));
  EXPECT_EQ(v.ToString(), "generation 1: 2 → 0");
}

TEST(ChainViewTest, SuccessorsAndPredecessorsIncludeTheLearner) {
  ChainView v = WithLearner(InitialChain(0, 3, 1), 5);
  EXPECT_EQ(v.generation, 2u);
  EXPECT_EQ(v.Successor(0), 1);
  EXPECT_EQ(v.Successor(1), 5);
  EXPECT_EQ(v.Successor(5), -1);
  EXPECT_EQ(v.Predecessor(5), 1);
  EXPECT_EQ(v.Predecessor(1), 0);
  EXPECT_EQ(v.Predecessor(0), -1);
  EXPECT_EQ(v.Successor(7), -1);
  EXPECT_FALSE(v.Contains(5));
  const ChainView joined = WithLearnerAppended(v);
  EXPECT_EQ(joined.generation, 3u);
  EXPECT_EQ(joined.members, (std::vector<int>{0, 1, 5}));
  EXPECT_EQ(joined.learner, -1);
}

TEST(ChainViewTest, TheFirstMemberLeftClaims) {
  const ChainView v = InitialChain(0, 4, 2);  // 0 → 1 → 2
  EXPECT_EQ(Claimant(v, {0}), 1);
  EXPECT_EQ(Claimant(v, {0, 1}), 2);
  EXPECT_EQ(Claimant(v, {2}), 0);
  EXPECT_EQ(Claimant(v, {0, 1, 2}), -1);
  const ChainView after = Without(v, {0});
  EXPECT_EQ(after.generation, 2u);
  EXPECT_EQ(after.members, (std::vector<int>{1, 2}));
  EXPECT_TRUE(Without(v, {0, 1, 2}).members.empty());
  ChainView with_learner = WithLearner(v, 3);
  EXPECT_EQ(Without(with_learner, {3}).learner, -1);
  EXPECT_EQ(Without(with_learner, {1}).learner, 3);
}

TEST(ChainViewTest, NewerIsTheHigherGenerationThenTheHigherPrimary) {
  ChainView a = InitialChain(0, 3, 1), b = Without(a, {0});
  EXPECT_TRUE(Newer(b, a));
  EXPECT_FALSE(Newer(a, b));
  EXPECT_FALSE(Newer(a, a));
  ChainView c = Without(a, {1});  // generation 2, primary 0
  EXPECT_TRUE(Newer(b, c));
  EXPECT_TRUE(Newer(a, ChainView{}));
}

}  // namespace
}  // namespace tether
