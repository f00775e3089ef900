#include "server/shard_metrics.h"

#include <gtest/gtest.h>

#include "tests/testing/exposition.h"

namespace tether {
namespace {

ShardMetricsSnapshot Snapshot() {
  ShardMetricsSnapshot snap;
  snap.published = true;
  snap.running = true;
  ShardStats& s = snap.stats;
  s.set_shard(1);
  s.set_pulls(11);
  s.set_pushes(7);
  s.set_rows_pulled(300);
  s.set_rows_pushed(290);
  s.set_updates_applied(295);
  s.set_bytes_in(123456789);
  s.set_bytes_out(987654321);
  s.set_deferred_pulls(2);
  s.mutable_key_lists()->set_used(4);
  s.mutable_key_lists()->set_unknown(1);
  s.mutable_key_lists()->set_bytes_saved(32768);
  // τ = 0: 3 pushes, τ = 1: 2, τ = 4: 1, τ ≥ 63: 1 (the last of 64 buckets).
  for (int tau = 0; tau < StalenessHistogram::kBuckets; ++tau)
    s.add_staleness_histogram(tau == 0 ? 3 : tau == 1 ? 2 : tau == 4 ? 1 : tau == 63 ? 1 : 0);
  s.set_staleness_sum(0 + 2 + 4 + 70);
  s.set_staleness_max(70);
  s.add_bound_wait_seconds(0.25);
  s.add_bound_wait_seconds(0);
  snap.worker_clocks = {7, 5};
  snap.min_clock = 5;
  return snap;
}

TEST(ShardMetricsTest, RendersCountersClocksAndACumulativeStalenessHistogram) {
  const std::string text = RenderShardMetrics(Snapshot(), "bib\"tex", 1);
  EXPECT_EQ(testing::ExpositionProblems(text), "");
  const std::string l = "{tether_job=\"bib\\\"tex\",role=\"server\",shard=\"1\"";
  for (const std::string& want : {
           "tether_training_active" + l + "} 1\n",
           "tether_server_pulls_total" + l + "} 11\n",
           "tether_server_pushes_total" + l + "} 7\n",
           "tether_server_updates_applied_total" + l + "} 295\n",
           "tether_server_received_bytes_total" + l + "} 123456789\n",
           "tether_server_sent_bytes_total" + l + "} 987654321\n",
           "tether_server_deferred_pulls_total" + l + "} 2\n",
           "tether_server_bound_violations_total" + l + "} 0\n",
           "tether_server_key_lists_defined_total" + l + "} 0\n",
           "tether_server_key_lists_used_total" + l + "} 4\n",
           "tether_server_key_lists_unknown_total" + l + "} 1\n",
           "tether_server_key_lists_saved_bytes_total" + l + "} 32768\n",
           "tether_server_min_clock" + l + "} 5\n",
           "tether_server_worker_clock" + l + ",worker_rank=\"0\"} 7\n",
           "tether_server_worker_clock" + l + ",worker_rank=\"1\"} 5\n",
           "tether_server_bound_wait_seconds_total" + l + ",worker_rank=\"0\"} 0.25\n",
           "tether_server_bound_wait_seconds_total" + l + ",worker_rank=\"1\"} 0\n",
           std::string("# TYPE tether_server_push_staleness histogram\n"),
           "tether_server_push_staleness_bucket" + l + ",le=\"0\"} 3\n",
           "tether_server_push_staleness_bucket" + l + ",le=\"1\"} 5\n",
           "tether_server_push_staleness_bucket" + l + ",le=\"3\"} 5\n",
           "tether_server_push_staleness_bucket" + l + ",le=\"4\"} 6\n",
           "tether_server_push_staleness_bucket" + l + ",le=\"62\"} 6\n",
           // τ ≥ 63 is counted in +Inf only.
           "tether_server_push_staleness_bucket" + l + ",le=\"+Inf\"} 7\n",
           "tether_server_push_staleness_sum" + l + "} 76\n",
           "tether_server_push_staleness_count" + l + "} 7\n",
           "tether_server_push_staleness_max" + l + "} 70\n",
       }) {
    EXPECT_NE(text.find(want), std::string::npos) << "missing: " << want << "\nin:\n" << text;
  }
}

// A failover counted on the shard (ServerShard::RecordFailover) reaches
// its STATS_REPLY counters and its /metrics page.
TEST(ShardMetricsTest, FailoversFlowFromTheShardToItsPage) {
  JobConfig config;
  config.mutable_cluster()->set_num_servers(2);
  config.mutable_cluster()->set_num_workers(1);
  config.mutable_cluster()->set_replicas(1);
  ServerShard shard(config, 1);
  EXPECT_EQ(shard.SnapshotStats().failovers(), 0u);
  shard.RecordFailover(0.75);
  shard.RecordFailover(1.5);
  EXPECT_EQ(shard.stats().failovers, 2u);
  EXPECT_EQ(shard.stats().failover_seconds, 2.25);
  ShardMetricsSnapshot snap;
  snap.published = true;
  snap.stats = shard.SnapshotStats();
  EXPECT_EQ(snap.stats.failovers(), 2u);
  EXPECT_EQ(snap.stats.failover_seconds(), 2.25);
  const std::string text = RenderShardMetrics(snap, "job", 1);
  EXPECT_EQ(testing::ExpositionProblems(text), "");
  const std::string l = "{tether_job=\"job\",role=\"server\",shard=\"1\"}";
  for (const std::string& want : {std::string("# TYPE tether_server_failovers_total counter\n"),
                                  "tether_server_failovers_total" + l + " 2\n",
                                  std::string("# TYPE tether_server_failover_seconds_total counter\n"),
                                  "tether_server_failover_seconds_total" + l + " 2.25\n"})
    EXPECT_NE(text.find(want), std::string::npos) << "missing: " << want << "\nin:\n" << text;
}

TEST(ShardMetricsTest, RendersEachTablesRowsAndBudgetCounters) {
  ShardMetricsSnapshot snap = Snapshot();
  snap.table_names = {"w1", "b1"};
  ShardStats& s = snap.stats;
  s.add_table_rows(40);
  s.add_table_rows(0);
  s.add_rows_admitted(55);
  s.add_rows_admitted(0);
  s.add_rows_evicted(15);
  s.add_rows_evicted(0);
  s.add_rows_not_admitted(900);
  s.add_rows_not_admitted(0);
  s.add_resident_bytes(123456);
  s.add_resident_bytes(1024);
  snap.memory_budget_bytes = 2000000;
  const std::string text = RenderShardMetrics(snap, "j", 0);
  EXPECT_EQ(testing::ExpositionProblems(text), "");
  const std::string l = "{tether_job=\"j\",role=\"server\",shard=\"0\",table=";
  for (const std::string& want : {
           std::string("# TYPE tether_server_table_rows gauge\n"),
           "tether_server_table_rows" + l + "\"w1\"} 40\n",
           "tether_server_table_rows" + l + "\"b1\"} 0\n",
           std::string("# TYPE tether_server_rows_admitted_total counter\n"),
           "tether_server_rows_admitted_total" + l + "\"w1\"} 55\n",
           "tether_server_rows_evicted_total" + l + "\"w1\"} 15\n",
           "tether_server_rows_not_admitted_total" + l + "\"w1\"} 900\n",
           "tether_server_resident_bytes" + l + "\"w1\"} 123456\n",
           "tether_server_resident_bytes" + l + "\"b1\"} 1024\n",
           std::string("# TYPE tether_server_memory_budget_bytes gauge\n"),
           std::string("tether_server_memory_budget_bytes{tether_job=\"j\",role=\"server\",shard=\"0\"} 2000000\n"),
       }) {
    EXPECT_NE(text.find(want), std::string::npos) << "missing: " << want << "\nin:\n" << text;
  }
}

TEST(ShardMetricsTest, AHistogramCutShortAndAFinishedShard) {
  ShardMetricsSnapshot snap;  // never published: zeros, not training
  snap.stats.add_staleness_histogram(0);
  const std::string text = RenderShardMetrics(snap, "j", 0);
  EXPECT_EQ(testing::ExpositionProblems(text), "");
  const std::string l = "{tether_job=\"j\",role=\"server\",shard=\"0\"";
  EXPECT_NE(text.find("tether_training_active" + l + "} 0\n"), std::string::npos);
  EXPECT_NE(text.find("tether_server_push_staleness_bucket" + l + ",le=\"62\"} 0\n"), std::string::npos);
  EXPECT_NE(text.find("tether_server_push_staleness_count" + l + "} 0\n"), std::string::npos);
  // No workers known yet: the per-worker families have no samples.
  EXPECT_EQ(text.find("worker_rank="), std::string::npos);
}

}  // namespace
}  // namespace tether
