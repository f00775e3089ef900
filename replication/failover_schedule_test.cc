// Random schedules of replicated shards (replication/failover_sim.h): kills,
// pauses and joins with chains of two, three and four members, forwarded
// along the chain or fanned out from the primary (as tether-server does),
// each schedule checked for exactly-once, in-order application on every
// live member and committed, bounded reads.
#include <cstdio>

#include <gtest/gtest.h>

#include "replication/failover_sim.h"

namespace tether {
namespace {

void Print(const char* what, const ScheduleCounts& c) {
  std::printf("%s: %d reads, %d failovers, %d duplicates, %d joins, %d deposed, %d stale; killed %d primaries, "
              "%d middles, %d tails, %d learners\n",
              what, c.reads, c.failovers, c.duplicates, c.joins, c.deposed, c.stale_refused, c.killed_primaries,
              c.killed_middles, c.killed_tails, c.killed_learners);
}

// Runs a schedule; the first few seeds say what they did.
ScheduleCounts Schedule(const ScheduleOptions& o) {
  const ScheduleCounts c = RunSchedule(o);
  if (o.seed < 10)
    std::printf("schedule %u (%d processes, %d replicas): %d reads, %d failovers, %d resends, %d duplicates, "
                "%d joins, %d rejoins, %d deposed, %d stale; killed %d primaries, %d middles, %d tails, %d learners\n",
                o.seed, o.processes, o.replicas, c.reads, c.failovers, c.resends, c.duplicates, c.joins, c.rejoins,
                c.deposed, c.stale_refused, c.killed_primaries, c.killed_middles, c.killed_tails, c.killed_learners);
  return c;
}

// Runs the schedule options(seed) for every seed in [first, last) and sums
// their counts; stops at the first schedule that fails, naming its seed.
template <typename Options>
ScheduleCounts ScheduleSeeds(uint32_t first, uint32_t last, Options options) {
  ScheduleCounts total;
  for (uint32_t seed = first; seed < last; ++seed) {
    total += Schedule(options(seed));
    if (::testing::Test::HasFailure()) {
      ADD_FAILURE() << "seed " << seed;
      break;
    }
  }
  return total;
}

TEST(FailoverScheduleTest, KillsWithOneReplica) {
  const ScheduleCounts c = Schedule({.processes = 3, .replicas = 1, .workers = 2, .staleness = 0, .steps = 20000, .seed = 1});
  EXPECT_GT(c.reads, 50);
  EXPECT_GT(c.failovers, 0);
  EXPECT_GT(c.resends, 0);
}

TEST(FailoverScheduleTest, KillsAndPausesWithTwoReplicasUnderSsp) {
  const ScheduleCounts c = Schedule(
      {.processes = 4, .replicas = 2, .workers = 3, .staleness = 2, .steps = 20000, .seed = 2, .pauses = true});
  EXPECT_GT(c.reads, 50);
  EXPECT_GT(c.failovers, 0);
  EXPECT_GT(c.deposed, 0);
  EXPECT_GT(c.stale_refused, 0);
}

TEST(FailoverScheduleTest, ReplicasJoinWhileTrainingGoesOn) {
  const ScheduleCounts c = Schedule({.processes = 3,
                           .replicas = 1,
                           .workers = 2,
                           .staleness = 1,
                           .steps = 20000,
                           .seed = 3,
                           .pauses = true,
                           .joins = true});
  EXPECT_GT(c.joins, 0);
  EXPECT_GT(c.failovers, 0);
}

// Chains of three (primary, middle, tail): kills of each, pauses, and
// processes that join as learners and are appended as the new tail.
TEST(FailoverScheduleTest, ChainsOfThreeLoseEveryPlaceAndGrowBack) {
  const ScheduleCounts c = Schedule({.processes = 4,
                           .replicas = 2,
                           .workers = 3,
                           .staleness = 1,
                           .steps = 20000,
                           .seed = 4,
                           .pauses = true,
                           .joins = true});
  EXPECT_GT(c.reads, 20);
  EXPECT_GT(c.killed_primaries, 0);
  EXPECT_GT(c.killed_middles, 0);
  EXPECT_GT(c.killed_tails, 0);
  EXPECT_GT(c.joins, 0);
  EXPECT_GT(c.failovers, 0);
  EXPECT_GT(c.resends, 0);
}

TEST(FailoverScheduleTest, ManySeeds) {
  const ScheduleCounts total = ScheduleSeeds(10, 110, [](uint32_t seed) {
    return ScheduleOptions{.processes = static_cast<int>(3 + seed % 2),
                           .replicas = static_cast<int>(1 + seed % 2),
                           .workers = static_cast<int>(2 + seed % 2),
                           .staleness = static_cast<int64_t>(seed % 3) - 1,
                           .steps = 2000,
                           .seed = seed,
                           .pauses = seed % 3 != 0,
                           .joins = seed % 2 == 0};
  });
  if (HasFailure()) return;
  Print("100 schedules", total);
  EXPECT_GT(total.reads, 500);
  EXPECT_GT(total.failovers, 300);
  EXPECT_GT(total.stale_refused, 20);
  EXPECT_GT(total.duplicates, 200);
  EXPECT_GT(total.joins, 100);
  EXPECT_GT(total.deposed, 20);
}

// Chains of three and four under every consistency model, with kills,
// pauses and joins in every schedule.
TEST(FailoverScheduleTest, ManySeedsOfLongChains) {
  const ScheduleCounts total = ScheduleSeeds(200, 300, [](uint32_t seed) {
    return ScheduleOptions{.processes = static_cast<int>(4 + seed % 2),
                           .replicas = static_cast<int>(2 + seed % 2),
                           .workers = static_cast<int>(2 + seed % 3),
                           .staleness = static_cast<int64_t>(seed % 3) - 1,
                           .steps = 2000,
                           .seed = seed,
                           .pauses = true,
                           .joins = true};
  });
  if (HasFailure()) return;
  Print("100 schedules of chains of 3 and 4", total);
  EXPECT_GT(total.reads, 300);
  EXPECT_GT(total.killed_primaries, 50);
  EXPECT_GT(total.killed_middles, 50);
  EXPECT_GT(total.killed_tails, 50);
  EXPECT_GT(total.joins, 100);
  EXPECT_GT(total.deposed, 10);
}

// Fan-out, as tether-server replicates: the primary sends to each replica;
// a claim leaves the later copies out and they join the claimant again.
TEST(FailoverScheduleTest, FanOutChainsOfThreeLoseEveryPlaceAndRejoin) {
  const ScheduleCounts c = Schedule({.processes = 4,
                                     .replicas = 2,
                                     .workers = 3,
                                     .staleness = 1,
                                     .steps = 20000,
                                     .seed = 5,
                                     .pauses = true,
                                     .joins = true,
                                     .fan_out = true});
  EXPECT_GT(c.reads, 0);
  EXPECT_GT(c.killed_primaries, 0);
  EXPECT_GT(c.killed_middles, 0);
  EXPECT_GT(c.killed_tails, 0);
  EXPECT_GT(c.rejoins, 0);
  EXPECT_GT(c.joins, 0);
  EXPECT_GT(c.failovers, 0);
  EXPECT_GT(c.resends, 0);
}

TEST(FailoverScheduleTest, ManySeedsOfFanOutChains) {
  const ScheduleCounts total = ScheduleSeeds(300, 400, [](uint32_t seed) {
    return ScheduleOptions{.processes = static_cast<int>(3 + seed % 3),
                           .replicas = static_cast<int>(1 + seed % 2),
                           .workers = static_cast<int>(2 + seed % 2),
                           .staleness = static_cast<int64_t>(seed % 3) - 1,
                           .steps = 2000,
                           .seed = seed,
                           .pauses = seed % 4 != 0,
                           .joins = seed % 5 != 0,
                           .fan_out = true};
  });
  if (HasFailure()) return;
  Print("100 fan-out schedules", total);
  std::printf("  %d copies left out by a claim asked to join again\n", total.rejoins);
  EXPECT_GT(total.reads, 300);
  EXPECT_GT(total.killed_primaries, 50);
  EXPECT_GT(total.killed_middles, 20);
  EXPECT_GT(total.killed_tails, 50);
  EXPECT_GT(total.rejoins, 20);
  EXPECT_GT(total.joins, 50);
  EXPECT_GT(total.deposed, 10);
}

}  // namespace
}  // namespace tether
