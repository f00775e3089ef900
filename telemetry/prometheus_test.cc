#include "telemetry/prometheus.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "tests/testing/exposition.h"

namespace tether {
namespace {

TEST(PrometheusTest, EscapesLabelValuesAndHelp) {
  EXPECT_EQ(EscapeLabelValue(R"(a\b"c)" "\n" "d"), R"(a\\b\"c\nd)");
  EXPECT_EQ(EscapeLabelValue("plain"), "plain");
  // HELP keeps double quotes as they are.
  EXPECT_EQ(EscapeHelp("say \"hi\"\\\nbye"), "say \"hi\"\\\\\\nbye");
}

TEST(PrometheusTest, FormatsValues) {
  EXPECT_EQ(FormatSampleValue(0), "0");
  EXPECT_EQ(FormatSampleValue(1234567), "1234567");
  EXPECT_EQ(FormatSampleValue(-3), "-3");
  EXPECT_EQ(FormatSampleValue(0.25), "0.25");
  EXPECT_EQ(FormatSampleValue(1e-7), "1e-07");
  EXPECT_EQ(FormatSampleValue(9007199254740992.0), "9007199254740992");
  EXPECT_EQ(FormatSampleValue(1e300), "1e+300");
  EXPECT_EQ(FormatSampleValue(std::nan("")), "NaN");
  EXPECT_EQ(FormatSampleValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatSampleValue(-std::numeric_limits<double>::infinity()), "-Inf");
  // Shortest text that reads back to the same double.
  EXPECT_EQ(FormatSampleValue(0.1 + 0.2), "0.30000000000000004");
}

TEST(PrometheusTest, CountersAndGauges) {
  ExpositionWriter w;
  w.Counter("tether_server_pushes_total", "PUSH requests applied.", {{"tether_job", "bib\"tex"}, {"shard", "0"}}, 42);
  w.Family("tether_server_worker_clock", ExpositionWriter::Type::kGauge, "Clock of each worker.\nSecond line.");
  w.Sample("tether_server_worker_clock", {{"worker_rank", "0"}}, 7);
  w.Sample("tether_server_worker_clock", {{"worker_rank", "1"}}, 6.5);
  w.Gauge("tether_up_seconds", "No labels.", {}, 0.5);
  EXPECT_EQ(w.text(),
            "# HELP tether_server_pushes_total PUSH requests applied.\n"
            "# TYPE tether_server_pushes_total counter\n"
            "tether_server_pushes_total{tether_job=\"bib\\\"tex\",shard=\"0\"} 42\n"
            "# HELP tether_server_worker_clock Clock of each worker.\\nSecond line.\n"
            "# TYPE tether_server_worker_clock gauge\n"
            "tether_server_worker_clock{worker_rank=\"0\"} 7\n"
            "tether_server_worker_clock{worker_rank=\"1\"} 6.5\n"
            "# HELP tether_up_seconds No labels.\n"
            "# TYPE tether_up_seconds gauge\n"
            "tether_up_seconds 0.5\n");
}

TEST(PrometheusTest, HistogramIsCumulativeWithInfAndCount) {
  ExpositionWriter w;
  w.Family("tether_server_push_staleness", ExpositionWriter::Type::kHistogram, "Staleness.");
  w.Histogram("tether_server_push_staleness", {{"shard", "1"}}, {0, 1, 2.5}, {3, 5, 5}, 9, 6);
  w.Family("h", ExpositionWriter::Type::kHistogram, "No labels.");
  w.Histogram("h", {}, {1}, {0}, 0, 0);
  EXPECT_EQ(w.text(),
            "# HELP tether_server_push_staleness Staleness.\n"
            "# TYPE tether_server_push_staleness histogram\n"
            "tether_server_push_staleness_bucket{shard=\"1\",le=\"0\"} 3\n"
            "tether_server_push_staleness_bucket{shard=\"1\",le=\"1\"} 5\n"
            "tether_server_push_staleness_bucket{shard=\"1\",le=\"2.5\"} 5\n"
            "tether_server_push_staleness_bucket{shard=\"1\",le=\"+Inf\"} 6\n"
            "tether_server_push_staleness_sum{shard=\"1\"} 9\n"
            "tether_server_push_staleness_count{shard=\"1\"} 6\n"
            "# HELP h No labels.\n"
            "# TYPE h histogram\n"
            "h_bucket{le=\"1\"} 0\n"
            "h_bucket{le=\"+Inf\"} 0\n"
            "h_sum 0\n"
            "h_count 0\n");
}

TEST(PrometheusTest, WriterOutputPassesTheStructureCheckWhichCatchesBadPages) {
  ExpositionWriter w;
  w.Counter("a_total", "A.", {{"role", "x"}}, 1);
  w.Family("h", ExpositionWriter::Type::kHistogram, "H.");
  w.Histogram("h", {{"role", "x"}}, {1, 2}, {1, 3}, 4, 3);
  EXPECT_EQ(testing::ExpositionProblems(w.text()), "");
  // What the check is for: each of these pages is wrong.
  EXPECT_NE(testing::ExpositionProblems("# HELP a A.\n# TYPE a counter\na 1\n"), "");  // no _total
  EXPECT_NE(testing::ExpositionProblems("a 1\n"), "");                                  // no TYPE
  EXPECT_NE(testing::ExpositionProblems("# HELP h H.\n# TYPE h histogram\n"
                                        "h_bucket{role=\"x\",le=\"1\"} 3\nh_bucket{role=\"x\",le=\"2\"} 2\n"),
            "");  // not cumulative
  EXPECT_NE(testing::ExpositionProblems("# HELP g G.\n# TYPE g gauge\ng 1\n# HELP g G.\n# TYPE g gauge\n"), "");
}

TEST(PrometheusDeathTest, InvalidNamesAreProgrammerErrors) {
  ExpositionWriter w;
  EXPECT_DEATH(w.Family("9lives", ExpositionWriter::Type::kGauge, ""), "invalid Prometheus metric name");
  EXPECT_DEATH(w.Sample("ok", {{"bad-label", "x"}}, 1), "invalid Prometheus label name");
}

}  // namespace
}  // namespace tether
