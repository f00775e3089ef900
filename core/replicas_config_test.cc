// cluster.replicas in a job config: the range a server refuses, the
// in-process job that cannot hold replicas, and the --replicas override.
#include <gtest/gtest.h>

#include <string>

#include "core/config.h"

namespace tether {
namespace {

JobConfig ThreeServers(int replicas) {
  JobConfig j;
  j.mutable_cluster()->set_num_servers(3);
  j.mutable_cluster()->set_num_workers(2);
  j.mutable_cluster()->set_replicas(replicas);
  return j;
}

TEST(ReplicasConfigTest, ServersRefuseNegativeCountsAndAsManyAsTheServers) {
  EXPECT_TRUE(ValidateServerConfig(ThreeServers(0)).ok());
  EXPECT_TRUE(ValidateServerConfig(ThreeServers(1)).ok());
  EXPECT_TRUE(ValidateServerConfig(ThreeServers(2)).ok()) << "a chain of three: the primary and two replicas";
  JobConfig many = ThreeServers(9);
  many.mutable_cluster()->set_num_servers(12);
  EXPECT_EQ(ValidateServerConfig(many).message(),
            "config field cluster.replicas: is 9, but a shard holds at most 8 replicas (each server process holds a "
            "copy of as many shards)");
  many.mutable_cluster()->set_replicas(8);
  EXPECT_TRUE(ValidateServerConfig(many).ok());
  EXPECT_EQ(ValidateServerConfig(ThreeServers(-1)).message(),
            "config field cluster.replicas: must be ≥ 0 (0: no replicas), got -1");
  EXPECT_EQ(ValidateServerConfig(ThreeServers(3)).message(),
            "config field cluster.replicas: is 3, but must be < cluster.num_servers = 3: each copy of a shard lives "
            "on another server process");
  JobConfig one = ThreeServers(1);
  one.mutable_cluster()->set_num_servers(1);
  EXPECT_EQ(ValidateServerConfig(one).message(),
            "config field cluster.replicas: is 1, but must be < cluster.num_servers = 1: each copy of a shard lives "
            "on another server process");
  EXPECT_EQ(ValidateServerConfig(one).code(), Status::Code::kInvalidArgument);
}

// An idle replica acknowledges once per heartbeat interval: a liveness
// timeout below two intervals would drop it as silent.
TEST(ReplicasConfigTest, ALivenessTimeoutBelowTwoHeartbeatsIsRefusedWithReplicas) {
  JobConfig j = ThreeServers(1);
  j.mutable_cluster()->set_liveness_timeout_ms(300);
  const Status refused = ValidateServerConfig(j);
  EXPECT_EQ(refused.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(refused.message(),
            "config field cluster.liveness_timeout_ms: is 300 ms, below 2 × cluster.heartbeat_interval_ms (2 × 1000 "
            "= 2000 ms): with cluster.replicas an idle replica acknowledges once per heartbeat interval and would be "
            "dropped as silent; raise cluster.liveness_timeout_ms (--liveness_timeout_ms) to 2000 or more, or lower "
            "cluster.heartbeat_interval_ms");
  EXPECT_EQ(ValidateJobConfig(j).message(), refused.message()) << "workers refuse it the same way";
  j.mutable_cluster()->set_liveness_timeout_ms(1999);
  EXPECT_FALSE(ValidateServerConfig(j).ok());
  j.mutable_cluster()->set_liveness_timeout_ms(2000);
  EXPECT_TRUE(ValidateServerConfig(j).ok());
  j.mutable_cluster()->set_liveness_timeout_ms(0);
  EXPECT_TRUE(ValidateServerConfig(j).ok()) << "0: off";
  j.mutable_cluster()->set_liveness_timeout_ms(300);
  j.mutable_cluster()->set_heartbeat_interval_ms(150);
  EXPECT_TRUE(ValidateServerConfig(j).ok());
  JobConfig unreplicated = ThreeServers(0);
  unreplicated.mutable_cluster()->set_liveness_timeout_ms(300);
  EXPECT_TRUE(ValidateServerConfig(unreplicated).ok()) << "without replicas nothing waits on the heartbeat";
  EXPECT_EQ(JobConfig().cluster().liveness_timeout_ms(), 5000);
  EXPECT_GE(JobConfig().cluster().liveness_timeout_ms(), 2 * JobConfig().cluster().heartbeat_interval_ms());
}

TEST(ReplicasConfigTest, InProcessEndpointsAndJobsHoldNoReplicas) {
  JobConfig j = ThreeServers(1);
  for (const char* a : {"tcp://h0:5000", "inproc://tether-shard-1", "tcp://h2:5000"})
    j.mutable_cluster()->add_server_addresses(a);
  EXPECT_EQ(ValidateServerConfig(j).message(),
            "config field cluster.replicas: is 1, but cluster.server_addresses names inproc://tether-shard-1: every "
            "shard of an in-process job runs in one process, so a replica would end with its primary; run the "
            "servers as processes (tether-launch --transport=tcp), or set cluster.replicas to 0 "
            "(--replicas=0)");
  j.mutable_cluster()->set_replicas(0);
  EXPECT_TRUE(ValidateServerConfig(j).ok()) << "inproc:// endpoints without replicas";

  EXPECT_TRUE(ValidateInProcessJob(ThreeServers(0)).ok());
  const Status st = ValidateInProcessJob(ThreeServers(2));
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(st.message(),
            "config field cluster.replicas: is 2, but this is an in-process job (tether-launch --transport=inproc, "
            "tether-worker --in_process): every shard of an in-process job runs in one process, so a replica would "
            "end with its primary; run the servers as processes (tether-launch --transport=tcp), or set "
            "cluster.replicas to 0 (--replicas=0)");
}

TEST(ReplicasConfigTest, TheReplicasFlagSetsTheField) {
  const ConfigOverride* row = nullptr;
  for (const ConfigOverride& o : ConfigOverrides())
    if (std::string(o.flag) == "replicas") row = &o;
  ASSERT_NE(row, nullptr);
  EXPECT_EQ(std::string(row->field_path), "cluster.replicas");
  EXPECT_FALSE(OverrideIsBool(*row));

  JobConfig j = ThreeServers(0);
  ASSERT_TRUE(ApplyOverride(&j, "cluster.replicas", "2", "flag --replicas").ok());
  EXPECT_EQ(j.cluster().replicas(), 2);
  EXPECT_TRUE(j.cluster().has_replicas());
  const Status bad = ApplyOverride(&j, "cluster.replicas", "one", "flag --replicas");
  EXPECT_EQ(bad.message(), "flag --replicas=one: expected a 32-bit integer (field cluster.replicas)");
  EXPECT_EQ(j.cluster().replicas(), 2) << "a bad value leaves the config as it was";
  // The flag's value is validated as the field's.
  ASSERT_TRUE(ApplyOverride(&j, "cluster.replicas", "-1", "flag --replicas").ok());
  EXPECT_EQ(ValidateServerConfig(j).message(), "config field cluster.replicas: must be ≥ 0 (0: no replicas), got -1");
  ASSERT_TRUE(ApplyOverride(&j, "cluster.replicas", "3", "flag --replicas").ok());
  EXPECT_TRUE(CheckOverridesApply(j, {{"replicas", "3"}}).ok());
}

// The values in force, in the one line every process logs, name the
// replicas when there are any.
TEST(ReplicasConfigTest, TheOneLineInForceNamesTheReplicas) {
  JobConfig j = ThreeServers(0);
  j.set_name("j");
  EXPECT_NE(ConfigOneLine(j).find(", 3 server(s), 2 worker(s), "), std::string::npos) << ConfigOneLine(j);
  j.mutable_cluster()->set_replicas(1);
  EXPECT_NE(ConfigOneLine(j).find(", 3 server(s) holding 1 replica(s) of each shard, 2 worker(s), "),
            std::string::npos)
      << ConfigOneLine(j);
}

}  // namespace
}  // namespace tether
