#include "worker/worker_metrics.h"

#include <gtest/gtest.h>

#include <cmath>

#include "tests/testing/exposition.h"

namespace tether {
namespace {

TEST(WorkerMetricsTest, RendersCountersLossAndRate) {
  WorkerMetricsSnapshot snap;
  snap.running = true;
  WorkerProgress& p = snap.progress;
  p.client.pulls = 10;
  p.client.pushes = 20;
  p.client.rows_read = 500;
  p.client.cache_hits = 125;
  p.client.cache_evictions = 33;
  p.client.cache_bytes = 1000;
  p.client.cache_peak_bytes = 2048;
  p.client.cache_capacity_bytes = 4096;
  p.client.bytes_sent = 4096;
  p.client.bytes_received = 8192;
  p.client.updates_sent = 480;
  p.client.wait_seconds = 1.5;
  p.client.key_lists_used = 9;
  p.client.key_list_bytes_saved = 73728;
  p.clock = 42;
  p.epoch = 3;
  p.samples = 3000;
  p.run_samples = 1000;
  p.minibatches = 47;
  p.train_seconds = 4;
  p.pull_wait_seconds = 0.75;
  p.clock_loss = 2.5;
  p.epoch_loss = std::nan("");
  const std::string text = RenderWorkerMetrics(snap, "job-1", 2);
  EXPECT_EQ(testing::ExpositionProblems(text), "");
  const std::string l = "{tether_job=\"job-1\",role=\"worker\",rank=\"2\"}";
  for (const std::string& want : {
           std::string("tether_info{tether_job=\"job-1\",role=\"worker\",rank=\"2\",version=\""),
           "tether_training_active" + l + " 1\n",
           "tether_worker_pulls_total" + l + " 10\n",
           "tether_worker_pushes_total" + l + " 20\n",
           "tether_worker_rows_read_total" + l + " 500\n",
           "tether_worker_cache_hits_total" + l + " 125\n",
           "tether_worker_cache_evictions_total" + l + " 33\n",
           "tether_worker_cache_bytes" + l + " 1000\n",
           "tether_worker_cache_peak_bytes" + l + " 2048\n",
           "tether_worker_cache_capacity_bytes" + l + " 4096\n",
           "tether_worker_cache_hit_ratio" + l + " 0.25\n",
           "tether_worker_sent_bytes_total" + l + " 4096\n",
           "tether_worker_received_bytes_total" + l + " 8192\n",
           "tether_worker_updates_sent_total" + l + " 480\n",
           "tether_worker_key_lists_used_total" + l + " 9\n",
           "tether_worker_key_lists_saved_bytes_total" + l + " 73728\n",
           "tether_worker_key_lists_resent_total" + l + " 0\n",
           "tether_worker_wait_seconds_total" + l + " 1.5\n",
           "tether_worker_pull_wait_seconds_total" + l + " 0.75\n",
           "tether_worker_train_seconds_total" + l + " 4\n",
           "tether_worker_samples_total" + l + " 3000\n",
           "tether_worker_minibatches_total" + l + " 47\n",
           "tether_worker_clock" + l + " 42\n",
           "tether_worker_epoch" + l + " 3\n",
           "tether_worker_minibatch_loss" + l + " 2.5\n",
           "tether_worker_epoch_loss" + l + " NaN\n",
           // This run's rows over this run's training time: 1000 / 4 s.
           "tether_worker_samples_per_second" + l + " 250\n",
       }) {
    EXPECT_NE(text.find(want), std::string::npos) << "missing: " << want << "\nin:\n" << text;
  }
}

TEST(WorkerMetricsTest, BeforeTrainingNoRateAndNotActive) {
  const std::string text = RenderWorkerMetrics(WorkerMetricsSnapshot{}, "j", 0);
  EXPECT_EQ(testing::ExpositionProblems(text), "");
  const std::string l = "{tether_job=\"j\",role=\"worker\",rank=\"0\"}";
  EXPECT_NE(text.find("tether_training_active" + l + " 0\n"), std::string::npos);
  EXPECT_NE(text.find("tether_worker_samples_per_second" + l + " 0\n"), std::string::npos);
  EXPECT_NE(text.find("tether_worker_minibatch_loss" + l + " NaN\n"), std::string::npos);
  EXPECT_NE(text.find("tether_worker_epoch_loss" + l + " NaN\n"), std::string::npos);
}

TEST(WorkerMetricsTest, WireBytesPerTableAndDirection) {
  WorkerMetricsSnapshot snap;
  snap.tables = {"w1", "b1"};
  snap.progress.client.wire.resize(3);
  DirectionBytes& sent = snap.progress.client.wire[0].sent;
  sent.bytes = 1200;
  sent.value_bytes = 400;
  sent.fp32_value_bytes = 800;
  snap.progress.client.wire[1].received.bytes = 64;
  snap.progress.client.wire[1].received.value_bytes = 64;
  snap.progress.client.wire[1].received.fp32_value_bytes = 64;
  const std::string text = RenderWorkerMetrics(snap, "job-1", 0);
  EXPECT_EQ(testing::ExpositionProblems(text), "");
  const std::string base = "{tether_job=\"job-1\",role=\"worker\",rank=\"0\",table=";
  for (const std::string& want : {
           "tether_worker_table_wire_bytes_total" + base + "\"w1\",direction=\"sent\"} 1200\n",
           "tether_worker_table_wire_fp32_bytes_total" + base + "\"w1\",direction=\"sent\"} 1600\n",
           "tether_worker_table_wire_bytes_total" + base + "\"b1\",direction=\"received\"} 64\n",
           "tether_worker_table_wire_fp32_bytes_total" + base + "\"b1\",direction=\"received\"} 64\n",
           // A table past the names given is labelled by its id.
           "tether_worker_table_wire_bytes_total" + base + "\"2\",direction=\"sent\"} 0\n",
       })
    EXPECT_NE(text.find(want), std::string::npos) << want << "\n" << text;
}

TEST(WorkerMetricsTest, SaturatedValuesByDirection) {
  WorkerMetricsSnapshot snap;
  snap.progress.client.push_values_saturated = 3;
  snap.progress.client.reply_values_saturated = 5;
  const std::string text = RenderWorkerMetrics(snap, "job-1", 2);
  EXPECT_EQ(testing::ExpositionProblems(text), "");
  const std::string base = "tether_worker_wire_saturated_total{tether_job=\"job-1\",role=\"worker\",rank=\"2\",";
  for (const std::string& want : {base + "direction=\"sent\"} 3\n", base + "direction=\"received\"} 5\n"})
    EXPECT_NE(text.find(want), std::string::npos) << want << "\n" << text;
  EXPECT_NE(text.find("# TYPE tether_worker_wire_saturated_total counter\n"), std::string::npos);
}

}  // namespace
}  // namespace tether
