#include "telemetry/metrics_log.h"

#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/testing/file_bytes.h"
#include "tests/testing/temp_dir.h"

namespace tether {
namespace {

using testing::ReadFileBytes;
using testing::WriteFileBytes;

TEST(MetricsLogTest, MakesTheFolderAndItsParentsAndWritesOneObjectALine) {
  testing::ScopedTempDir tmp;
  const std::string dir = tmp.path() + "/out/bibtex";
  auto log = MetricsLog::Open(dir, "worker", 3);
  ASSERT_TRUE(log.ok()) << log.status().message();
  (*log)->Write({{"kind", "clock"}, {"clock", 7}});
  ASSERT_TRUE((*log)->Flush().ok());
  EXPECT_EQ((*log)->path(), dir + "/worker-3.jsonl");
  EXPECT_EQ((*log)->moved_to(), "");
  const std::string text = ReadFileBytes(dir + "/worker-3.jsonl");
  ASSERT_EQ(text.back(), '\n');
  const nlohmann::json line = nlohmann::json::parse(text);
  EXPECT_EQ(line["kind"], "clock");
  EXPECT_EQ(line["clock"], 7);
  EXPECT_EQ(line["role"], "worker");
  EXPECT_EQ(line["rank"], 3);
  EXPECT_TRUE(line.contains("t") && line.contains("unix_time"));
}

TEST(MetricsLogTest, AnEarlierRunIsMovedAsideNeverAppendedTo) {
  testing::ScopedTempDir tmp;
  const std::string dir = tmp.path();
  // An empty file (a process that wrote nothing) is simply reused.
  WriteFileBytes(dir + "/server-0.jsonl", "");
  {
    auto log = MetricsLog::Open(dir, "server", 0);
    ASSERT_TRUE(log.ok());
    EXPECT_EQ((*log)->moved_to(), "");
    (*log)->Write({{"run", 1}});
  }
  // Two more runs: each earlier one keeps its lines in a file of its own,
  // oldest first; a name already taken is skipped, never overwritten.
  WriteFileBytes(dir + "/server-0.2.jsonl", "{\"someone\":\"else\"}\n");
  for (int run = 2; run <= 3; ++run) {
    auto log = MetricsLog::Open(dir, "server", 0);
    ASSERT_TRUE(log.ok()) << log.status().message();
    EXPECT_EQ((*log)->moved_to(), dir + (run == 2 ? "/server-0.1.jsonl" : "/server-0.3.jsonl"));
    (*log)->Write({{"run", run}});
  }
  EXPECT_EQ(nlohmann::json::parse(ReadFileBytes(dir + "/server-0.1.jsonl"))["run"], 1);
  EXPECT_EQ(ReadFileBytes(dir + "/server-0.2.jsonl"), "{\"someone\":\"else\"}\n");
  EXPECT_EQ(nlohmann::json::parse(ReadFileBytes(dir + "/server-0.3.jsonl"))["run"], 2);
  EXPECT_EQ(nlohmann::json::parse(ReadFileBytes(dir + "/server-0.jsonl"))["run"], 3);
}

TEST(MetricsLogTest, AFolderThatCannotBeMadeIsNamed) {
  testing::ScopedTempDir tmp;
  WriteFileBytes(tmp.path() + "/file", "x");
  auto log = MetricsLog::Open(tmp.path() + "/file/sub", "worker", 0);
  ASSERT_FALSE(log.ok());
  EXPECT_NE(log.status().message().find("cannot create metrics directory " + tmp.path() + "/file/sub"),
            std::string::npos)
      << log.status().message();
}

}  // namespace
}  // namespace tether
