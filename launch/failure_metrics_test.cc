// tether-launch records a failed job in its metrics JSON: added to the
// evaluator's file, or a file of its own, under the output policy.
#include "launch/failure_metrics.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "launch/old_metrics.h"
#include "tests/testing/file_bytes.h"
#include "tests/testing/temp_dir.h"

namespace tether {
namespace {

namespace fs = std::filesystem;
using testing::ReadFileBytes;

constexpr char kReason[] = "server 1 (pid 4711) was killed by signal 9 (Killed); it was shard 1 at tcp://127.0.0.1:7001";

class FailureMetricsTest : public ::testing::Test {
 protected:
  std::string In(const std::string& name) const { return dir_.File(name); }
  std::string Write(const std::string& name, const std::string& text) const {
    std::ofstream(In(name)) << text;
    return In(name);
  }
  testing::ScopedTempDir dir_;
};

TEST_F(FailureMetricsTest, NoFileGetsTheLaunchersRecord) {
  const auto record = RecordJobFailure(In("m.json"), kReason, 1);
  ASSERT_TRUE(record.ok()) << record.status().ToString();
  EXPECT_EQ(*record, FailureRecord::kWritten);
  const nlohmann::json j = nlohmann::json::parse(ReadFileBytes(In("m.json")));
  EXPECT_EQ(j, nlohmann::json({{"failure", kReason}, {"exit_code", 1}}));
  // The next launch removes it as an earlier run's metrics.
  EXPECT_TRUE(IsMetricsJson(In("m.json")));
}

TEST_F(FailureMetricsTest, EvaluatorsFileGetsTheFailureAndKeepsItsValues) {
  const std::string m = Write("m.json", "{\"precision_at_1\": 0.625, \"samples_per_second\": 1200.5, "
                                        "\"total_samples\": 9000, \"train_seconds\": 7.25}\n");
  const auto record = RecordJobFailure(m, kReason, 124);
  ASSERT_TRUE(record.ok()) << record.status().ToString();
  EXPECT_EQ(*record, FailureRecord::kAdded);
  const nlohmann::json j = nlohmann::json::parse(ReadFileBytes(m));
  EXPECT_EQ(j.size(), 6u);
  EXPECT_EQ(j["failure"], kReason);
  EXPECT_EQ(j["exit_code"], 124);
  EXPECT_EQ(j["precision_at_1"], 0.625);
  EXPECT_EQ(j["total_samples"], 9000);
  EXPECT_EQ(j["train_seconds"], 7.25);
}

TEST_F(FailureMetricsTest, EvaluatorsOwnFailureIsKept) {
  const std::string m = Write("m.json", "{\"failure\": \"the job did not finish: worker(s) 2 left\", "
                                        "\"samples_per_second\": 1, \"train_seconds\": 2}");
  const auto record = RecordJobFailure(m, kReason, 1);
  ASSERT_TRUE(record.ok()) << record.status().ToString();
  EXPECT_EQ(*record, FailureRecord::kKept);
  const nlohmann::json j = nlohmann::json::parse(ReadFileBytes(m));
  EXPECT_EQ(j["failure"], "the job did not finish: worker(s) 2 left");
  EXPECT_EQ(j["exit_code"], 1);
}

TEST_F(FailureMetricsTest, LinkKeptAndItsTargetWritten) {
  fs::create_directories(In("real"));
  fs::create_symlink("real/m.json", In("link.json"));  // dangling: names the file to make
  ASSERT_TRUE(RecordJobFailure(In("link.json"), kReason, 1).ok());
  EXPECT_TRUE(fs::is_symlink(In("link.json")));
  EXPECT_EQ(nlohmann::json::parse(ReadFileBytes(In("real/m.json")))["failure"], kReason);
}

TEST_F(FailureMetricsTest, OtherFileIsRefusedAndKept) {
  const std::string notes = Write("notes.txt", "not metrics\n");
  const auto record = RecordJobFailure(notes, kReason, 1);
  EXPECT_EQ(record.status().message(), "flag --metrics_out=" + notes +
                                           ": holds a file that is not a Tether metrics JSON: the job's failure is "
                                           "not recorded there, and the file is left as it is");
  EXPECT_EQ(ReadFileBytes(notes), "not metrics\n");
}

TEST_F(FailureMetricsTest, FifoIsSkippedAndDirectoryRefused) {
  ASSERT_EQ(::mkfifo(In("pipe").c_str(), 0600), 0) << std::strerror(errno);
  const auto record = RecordJobFailure(In("pipe"), kReason, 1);  // would block if it opened the FIFO
  ASSERT_TRUE(record.ok()) << record.status().ToString();
  EXPECT_EQ(*record, FailureRecord::kSkipped);
  EXPECT_TRUE(fs::is_fifo(In("pipe")));
  fs::create_directories(In("d"));
  EXPECT_EQ(RecordJobFailure(In("d"), kReason, 1).status().message(),
            "flag --metrics_out=" + In("d") + ": is a directory; give a file name");
}

}  // namespace
}  // namespace tether
