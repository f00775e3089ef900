// The bounds of a job config's counts, sizes and durations
// (ValidateCountBounds, ValidateDurations): each refused naming its field
// and the limit, through ValidateServerConfig (what a server checks) and
// ValidateJobConfig alike; and values derived from a minibatch size at the
// limit stay in range.
#include <gtest/gtest.h>

#include <string>

#include "core/config.h"

namespace tether {
namespace {

JobConfig Bibtex() {
  auto c = LoadJobConfig("tests/data/bibtex_fixed.pbtxt");
  EXPECT_TRUE(c.ok()) << c.status().message();
  return c.ok() ? *c : JobConfig();
}

TEST(ConfigBoundsTest, ComputeThreadsAboveTheLimitAreRefused) {
  JobConfig j = Bibtex();
  j.mutable_train()->set_threads(1024);
  EXPECT_TRUE(ValidateJobConfig(j).ok()) << ValidateJobConfig(j).message();
  j.mutable_train()->set_threads(100000);
  EXPECT_EQ(ValidateJobConfig(j).message(),
            "config field train.threads: is 100000, above the limit 1024 (compute threads each worker starts; past "
            "its host's cores they only contend for them)");
  j.mutable_train()->set_threads(0);
  EXPECT_EQ(ValidateJobConfig(j).message(), "config field train.threads: must be ≥ 1");
}

TEST(ConfigBoundsTest, WorkerAndServerCountsAboveTheLimitAreRefused) {
  EXPECT_EQ(kMaxJobRanks, 65536);
  JobConfig j = Bibtex();
  j.mutable_cluster()->set_num_workers(kMaxJobRanks);
  EXPECT_TRUE(ValidateServerConfig(j).ok()) << ValidateServerConfig(j).message();
  j.mutable_cluster()->set_num_workers(2147483647);
  EXPECT_EQ(ValidateServerConfig(j).message(),
            "config field cluster.num_workers: is 2147483647, above the limit 65536 (every shard keeps a clock and a "
            "slot per worker rank)");
  EXPECT_EQ(ValidateJobConfig(j).message(), ValidateServerConfig(j).message());
  j = Bibtex();
  j.mutable_cluster()->set_max_workers(kMaxJobRanks + 1);
  EXPECT_EQ(ValidateServerConfig(j).message(),
            "config field cluster.max_workers: is 65537, above the limit 65536 (every shard keeps a clock and a "
            "slot per worker rank)");
  j = Bibtex();
  j.mutable_cluster()->set_num_servers(100000000);
  EXPECT_EQ(ValidateServerConfig(j).message(),
            "config field cluster.num_servers: is 100000000, above the limit 65536 (every worker keeps a "
            "connection and request state per shard)");
}

TEST(ConfigBoundsTest, NegativeHighWaterMarksAreRefusedZeroMeansNoLimit) {
  JobConfig j = Bibtex();
  j.mutable_cluster()->set_send_hwm(-1);
  EXPECT_EQ(ValidateJobConfig(j).message(),
            "config field cluster.send_hwm: must be ≥ 0 messages (0: no limit), got -1");
  j = Bibtex();
  j.mutable_cluster()->set_recv_hwm(-5);
  EXPECT_EQ(ValidateServerConfig(j).message(),
            "config field cluster.recv_hwm: must be ≥ 0 messages (0: no limit), got -5");
  j = Bibtex();
  j.mutable_cluster()->set_send_hwm(0);
  j.mutable_cluster()->set_recv_hwm(0);
  EXPECT_TRUE(ValidateJobConfig(j).ok()) << ValidateJobConfig(j).message();
}

TEST(ConfigBoundsTest, MinibatchSizesAboveTheLimitAreRefusedNamingTheField) {
  JobConfig j = Bibtex();
  j.mutable_train()->set_minibatch_size(2147483647);
  EXPECT_EQ(ValidateJobConfig(j).message(),
            "config field train.minibatch_size: is 2147483647, above the limit 16777216 (rows per minibatch)");
  j = Bibtex();
  j.mutable_train()->set_eval_minibatch_size(kMaxMinibatchRows + 1);
  EXPECT_EQ(ValidateJobConfig(j).message(),
            "config field train.eval_minibatch_size: is 16777217, above the limit 16777216 (rows per minibatch)");
  // At the limit the derived sizes are 4 × it, positive.
  j = Bibtex();
  j.mutable_train()->set_minibatch_size(kMaxMinibatchRows);
  EXPECT_TRUE(ValidateJobConfig(j).ok()) << ValidateJobConfig(j).message();
  EXPECT_EQ(ResolvedAdaptiveBatch(j.train()).b_max(), 4 * kMaxMinibatchRows);
  EXPECT_EQ(EffectiveChunkRows(j.train()), int64_t{4} * kMaxMinibatchRows);
  // Past it, b_max saturates rather than wrapping to a negative count.
  j.mutable_train()->set_minibatch_size(2147483647);
  EXPECT_EQ(ResolvedAdaptiveBatch(j.train()).b_max(), 2147483647);
}

TEST(ConfigBoundsTest, TimeoutsOfZeroOrLessAreRefused) {
  const auto with = [](void (ClusterConfig::*set)(int32_t), int32_t v) {
    JobConfig j = Bibtex();
    (j.mutable_cluster()->*set)(v);
    return ValidateServerConfig(j).message();
  };
  EXPECT_EQ(with(&ClusterConfig::set_startup_timeout_ms, -5),
            "config field cluster.startup_timeout_ms: must be ≥ 1 ms, got -5");
  EXPECT_EQ(with(&ClusterConfig::set_startup_timeout_ms, 0),
            "config field cluster.startup_timeout_ms: must be ≥ 1 ms, got 0");
  EXPECT_EQ(with(&ClusterConfig::set_request_timeout_ms, -1),
            "config field cluster.request_timeout_ms: must be ≥ 1 ms, got -1");
  EXPECT_EQ(with(&ClusterConfig::set_idle_timeout_ms, -300000),
            "config field cluster.idle_timeout_ms: must be ≥ 1 ms, got -300000");
  EXPECT_EQ(with(&ClusterConfig::set_worker_timeout_ms, -10),
            "config field cluster.worker_timeout_ms: must be ≥ 1 ms, got -10");
  EXPECT_EQ(with(&ClusterConfig::set_heartbeat_interval_ms, 0),
            "config field cluster.heartbeat_interval_ms: must be ≥ 1 ms, got 0");
  EXPECT_EQ(with(&ClusterConfig::set_debug_request_delay_ms, -1),
            "config field cluster.debug_request_delay_ms: must be ≥ 0 ms (0: no delay), got -1");
  EXPECT_EQ(with(&ClusterConfig::set_liveness_timeout_ms, -1),
            "config field cluster.liveness_timeout_ms: must be ≥ 100, or 0 (off)");
  EXPECT_EQ(with(&ClusterConfig::set_startup_timeout_ms, 1), "");
}

}  // namespace
}  // namespace tether
