// MetricsJson on hand-made shard and worker stats: exact values out, and
// the JSON types users' scripts rely on (integers stay integers, times and
// fractions are floats even when whole, NaN is null).
#include "worker/metrics_json.h"

#include <cmath>
#include <limits>
#include <string>

#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

namespace tether {
namespace {

ShardStats Shard(const std::string& text) {
  ShardStats s;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &s)) << text;
  return s;
}

// Two shards, three ranks: rank 0 reported normally, rank 1 waited on the
// bound longer than it trained, rank 2 never reached the barrier.
TrainReport TwoShardReport() {
  const std::string workers = R"(
    workers { rank: 0 samples: 100 train_seconds: 2.0 pulls: 7 rows_pulled: 70 rows_read: 90 cache_hits: 20
              pushes: 6 rows_pushed: 60 bytes_sent: 1000 bytes_received: 2000 wait_seconds: 1.0
              wait_fraction: 0.5 epoch_rows: 60 epoch_rows: 40 minibatches: 4 batch_size_final: 30
              batch_size_min: 20 batch_size_max: 30
              key_lists { defined: 5 used: 13 resent: 1 bytes_saved: 24576 } }
    workers { rank: 1 samples: 50 train_seconds: 0.2 wire_saturated: 5 wire_saturated_sent: 2
              wire_saturated_received: 3 residual_rows: 7
              wire { table: "w1" pull_wire: "bf16" push_wire: "fp16" sent_messages: 3 sent_bytes: 1200
                     sent_value_bytes: 400 sent_fp32_value_bytes: 800 received_messages: 2 received_bytes: 500
                     received_value_bytes: 500 received_fp32_value_bytes: 1000 }
              wire { table: "b1" pull_wire: "fp32" push_wire: "fp32" } }
    workers { })";
  TrainReport r;
  r.test_metrics = {{"precision_at_1", 0.5}, {"auc", std::nan("")}};
  r.train_seconds = 2.5;
  r.total_samples = 150;
  r.final_loss = 1.25;
  r.final_loss_from = "training";
  // τ 0, 1, 1, 2 on shard 0 (sum 4); τ 3 and 4 on shard 1 (sum 7).
  r.servers.push_back(Shard(R"(shard: 0 pulls: 10 pushes: 4 rows_pulled: 40 rows_pushed: 30 updates_applied: 31
      bytes_in: 500 bytes_out: 600 deferred_pulls: 2 bound_violations: 0 bad_messages: 1 send_failures: 3
      workers_timed_out: 0 workers_rejoined: 0 workers_joined: 0 failovers: 1 failover_seconds: 0.5
      staleness_histogram: [1, 2, 1] staleness_sum: 4 staleness_max: 2
      bound_wait_seconds: [0.5, 0.25, 0.0]
      key_lists { defined: 3 used: 9 unknown: 1 bytes_saved: 18432 })" + workers));
  r.servers.push_back(Shard(R"(shard: 1 pulls: 8 pushes: 2 bound_violations: 1
      key_lists { defined: 2 used: 4 bytes_saved: 8192 }
      staleness_histogram: [0, 0, 0, 1, 1] staleness_sum: 7 staleness_max: 4
      bound_wait_seconds: [0.75, 0.125, 0.0])" + workers));
  return r;
}

JobConfig TwoByThreeConfig() {
  JobConfig c;
  c.mutable_cluster()->set_num_servers(2);
  c.mutable_cluster()->set_num_workers(3);
  c.mutable_consistency()->set_staleness(2);
  c.mutable_train()->set_epochs(3);
  return c;
}

TEST(MetricsJsonFromStatsTest, MergesTheShardsStaleness) {
  const nlohmann::json j = MetricsJson(TwoShardReport(), TwoByThreeConfig());
  EXPECT_EQ(j["staleness_histogram"], nlohmann::json::parse("[1, 2, 1, 1, 1]"));
  EXPECT_EQ(j["staleness_mean"].get<double>(), 11.0 / 6.0);
  EXPECT_TRUE(j["staleness_mean"].is_number_float());
  EXPECT_EQ(j["staleness_max"], 4);
  EXPECT_EQ(j["bound_violations"], 1);
  EXPECT_TRUE(j["bound_violations"].is_number_integer());
}

// Data on demand: the chunks and rows re-dealt, summed over the shards
// (only shard 0 deals, but the sum does not depend on that).
TEST(MetricsJsonFromStatsTest, SumsTheRedealtChunksAndRows) {
  TrainReport r;
  r.servers.push_back(Shard("shard: 0 chunks_dealt: 40 chunks_redealt: 2 rows_redealt: 128 "
                            "chunk_epoch_rows: [4880, 4880]"));
  r.servers.push_back(Shard("shard: 1"));
  const nlohmann::json j = MetricsJson(r, TwoByThreeConfig());
  EXPECT_EQ(j["chunks_redealt"], 2);
  EXPECT_EQ(j["rows_redealt"], 128);
  EXPECT_TRUE(j["rows_redealt"].is_number_integer());
  EXPECT_EQ(j["servers"][0]["chunk_epoch_rows"], nlohmann::json::parse("[4880, 4880]"));
  EXPECT_EQ(j["servers"][1]["chunk_epoch_rows"], nlohmann::json::array());
}

// Key-list caching: each shard's and each worker's counters, flattened
// under key_lists_, and the shards' sums job-wide (the worker's figures are
// its own: its uses answered key_list_unknown are resent and saved nothing).
TEST(MetricsJsonFromStatsTest, SumsTheKeyListCountersOverShards) {
  const nlohmann::json j = MetricsJson(TwoShardReport(), TwoByThreeConfig());
  EXPECT_EQ(j["key_lists_defined"], 5);
  EXPECT_EQ(j["key_lists_used"], 13);
  EXPECT_EQ(j["key_lists_unknown"], 1);
  EXPECT_EQ(j["key_lists_bytes_saved"], 26624);
  EXPECT_TRUE(j["key_lists_bytes_saved"].is_number_integer());
  EXPECT_EQ(j["servers"][1]["key_lists_unknown"], 0);  // unset: 0, the key still there
  EXPECT_EQ(j["workers"][0]["key_lists_resent"], 1);
  EXPECT_FALSE(j["workers"][0].contains("key_lists"));
  EXPECT_FALSE(j["workers"][0].contains("key_lists_unknown"));
  EXPECT_FALSE(j["servers"][0].contains("key_lists_resent"));
}

TEST(MetricsJsonFromStatsTest, ServersKeepTheirCountersWithoutWorkersOrSums) {
  const nlohmann::json j = MetricsJson(TwoShardReport(), TwoByThreeConfig());
  ASSERT_EQ(j["servers"].size(), 2u);
  const nlohmann::json& s0 = j["servers"][0];
  EXPECT_EQ(s0, nlohmann::json::parse(R"({"shard": 0, "pulls": 10, "pushes": 4, "rows_pulled": 40,
      "rows_pushed": 30, "updates_applied": 31, "bytes_in": 500, "bytes_out": 600, "deferred_pulls": 2,
      "bound_violations": 0, "bad_messages": 1, "workers_timed_out": 0, "workers_rejoined": 0, "workers_joined": 0,
      "failovers": 1, "failover_seconds": 0.5,
      "staleness_histogram": [1, 2, 1], "staleness_max": 2, "staleness_mean": 1.0,
      "bound_wait_seconds": [0.5, 0.25, 0.0], "table_rows": [], "chunks_dealt": 0, "chunks_redealt": 0,
      "rows_redealt": 0, "chunk_epoch_rows": [], "rows_admitted": [], "rows_evicted": [],
      "rows_not_admitted": [], "resident_bytes": [], "key_lists_defined": 3, "key_lists_used": 9,
      "key_lists_unknown": 1, "key_lists_bytes_saved": 18432, "average_rounds_merged": 0,
      "average_deltas_merged": 0, "average_deltas_discarded": 0, "average_rows_discarded": 0})"));
  EXPECT_TRUE(s0["staleness_mean"].is_number_float());  // 1.0, not 1
  EXPECT_TRUE(s0["bound_wait_seconds"][2].is_number_float());
  EXPECT_TRUE(s0["pulls"].is_number_integer());
  EXPECT_TRUE(s0["failovers"].is_number_integer());
  EXPECT_TRUE(j["servers"][1]["failover_seconds"].is_number_float());  // 0.0 without failovers
  EXPECT_EQ(j["servers"][1]["failovers"], 0);
  const nlohmann::json& s1 = j["servers"][1];
  EXPECT_EQ(s1["staleness_mean"].get<double>(), 3.5);
  EXPECT_EQ(s1["rows_pulled"], 0);  // unset counters are written as 0
  EXPECT_EQ(s1.size(), s0.size());
}

TEST(MetricsJsonFromStatsTest, WorkersGetTheLongestBoundWaitOverShards) {
  const nlohmann::json j = MetricsJson(TwoShardReport(), TwoByThreeConfig());
  ASSERT_EQ(j["workers"].size(), 3u);
  EXPECT_EQ(j["workers"][0], nlohmann::json::parse(R"({"rank": 0, "samples": 100, "train_seconds": 2.0,
      "pulls": 7, "rows_pulled": 70, "rows_read": 90, "cache_hits": 20, "pushes": 6, "rows_pushed": 60,
      "bytes_sent": 1000, "bytes_received": 2000, "wait_seconds": 1.0, "wait_fraction": 0.5,
      "cache_capacity_bytes": 0, "cache_peak_bytes": 0, "cache_evictions": 0, "cache_hit_rate": 0.0,
      "bound_wait_seconds": 0.75, "bound_wait_fraction": 0.375, "epoch_rows": [60, 40],
      "chunks_completed": 0, "chunks_refused": 0, "minibatches": 4, "batch_size_final": 30, "batch_size_min": 20,
      "batch_size_max": 30, "batch_size_mean": 25.0, "key_lists_defined": 5, "key_lists_used": 13,
      "key_lists_resent": 1, "key_lists_bytes_saved": 24576, "average_local_steps": 0,
      "average_deltas_pushed": 0, "wire": {}, "wire_saturated": 0, "wire_saturated_sent": 0,
      "wire_saturated_received": 0, "residual_rows": 0, "residual_evicted": 0,
      "residual_evicted_l1": 0.0})"));
  EXPECT_TRUE(j["workers"][0]["batch_size_mean"].is_number_float());
  EXPECT_TRUE(j["workers"][0]["train_seconds"].is_number_float());
  EXPECT_TRUE(j["workers"][0]["rank"].is_number_integer());
  // Waited 0.25 s on shard 0 in 0.2 s of training: the fraction stops at 1.
  EXPECT_EQ(j["workers"][1]["bound_wait_seconds"].get<double>(), 0.25);
  EXPECT_EQ(j["workers"][1]["bound_wait_fraction"].get<double>(), 1.0);
  // Never reached the barrier: only what the shards measured of it.
  EXPECT_EQ(j["workers"][2].dump(), R"({"bound_wait_fraction":0.0,"bound_wait_seconds":0.0})");
}

TEST(MetricsJsonFromStatsTest, RunFiguresAndNaNMetrics) {
  const nlohmann::json j = MetricsJson(TwoShardReport(), TwoByThreeConfig());
  EXPECT_EQ(j["precision_at_1"].get<double>(), 0.5);
  EXPECT_TRUE(j["auc"].is_null());
  EXPECT_EQ(j["train_seconds"].get<double>(), 2.5);
  EXPECT_EQ(j["total_samples"], 150);
  EXPECT_EQ(j["num_servers"], 2);
  EXPECT_EQ(j["num_workers"], 3);
  EXPECT_EQ(j["staleness"], 2);
  EXPECT_EQ(j["epochs"], 3);
  EXPECT_EQ(j["seed"], 1);
  EXPECT_EQ(j["final_loss"].get<double>(), 1.25);
  EXPECT_EQ(j["final_loss_from"], "training");
}

// A run that trained no minibatch reports the loss its checkpoint recorded,
// saying so, and one that knows no loss writes null and "none", never a
// made-up 0.
TEST(MetricsJsonFromStatsTest, FinalLossSaysWhereItComesFrom) {
  TrainReport r;
  nlohmann::json j = MetricsJson(r, TwoByThreeConfig());
  EXPECT_TRUE(j["final_loss"].is_null());
  EXPECT_EQ(j["final_loss_from"], "none");
  r.final_loss = 4.25;
  r.final_loss_from = "checkpoint";
  j = MetricsJson(r, TwoByThreeConfig());
  EXPECT_EQ(j["final_loss"].get<double>(), 4.25);
  EXPECT_EQ(j["final_loss_from"], "checkpoint");
}

// samples_per_second spans the job, first worker's start to last worker's
// end, not rank 0's own training time: with 100 workers starting a second
// apart, rank 0's span alone would be far off.
TEST(MetricsJsonFromStatsTest, SamplesPerSecondSpansFirstStartToLastEnd) {
  TrainReport r;
  r.train_seconds = 2.0;         // rank 0's own span
  r.samples_per_second = 300.0;  // 600 / 2.0: what rank 0 alone would say
  r.total_samples = 600;
  // Rank 1 starts first (1000.5), rank 2 ends last (1005.5): 5 s in all.
  r.servers.push_back(Shard(R"(shard: 0
      workers { rank: 0 samples: 200 train_seconds: 2.0 train_start_unix_s: 1001.0 train_end_unix_s: 1003.0 }
      workers { rank: 1 samples: 200 train_seconds: 4.0 train_start_unix_s: 1000.5 train_end_unix_s: 1004.5 }
      workers { rank: 2 samples: 200 train_seconds: 3.5 train_start_unix_s: 1002.0 train_end_unix_s: 1005.5 })"));
  EXPECT_EQ(JobSamplesPerSecond(r), 120.0);
  const nlohmann::json j = MetricsJson(r, TwoByThreeConfig());
  EXPECT_EQ(j["samples_per_second"].get<double>(), 120.0);
  EXPECT_TRUE(j["samples_per_second"].is_number_float());
  // The stamps are inputs, not keys: the workers' objects keep the schema's.
  EXPECT_FALSE(j["workers"][0].contains("train_start_unix_s"));
  EXPECT_FALSE(j["workers"][0].contains("train_end_unix_s"));
  // 15 + the four cache figures + epoch_rows + data on demand's two + the
  // four batch figures and batch_size_mean + the four key-list counters +
  // AVERAGE's two + wire, the three saturation counters (both ways and
  // their sum) and the three error-feedback counters.
  EXPECT_EQ(j["workers"][0].size(), 40u);
}

TEST(MetricsJsonFromStatsTest, WireBytesPerTableWithTheirRatios) {
  const nlohmann::json j = MetricsJson(TwoShardReport(), TwoByThreeConfig());
  const nlohmann::json& w = j["workers"][1]["wire"];
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w["w1"], nlohmann::json::parse(R"({"pull_wire": "bf16", "push_wire": "fp16", "sent_messages": 3,
      "sent_bytes": 1200, "sent_value_bytes": 400, "sent_fp32_value_bytes": 800, "received_messages": 2,
      "received_bytes": 500, "received_value_bytes": 500, "received_fp32_value_bytes": 1000,
      "sent_ratio": 1.3333333333333333, "received_ratio": 2.0})"));
  EXPECT_EQ(w["b1"]["sent_ratio"], 1.0);  // nothing sent
  EXPECT_TRUE(w["b1"]["sent_ratio"].is_number_float());
  EXPECT_EQ(j["workers"][1]["wire_saturated"], 5);
  EXPECT_EQ(j["workers"][1]["wire_saturated_sent"], 2);
  EXPECT_EQ(j["workers"][1]["wire_saturated_received"], 3);
  EXPECT_EQ(j["workers"][1]["residual_rows"], 7);
}

// A resumed job: total_samples holds the rows trained before its
// checkpoint too, and the span is this run's, so the rate counts each
// worker's run_samples (found by a fresh user: 16,193 samples/s reported
// against about 7,000 trained).
TEST(MetricsJsonFromStatsTest, SamplesPerSecondOfAResumedJobCountsThisRunsRows) {
  TrainReport r;
  r.samples_per_second = 500.0;
  r.total_samples = 1000;  // 600 of them before the checkpoint
  r.servers.push_back(Shard(R"(shard: 0
      workers { rank: 0 samples: 500 run_samples: 200 train_start_unix_s: 1000.0 train_end_unix_s: 1002.0 }
      workers { rank: 1 samples: 500 run_samples: 200 train_start_unix_s: 1000.0 train_end_unix_s: 1004.0 })"));
  EXPECT_EQ(JobSamplesPerSecond(r), 100.0);  // 400 rows in 4 s
  const nlohmann::json j = MetricsJson(r, TwoByThreeConfig());
  EXPECT_EQ(j["samples_per_second"].get<double>(), 100.0);
  EXPECT_EQ(j["total_samples"].get<uint64_t>(), 1000u);
  EXPECT_FALSE(j["workers"][0].contains("run_samples"));  // an input, not a key
}

// Without every worker's span (a rank never reached the barrier, a worker
// sent no stamps, no server stats) the figure is rank 0's own.
TEST(MetricsJsonFromStatsTest, SamplesPerSecondFallsBackToRankZerosSpan) {
  TrainReport r = TwoShardReport();  // rank 2 never reached the barrier
  r.samples_per_second = 60.0;
  EXPECT_EQ(JobSamplesPerSecond(r), 60.0);
  EXPECT_EQ(MetricsJson(r, TwoByThreeConfig())["samples_per_second"].get<double>(), 60.0);
  r.servers.clear();
  EXPECT_EQ(JobSamplesPerSecond(r), 60.0);
  TrainReport no_stamps;
  no_stamps.samples_per_second = 7.0;
  no_stamps.total_samples = 100;
  no_stamps.servers.push_back(Shard("shard: 0 workers { rank: 0 samples: 100 train_seconds: 1.0 }"));
  EXPECT_EQ(JobSamplesPerSecond(no_stamps), 7.0);
}

TEST(MetricsJsonFromStatsTest, NoServerStatsNoServerKeys) {
  TrainReport r;
  r.train_seconds = 1.0;
  const nlohmann::json j = MetricsJson(r, TwoByThreeConfig());
  for (const char* k : {"servers", "workers", "staleness_mean", "staleness_max", "staleness_histogram",
                        "bound_violations", "chunks_redealt", "rows_redealt", "key_lists_used"})
    EXPECT_FALSE(j.contains(k)) << k;
  // The run's figures (diverged and diverged_at_epoch too, final_loss_from,
  // and the partitioned evaluation's eval_workers, eval_parts_for_others,
  // eval_seconds and eval_seconds_slowest_worker) and the config's.
  EXPECT_EQ(j.size(), 18u);
  EXPECT_EQ(j["eval_parts_for_others"], 0);
  EXPECT_EQ(j["diverged"], false);
  EXPECT_EQ(j["diverged_at_epoch"], 0);
}

// C24: a diverged run is marked, and a non-finite loss is null (JSON has no NaN).
TEST(MetricsJsonFromStatsTest, C24DivergedRunIsMarked) {
  TrainReport r;
  r.diverged = true;
  r.diverged_at_epoch = 2;
  r.final_loss = std::numeric_limits<double>::infinity();
  const nlohmann::json j = MetricsJson(r, TwoByThreeConfig());
  EXPECT_EQ(j["diverged"], true);
  EXPECT_EQ(j["diverged_at_epoch"], 2);
  EXPECT_TRUE(j["final_loss"].is_null());
  EXPECT_TRUE(LossDiverged(std::nan(""), 5.0, 10.0));
  EXPECT_TRUE(LossDiverged(50.5, 5.0, 10.0));
  EXPECT_FALSE(LossDiverged(50.0, 5.0, 10.0));
}

// C24: another worker's divergence (its BARRIER's stats) is the job's: the
// evaluator that did not diverge still says so, with the ranks and the
// earliest epoch, and lists it as accepted where the config accepts it.
TEST(MetricsJsonFromStatsTest, C24AnotherWorkersDivergenceIsTheJobs) {
  TrainReport r;
  r.servers.push_back(Shard("workers { rank: 0 } workers { rank: 1 diverged_at_epoch: 2 } "
                            "workers { rank: 2 diverged_at_epoch: 1 }"));
  JobConfig config = TwoByThreeConfig();
  const nlohmann::json j = MetricsJson(r, config);
  EXPECT_EQ(j["diverged"], true);
  EXPECT_EQ(j["diverged_at_epoch"], 1);
  EXPECT_EQ(j["diverged_workers"], nlohmann::json::array({1, 2}));
  EXPECT_FALSE(j.contains("accepted"));  // train.fail_on_divergence: the job exits 3
  EXPECT_FALSE(j["workers"][1].contains("diverged_at_epoch"));
  config.mutable_train()->set_fail_on_divergence(false);
  EXPECT_EQ(MetricsJson(r, config)["accepted"], nlohmann::json::array({"diverged"}));
  // Nobody diverged: no ranks, and nothing accepted.
  TrainReport calm;
  calm.servers.push_back(Shard("workers { rank: 0 } workers { rank: 1 }"));
  const nlohmann::json k = MetricsJson(calm, config);
  EXPECT_EQ(k["diverged"], false);
  EXPECT_EQ(k["diverged_at_epoch"], 0);
  EXPECT_FALSE(k.contains("diverged_workers"));
  EXPECT_FALSE(k.contains("accepted"));
}

// A validation split: its own keys beside the test split's, and the epoch
// whose model the test split scored (the best one, kept).
TEST(MetricsJsonFromStatsTest, ValidationKeysNameTheEpochScored) {
  TrainReport r;
  EXPECT_FALSE(MetricsJson(r, TwoByThreeConfig()).contains("scored_epoch")) << "no validation split";
  r.validation_rows = 980;
  r.validation_metric = "precision_at_1";
  r.validation_metrics = {{"precision_at_1", 0.625}};
  r.best_epoch = 3;
  r.epochs_trained = 5;
  r.scored_epoch = 3;
  r.stopped_early = true;
  const nlohmann::json j = MetricsJson(r, TwoByThreeConfig());
  EXPECT_EQ(j["validation_precision_at_1"], 0.625);
  EXPECT_EQ(j["best_epoch"], 3);
  EXPECT_EQ(j["epochs_trained"], 5);
  EXPECT_EQ(j["scored_epoch"], 3);
  EXPECT_EQ(j["stopped_early"], true);
}

}  // namespace
}  // namespace tether
