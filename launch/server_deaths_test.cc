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

// Three processes: process 0 dies, shard 0 moves to process 1 and shards 0
// and 2 get replacements (3 and 4). Process 2 dies next: shard 2 is claimed
// by replacement 4, which a job without replacements could not survive.
TEST(ServerDeathsTest, AReplacementClaimsTheShardItJoined) {
  ServerDeaths deaths(3, 1);
  ASSERT_TRUE(deaths.Died(0).survivable);
  ReplacementPlan plan = deaths.PlanReplacements(6);
  EXPECT_EQ(plan.start, (std::vector<int>{0, 2}));
  EXPECT_TRUE(plan.over_limit.empty());
  EXPECT_EQ(deaths.Replaced(0), 3);
  EXPECT_EQ(deaths.Replaced(2), 4);
  EXPECT_EQ(deaths.replacements_started(), 2);
  EXPECT_EQ(deaths.Holders(0), (std::vector<int>{1, 3}));
  EXPECT_EQ(deaths.Holders(2), (std::vector<int>{2, 4}));
  EXPECT_EQ(deaths.CopyOf(3), 0);
  EXPECT_EQ(deaths.CopyOf(4), 2);
  EXPECT_EQ(deaths.CopyOf(1), -1);
  EXPECT_TRUE(deaths.PlanReplacements(6).start.empty());

  const ServerDeathVerdict v = deaths.Died(2);
  EXPECT_TRUE(v.survivable);
  EXPECT_EQ(Moves(v), (std::vector<std::pair<int, int>>{{2, 4}}));
  EXPECT_EQ(v.unreplicated, (std::vector<int>{1, 2}));
  EXPECT_EQ(deaths.Serving(2), 4);
  EXPECT_EQ(DescribeServerDeath(v, deaths),
            "shard 2 is served by replacement 4 now; shard 1 has no replica left; shard 2 has no replica left");
  EXPECT_EQ(deaths.PlanReplacements(6).start, (std::vector<int>{1, 2}));
}

// A replacement's death leaves the shard it joined without a replica
// again; another replacement may join it.
TEST(ServerDeathsTest, AReplacementsDeathIsReplacedAgain) {
  ServerDeaths deaths(3, 1);
  ASSERT_TRUE(deaths.Died(0).survivable);
  ASSERT_EQ(deaths.Replaced(0), 3);
  ASSERT_EQ(deaths.Replaced(2), 4);
  const ServerDeathVerdict v = deaths.Died(4);
  EXPECT_TRUE(v.survivable);
  EXPECT_TRUE(v.moved.empty());
  EXPECT_EQ(v.unreplicated, (std::vector<int>{2}));
  EXPECT_EQ(DescribeServerDeath(v, deaths), "shard 2 has no replica left");
  EXPECT_EQ(deaths.PlanReplacements(6).start, (std::vector<int>{2}));
  EXPECT_EQ(deaths.Replaced(2), 5);
  EXPECT_EQ(deaths.Holders(2), (std::vector<int>{2, 5}));
  EXPECT_EQ(deaths.ProcessName(5), "replacement 5");
  EXPECT_EQ(deaths.ProcessName(2), "server 2");
}

// The shard's last holder is a replacement: its death loses the shard,
// and every process that ever held it is named.
TEST(ServerDeathsTest, TheLastHolderBeingAReplacementLosesTheShard) {
  ServerDeaths deaths(3, 1);
  ASSERT_TRUE(deaths.Died(0).survivable);
  ASSERT_EQ(deaths.Replaced(0), 3);
  ASSERT_TRUE(deaths.Died(3).survivable);  // shard 0 on process 1 alone again
  const ServerDeathVerdict v = deaths.Died(1);
  EXPECT_FALSE(v.survivable);
  EXPECT_EQ(v.lost, (std::vector<int>{0}));
  EXPECT_EQ(DescribeServerDeath(v, deaths),
            "shard 0 is lost: every server process that held it (0, 1, replacement 3) is dead");
}

// Two processes: after both replacements joined, the job survives the
// death of both processes it started with, served by the replacements.
TEST(ServerDeathsTest, TwoProcessesSurviveBothDeathsWithReplacements) {
  ServerDeaths deaths(2, 1);
  ASSERT_TRUE(deaths.Died(1).survivable);
  EXPECT_EQ(deaths.PlanReplacements(4).start, (std::vector<int>{0, 1}));
  ASSERT_EQ(deaths.Replaced(0), 2);
  ASSERT_EQ(deaths.Replaced(1), 3);
  const ServerDeathVerdict v = deaths.Died(0);
  EXPECT_TRUE(v.survivable);
  EXPECT_EQ(Moves(v), (std::vector<std::pair<int, int>>{{0, 2}, {1, 3}}));
  EXPECT_EQ(v.unreplicated, (std::vector<int>{0, 1}));
  EXPECT_EQ(deaths.PlanReplacements(4).start, (std::vector<int>{0, 1}));
  ASSERT_EQ(deaths.Replaced(0), 4);
  ASSERT_EQ(deaths.Replaced(1), 5);
  // The limit (2 × 2) is reached: a shard left without a replica gets none.
  const ServerDeathVerdict w = deaths.Died(2);
  EXPECT_TRUE(w.survivable);
  EXPECT_EQ(Moves(w), (std::vector<std::pair<int, int>>{{0, 4}}));
  const ReplacementPlan plan = deaths.PlanReplacements(4);
  EXPECT_TRUE(plan.start.empty());
  EXPECT_EQ(plan.over_limit, (std::vector<int>{0}));
}

// Four processes: process 1 dies and shards 0 and 1 get replacements 4
// and 5; process 2, which served shard 1, dies next and replacement 5
// serves it; then replacement 5 dies with shard 1's last copy.
TEST(ServerDeathsTest, FourProcessesNeighbouringDeathsAfterAReplacement) {
  ServerDeaths deaths(4, 1);
  const ServerDeathVerdict first = deaths.Died(1);
  ASSERT_TRUE(first.survivable);
  EXPECT_EQ(first.unreplicated, (std::vector<int>{0, 1}));
  ASSERT_EQ(deaths.PlanReplacements(8).start, (std::vector<int>{0, 1}));
  ASSERT_EQ(deaths.Replaced(0), 4);
  ASSERT_EQ(deaths.Replaced(1), 5);
  const ServerDeathVerdict second = deaths.Died(2);
  EXPECT_TRUE(second.survivable);
  EXPECT_EQ(Moves(second), (std::vector<std::pair<int, int>>{{1, 5}, {2, 3}}));
  EXPECT_EQ(second.unreplicated, (std::vector<int>{1, 2}));
  EXPECT_EQ(deaths.Serving(0), 0);
  EXPECT_EQ(deaths.Holders(0), (std::vector<int>{0, 4}));
  const ServerDeathVerdict third = deaths.Died(5);
  EXPECT_FALSE(third.survivable);
  EXPECT_EQ(third.lost, (std::vector<int>{1}));
  EXPECT_EQ(DescribeServerDeath(third, deaths),
            "shard 1 is lost: every server process that held it (1, 2, replacement 5) is dead");
  EXPECT_EQ(deaths.PlanReplacements(8).start, (std::vector<int>{2}));  // a lost shard gets none
}

// The limit counts the replacements over the whole job.
TEST(ServerDeathsTest, ReplacementsStopAtTheLimit) {
  ServerDeaths deaths(3, 1);
  ASSERT_TRUE(deaths.Died(0).survivable);
  ReplacementPlan plan = deaths.PlanReplacements(1);
  EXPECT_EQ(plan.start, (std::vector<int>{0}));
  EXPECT_EQ(plan.over_limit, (std::vector<int>{2}));
  ASSERT_EQ(deaths.Replaced(0), 3);
  plan = deaths.PlanReplacements(1);
  EXPECT_TRUE(plan.start.empty());
  EXPECT_EQ(plan.over_limit, (std::vector<int>{2}));
  plan = deaths.PlanReplacements(0);
  EXPECT_TRUE(plan.start.empty());
}

// Two replicas, four processes (chains of three): process 0 dies; shard 0
// moves to process 1, and shards 0, 2 and 3, each a replica short, get a
// replacement each (4, 5, 6), which bring every chain back to three.
TEST(ServerDeathsTest, TwoReplicasRefillEveryShortChain) {
  ServerDeaths deaths(4, 2);
  const ServerDeathVerdict v = deaths.Died(0);
  EXPECT_TRUE(v.survivable);
  EXPECT_EQ(Moves(v), (std::vector<std::pair<int, int>>{{0, 1}}));
  EXPECT_TRUE(v.unreplicated.empty());
  EXPECT_EQ(v.short_chains, (std::vector<int>{0, 2, 3}));
  EXPECT_EQ(DescribeServerDeath(v, deaths),
            "shard 0 is served by server 1's replica now; shard 0 has 1 of 2 replicas left; shard 2 has 1 of 2 "
            "replicas left; shard 3 has 1 of 2 replicas left");
  const ReplacementPlan plan = deaths.PlanReplacements(8);
  EXPECT_EQ(plan.start, (std::vector<int>{0, 2, 3}));
  EXPECT_TRUE(plan.over_limit.empty());
  EXPECT_EQ(deaths.Replaced(0), 4);
  EXPECT_EQ(deaths.Replaced(2), 5);
  EXPECT_EQ(deaths.Replaced(3), 6);
  EXPECT_EQ(deaths.Holders(0), (std::vector<int>{1, 2, 4}));
  EXPECT_EQ(deaths.Holders(1), (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(deaths.Holders(2), (std::vector<int>{2, 3, 5}));
  EXPECT_EQ(deaths.Holders(3), (std::vector<int>{3, 1, 6}));
  EXPECT_TRUE(deaths.PlanReplacements(8).start.empty());
  EXPECT_EQ(deaths.replacements_started(), 3);
}

// Two replicas: a shard that lost two holders gets two replacements (they
// join it one after the other); the limit cuts the plan short.
TEST(ServerDeathsTest, TwoReplicasReplaceEveryMissingHolder) {
  ServerDeaths deaths(4, 2);
  ASSERT_TRUE(deaths.Died(1).survivable);
  EXPECT_EQ(deaths.PlanReplacements(8).start, (std::vector<int>{0, 1, 3}));
  const ServerDeathVerdict v = deaths.Died(0);
  ASSERT_TRUE(v.survivable);
  EXPECT_EQ(v.unreplicated, (std::vector<int>{0, 3}));
  EXPECT_EQ(v.short_chains, (std::vector<int>{0, 2, 3}));
  EXPECT_EQ(deaths.PlanReplacements(8).start, (std::vector<int>{0, 0, 1, 2, 3, 3}));
  const ReplacementPlan cut = deaths.PlanReplacements(5);
  EXPECT_EQ(cut.start, (std::vector<int>{0, 0, 1, 2, 3}));
  EXPECT_EQ(cut.over_limit, (std::vector<int>{3}));
  EXPECT_EQ(deaths.Replaced(0), 4);
  EXPECT_EQ(deaths.PlanReplacements(8).start, (std::vector<int>{0, 1, 2, 3, 3}));
}

// A replacement refused because its shard's chain is full (a process the
// launcher did not start joined it, or the primary has not noticed the
// death yet) is no death and holds nothing; the shard is planned again
// until three were refused so, and again once a death changes its chain.
TEST(ServerDeathsTest, AReplacementNotNeededLeavesTheChainAsItWas) {
  ServerDeaths deaths(4, 2);
  ASSERT_TRUE(deaths.Died(0).survivable);
  ASSERT_EQ(deaths.Replaced(0), 4);
  ASSERT_EQ(deaths.Replaced(2), 5);
  ASSERT_EQ(deaths.Replaced(3), 6);
  EXPECT_TRUE(deaths.NotNeeded(6));
  EXPECT_TRUE(deaths.dead(6));
  EXPECT_EQ(deaths.Holders(3), (std::vector<int>{3, 1}));
  EXPECT_EQ(deaths.held(3), (std::vector<int>{3, 0, 1}));
  EXPECT_EQ(deaths.replacements_started(), 3);
  EXPECT_EQ(deaths.PlanReplacements(12).start, (std::vector<int>{3}));
  ASSERT_EQ(deaths.Replaced(3), 7);
  EXPECT_TRUE(deaths.NotNeeded(7));
  ASSERT_EQ(deaths.Replaced(3), 8);
  EXPECT_FALSE(deaths.NotNeeded(8));
  EXPECT_TRUE(deaths.PlanReplacements(12).start.empty());
  EXPECT_EQ(deaths.Holders(3), (std::vector<int>{3, 1}));
  EXPECT_EQ(deaths.replacements_started(), 5);
  // Process 1 (shard 1's primary, in the chains of shards 0 and 3) dies.
  const ServerDeathVerdict v = deaths.Died(1);
  EXPECT_TRUE(v.survivable);
  EXPECT_EQ(v.short_chains, (std::vector<int>{0, 1, 3}));
  EXPECT_EQ(deaths.PlanReplacements(12).start, (std::vector<int>{0, 1, 3, 3}));
}

// No replicas: nothing to replace.
TEST(ServerDeathsTest, WithoutReplicasNothingIsReplaced) {
  ServerDeaths deaths(3, 0);
  (void)deaths.Died(1);
  const ReplacementPlan plan = deaths.PlanReplacements(6);
  EXPECT_TRUE(plan.start.empty());
  EXPECT_TRUE(plan.over_limit.empty());
}

// The job's end, 3 processes, one replica: server 0 died, replacements 3
// (shard 0, served by server 1) and 4 (shard 2, served by server 2) joined.
TEST(ServerDeathsTest, ReplacementsWhosePrimaryExitedAreLeftOver) {
  ServerDeaths deaths(3, 1);
  ASSERT_TRUE(deaths.Died(0).survivable);
  ASSERT_EQ(deaths.Replaced(0), 3);
  ASSERT_EQ(deaths.Replaced(2), 4);
  // Both primaries still run: each replacement ends with its primary.
  EXPECT_TRUE(LeftOverReplacements(deaths, {false, true, true, true, true}).empty());
  // Server 1 (shard 0's primary) exited: replacement 3 waits for nothing.
  EXPECT_EQ(LeftOverReplacements(deaths, {false, true, false, true, true}), (std::vector<int>{4}));
  EXPECT_EQ(LeftOverReplacements(deaths, {false, false, true, true, true}), (std::vector<int>{3}));
  // Every server exited; replacement 4 exited by itself already.
  EXPECT_EQ(LeftOverReplacements(deaths, {false, false, false, true, false}), (std::vector<int>{3}));
  EXPECT_EQ(LeftOverReplacements(deaths, {false, false, false, true, true}), (std::vector<int>{3, 4}));
  EXPECT_TRUE(LeftOverReplacements(deaths, {false, false, false, false, false}).empty());
}

// A replacement that claimed its shard serves it: it ends the shard itself
// and is never left over; one joining it after the claim is, once it is gone.
TEST(ServerDeathsTest, AReplacementServingItsShardIsNotLeftOver) {
  ServerDeaths deaths(3, 1);
  ASSERT_TRUE(deaths.Died(0).survivable);
  ASSERT_EQ(deaths.Replaced(0), 3);
  ASSERT_EQ(deaths.Replaced(2), 4);
  ASSERT_TRUE(deaths.Died(2).survivable);  // replacement 4 claims shard 2
  ASSERT_EQ(deaths.Serving(2), 4);
  EXPECT_TRUE(LeftOverReplacements(deaths, {false, true, false, true, true}).empty());
  ASSERT_EQ(deaths.Replaced(2), 5);  // a new replica of shard 2, joining replacement 4
  EXPECT_TRUE(LeftOverReplacements(deaths, {false, true, false, true, true, true}).empty());
  EXPECT_EQ(LeftOverReplacements(deaths, {false, true, false, true, false, true}), (std::vector<int>{5}));
  EXPECT_EQ(LeftOverReplacements(deaths, {false, false, false, true, false, true}), (std::vector<int>{3, 5}));
}

// 3 processes, one replica, processes 1 and 2 stopped (SIGSTOP); process 0
// claimed shard 2 from process 2, which the launcher then killed. Shard 1
// is held by process 1 alone, stopped: it is the shard lost, not shard 0
// or 2, which process 0 serves (and whose exit on the job's abort would
// lose shard 2 only then).
TEST(ServerDeathsTest, AShardWhoseEveryHolderLeftIsStoppedIsTheOneLost) {
  ServerDeaths deaths(3, 1);
  std::vector<bool> stopped = {false, true, true};
  EXPECT_EQ(ShardsOnStoppedHolders(deaths, stopped), (std::vector<int>{1}));
  ASSERT_TRUE(deaths.Died(2).survivable);
  stopped[2] = false;  // dead, no longer a holder
  EXPECT_EQ(ShardsOnStoppedHolders(deaths, stopped), (std::vector<int>{1}));
  EXPECT_EQ(DescribeStoppedShards({1}, deaths),
            "shard 1 is lost: every server process left that holds it (1) is stopped");
  // Nothing stopped: no shard; process 0 stopped: shard 2, which it alone
  // holds, not shard 0, which process 1 holds too.
  EXPECT_TRUE(ShardsOnStoppedHolders(deaths, {false, false, false}).empty());
  EXPECT_EQ(ShardsOnStoppedHolders(deaths, {true, false, false}), (std::vector<int>{2})) << "its one holder left";
  EXPECT_EQ(DescribeStoppedShards({}, deaths), "");
}

// Several shards, replacements among the holders: a shard is lost only when
// every live holder, replacement or not, is stopped.
TEST(ServerDeathsTest, AStoppedReplacementCountsAsAStoppedHolder) {
  ServerDeaths deaths(4, 1);
  ASSERT_TRUE(deaths.Died(0).survivable);  // shard 0 on 1; shard 3 without its copy
  const int r = deaths.Replaced(3);        // replacement 4 copies shard 3
  EXPECT_EQ(r, 4);
  EXPECT_EQ(ShardsOnStoppedHolders(deaths, {false, false, false, true, false}), (std::vector<int>{}));
  EXPECT_EQ(ShardsOnStoppedHolders(deaths, {false, false, false, true, true}), (std::vector<int>{3}));
  EXPECT_EQ(ShardsOnStoppedHolders(deaths, {false, true, true, true, true}), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(DescribeStoppedShards({0, 3}, deaths),
            "shard 0 is lost: every server process left that holds it (1) is stopped; shard 3 is lost: every "
            "server process left that holds it (3, 4) is stopped");
}

}  // namespace
}  // namespace tether
