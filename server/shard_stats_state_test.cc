// The shard's counters copied (SaveState / RestoreState): every counter,
// the staleness histogram and failover_seconds come back as they were, and
// malformed copies are refused naming the field.
#include "server/shard_stats_state.h"

#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <limits>

namespace tether {
namespace {

using google::protobuf::util::MessageDifferencer;

ServerStats Counted() {
  ServerStats s;
  uint64_t n = 1;
#define TETHER_SET_COUNTER(name) s.name = n++;
  TETHER_SERVER_COUNTERS(TETHER_SET_COUNTER)
#undef TETHER_SET_COUNTER
  for (uint64_t tau : {0, 0, 3, 7, 70, 2}) s.staleness.Add(tau);
  s.RecordFailover(0.25);
  return s;
}

TEST(ShardStatsStateTest, ARestoredCopyHoldsEveryCounterAndCountsOnTheSame) {
  ServerStats a = Counted();
  ServerStatsState saved;
  SaveState(a, &saved);
  EXPECT_EQ(saved.pulls(), 1u);
  EXPECT_EQ(saved.failovers(), 16u);  // 15, then RecordFailover's one
  EXPECT_EQ(saved.staleness_count_size(), 64);  // τ = 70 lands in the last bucket
  EXPECT_EQ(saved.staleness_pushes(), 6u);
  EXPECT_EQ(saved.staleness_sum(), 82u);
  EXPECT_EQ(saved.staleness_max(), 70u);
  ServerStats b;
  ASSERT_TRUE(RestoreState(saved, &b).ok());
  ServerStatsState again;
  SaveState(b, &again);
  EXPECT_TRUE(MessageDifferencer::Equals(saved, again)) << again.DebugString();
#define TETHER_EXPECT_COUNTER(name) EXPECT_EQ(b.name, a.name) << #name;
  TETHER_SERVER_COUNTERS(TETHER_EXPECT_COUNTER)
#undef TETHER_EXPECT_COUNTER
  EXPECT_EQ(b.staleness.count[0], 2u);
  EXPECT_EQ(b.staleness.count[63], 1u);
  EXPECT_EQ(b.failover_seconds, 0.25);
  for (ServerStats* s : {&a, &b}) {
    s->staleness.Add(1);
    s->RecordFailover(0.5);
    ++s->pushes;
  }
  ServerStatsState sa, sb;
  SaveState(a, &sa);
  SaveState(b, &sb);
  EXPECT_TRUE(MessageDifferencer::Equals(sa, sb));
  EXPECT_EQ(b.staleness.mean(), a.staleness.mean());
  EXPECT_EQ(b.failover_seconds, 0.75);
}

TEST(ShardStatsStateTest, AnEmptyHistogramTravelsAsNoBuckets) {
  ServerStatsState saved;
  SaveState(ServerStats(), &saved);
  EXPECT_EQ(saved.staleness_count_size(), 0);
  ServerStats b = Counted();
  ASSERT_TRUE(RestoreState(saved, &b).ok());
  EXPECT_EQ(b.pulls, 0u);
  EXPECT_EQ(b.staleness.pushes, 0u);
  EXPECT_EQ(b.staleness.count[63], 0u);
}

TEST(ShardStatsStateTest, AMalformedStateIsRefusedNamingTheField) {
  ServerStatsState good;
  SaveState(Counted(), &good);
  auto refused = [](const ServerStatsState& s) {
    ServerStats fresh;
    const Status st = RestoreState(s, &fresh);
    EXPECT_EQ(st.code(), Status::Code::kDataLoss);
    EXPECT_EQ(fresh.pulls, 0u);  // left as it was
    return st.message();
  };
  ServerStatsState s = good;
  s.add_staleness_count(0);
  EXPECT_EQ(refused(s), "shard state: stats.staleness_count: 65 buckets, at most 64");
  s = good;
  s.set_staleness_pushes(7);
  EXPECT_EQ(refused(s), "shard state: stats.staleness_pushes: 7, the buckets sum to 6");
  s = good;
  s.set_staleness_max(5);
  EXPECT_EQ(refused(s), "shard state: stats.staleness_count[7]: 1 pushes past staleness_max 5");
  s = good;
  s.set_staleness_count(0, std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(refused(s), "shard state: stats.staleness_count: the buckets' sum overflows");
  s = good;
  s.set_failover_seconds(-1);
  EXPECT_EQ(refused(s), "shard state: stats.failover_seconds: -1.000000 (a sum of seconds, finite and ≥ 0)");
  s = good;
  s.set_failover_seconds(std::numeric_limits<double>::quiet_NaN());
  EXPECT_EQ(refused(s), "shard state: stats.failover_seconds: nan (a sum of seconds, finite and ≥ 0)");
}

}  // namespace
}  // namespace tether
