#include "cli/config_flags.h"

#include <gflags/gflags.h>
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "tests/testing/temp_dir.h"

namespace tether {
namespace {

// A job a server would take but for consistency.staleness (line 5).
constexpr char kBadStaleness[] =
    "# a job\n"
    "cluster { num_servers: 1 num_workers: 1 }\n"
    "\n"
    "consistency {\n"
    "  staleness: -5\n"
    "}\n"
    "table {\n"
    "  name: \"w1\"\n"
    "  consistency { staleness: 1 }\n"
    "}\n";

class ConfigFlagsTest : public ::testing::Test {
 protected:
  // --config=DIR/NAME holding `text`; the flags are restored after the test.
  std::string UseConfig(const std::string& name, const std::string& text) {
    const std::string path = dir_.File(name);
    std::ofstream(path) << text;
    gflags::SetCommandLineOption("config", path.c_str());
    return path;
  }

  gflags::FlagSaver saver_;
  testing::ScopedTempDir dir_;
};

TEST_F(ConfigFlagsTest, ValidationErrorNamesTheFilesLine) {
  const std::string path = UseConfig("bad.pbtxt", kBadStaleness);
  auto config = LoadConfigFromFlags("server 0", ConfigScope::kServer, ConfigLog::kQuiet);
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(config.status().message(),
            path + ":5: config field consistency.staleness: must be ≥ 0, or -1 (inf) for ASP");
}

TEST_F(ConfigFlagsTest, FieldSetByAFlagNamesTheFlagNotTheLine) {
  UseConfig("bad.pbtxt", kBadStaleness);
  gflags::SetCommandLineOption("staleness", "-7");
  auto config = LoadConfigFromFlags("server 0", ConfigScope::kServer, ConfigLog::kQuiet);
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().message(),
            "config field consistency.staleness: must be ≥ 0, or -1 (inf) for ASP (set by flag --staleness=-7)");
}

TEST_F(ConfigFlagsTest, FieldTheFileDoesNotWriteGetsNoLine) {
  // worker_timeout_ms keeps its default (10000), which the heartbeat passes.
  UseConfig("bad.pbtxt", "cluster {\n  heartbeat_interval_ms: 20000\n}\n");
  auto config = LoadConfigFromFlags("server 0", ConfigScope::kServer, ConfigLog::kQuiet);
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().message(),
            "config field cluster.worker_timeout_ms: must exceed cluster.heartbeat_interval_ms (20000)");
}

TEST_F(ConfigFlagsTest, LaterChecksKeepTheirCodeAndGetTheLine) {
  const std::string path = UseConfig("job.pbtxt", kBadStaleness);
  const Status named = NameConfigFieldSource(Status::NotFound("config field table[w1].consistency.staleness: x"));
  EXPECT_EQ(named.code(), Status::Code::kNotFound);
  EXPECT_EQ(named.message(), path + ":9: config field table[w1].consistency.staleness: x");
  // Not a field's message, or no such field in the file: unchanged.
  EXPECT_EQ(NameConfigFieldSource(Status::InvalidArgument("flag --x: y")).message(), "flag --x: y");
  EXPECT_EQ(NameConfigFieldSource(Status::InvalidArgument("config field model.hidden: y")).message(),
            "config field model.hidden: y");
  EXPECT_TRUE(NameConfigFieldSource(Status::OK()).ok());
}

}  // namespace
}  // namespace tether
