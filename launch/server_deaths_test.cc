#include "launch/server_deaths.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

namespace tether {
namespace {

std::vector<std::pair<int, int>> Moves(const ServerDeathVerdict& v) {
  std::vector<std::pair<int, int>> out;
  for (const ServerDeathVerdict::Move& m : v.moved) out.emplace_back(m.shard, m.to);
  return out;
}

// 3 processes, one replica: shard 0's primary dies, process 1 claims it;
// shard 2, whose copy process 0 held, goes on without a replica.
TEST(ServerDeathsTest, PrimaryDeathWithALiveSuccessorIsSurvived) {
  ServerDeaths deaths(3, 1);
  const ServerDeathVerdict v = deaths.Died(0);
  EXPECT_TRUE(v.survivable);
  EXPECT_EQ(v.process, 0);
  EXPECT_EQ(Moves(v), (std::vector<std::pair<int, int>>{{0, 1}}));
  EXPECT_EQ(v.unreplicated, (std::vector<int>{0, 2}));
  EXPECT_TRUE(v.lost.empty());
  EXPECT_TRUE(deaths.dead(0));
  EXPECT_FALSE(deaths.dead(1));
  EXPECT_EQ(deaths.Serving(0), 1);
  EXPECT_EQ(deaths.Serving(1), 1);
  EXPECT_EQ(deaths.Serving(2), 2);
  EXPECT_EQ(DescribeServerDeath(v, deaths),
            "shard 0 is served by server 1's replica now; shard 0 has no replica left; shard 2 has no replica left");
}

// The last process's successor wraps around to process 0.
TEST(ServerDeathsTest, TheLastProcessIsFollowedByTheFirst) {
  ServerDeaths deaths(3, 1);
  const ServerDeathVerdict v = deaths.Died(2);
  EXPECT_TRUE(v.survivable);
  EXPECT_EQ(Moves(v), (std::vector<std::pair<int, int>>{{2, 0}}));
  EXPECT_EQ(v.unreplicated, (std::vector<int>{1, 2}));
  EXPECT_EQ(deaths.Serving(2), 0);
}

// The successor died first: the shard's only replica is gone with it.
TEST(ServerDeathsTest, DeathAfterItsSuccessorLosesTheShard) {
  ServerDeaths deaths(3, 1);
  ASSERT_TRUE(deaths.Died(1).survivable);  // shard 1 moves to process 2
  EXPECT_EQ(deaths.Serving(1), 2);
  const ServerDeathVerdict v = deaths.Died(0);
  EXPECT_FALSE(v.survivable);
  EXPECT_EQ(v.lost, (std::vector<int>{0}));
  EXPECT_EQ(deaths.Serving(0), -1);
  EXPECT_EQ(DescribeServerDeath(v, deaths), "shard 0 is lost: every server process that held it (0, 1) is dead");
}

// The predecessor died first and this process had taken its shard over.
TEST(ServerDeathsTest, DeathAfterItsPredecessorLosesTheShardItTookOver) {
  ServerDeaths deaths(4, 1);
  ASSERT_TRUE(deaths.Died(1).survivable);
  const ServerDeathVerdict v = deaths.Died(2);
  EXPECT_FALSE(v.survivable);
  EXPECT_EQ(v.lost, (std::vector<int>{1}));
  EXPECT_EQ(deaths.Serving(2), 3);  // its own shard had a live replica
}

// Two deaths apart from each other in the ring are both survived.
TEST(ServerDeathsTest, DeathsThatAreNotNeighboursAreSurvived) {
  ServerDeaths deaths(4, 1);
  ASSERT_TRUE(deaths.Died(0).survivable);
  const ServerDeathVerdict v = deaths.Died(2);
  EXPECT_TRUE(v.survivable);
  EXPECT_EQ(Moves(v), (std::vector<std::pair<int, int>>{{2, 3}}));
  EXPECT_EQ(deaths.Serving(0), 1);
  EXPECT_EQ(deaths.Serving(1), 1);
  EXPECT_EQ(deaths.Serving(2), 3);
  EXPECT_EQ(deaths.Serving(3), 3);
}

// Two processes, one replica each way: one death is survived, both are not.
TEST(ServerDeathsTest, TwoProcessesSurviveOneDeath) {
  ServerDeaths deaths(2, 1);
  const ServerDeathVerdict first = deaths.Died(1);
  EXPECT_TRUE(first.survivable);
  EXPECT_EQ(Moves(first), (std::vector<std::pair<int, int>>{{1, 0}}));
  const ServerDeathVerdict second = deaths.Died(0);
  EXPECT_FALSE(second.survivable);
  EXPECT_EQ(second.lost, (std::vector<int>{0, 1}));
}

// No replicas: every server death loses its shard.
TEST(ServerDeathsTest, WithoutReplicasEveryDeathLosesItsShard) {
  ServerDeaths deaths(3, 0);
  const ServerDeathVerdict v = deaths.Died(1);
  EXPECT_FALSE(v.survivable);
  EXPECT_EQ(v.lost, (std::vector<int>{1}));
  EXPECT_TRUE(v.moved.empty());
  EXPECT_EQ(DescribeServerDeath(v, deaths), "shard 1 is lost: it had no replica (cluster.replicas=0)");
}

// Two replicas: the chain 0 → 1 → 2 serves shard 0 from process 2 once 0
// and 1 are dead; a replica's death moves nothing.
TEST(ServerDeathsTest, TwoReplicasSurviveTwoNeighbouringDeaths) {
  ServerDeaths deaths(4, 2);
  const ServerDeathVerdict copy_only = deaths.Died(1);  // primary of shard 1, copy of 0 and 3
  EXPECT_TRUE(copy_only.survivable);
  EXPECT_EQ(Moves(copy_only), (std::vector<std::pair<int, int>>{{1, 2}}));
  EXPECT_TRUE(copy_only.unreplicated.empty());
  const ServerDeathVerdict v = deaths.Died(0);
  EXPECT_TRUE(v.survivable);
  EXPECT_EQ(Moves(v), (std::vector<std::pair<int, int>>{{0, 2}}));
  EXPECT_EQ(v.unreplicated, (std::vector<int>{0, 3}));
  EXPECT_EQ(deaths.Serving(0), 2);
  EXPECT_FALSE(deaths.Died(2).survivable);
}

}  // namespace
}  // namespace tether
