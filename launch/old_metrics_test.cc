// Only an earlier run's metrics JSON is removed before a job; anything else
// at --metrics_out is refused and left as it is.
#include "launch/old_metrics.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/testing/file_bytes.h"
#include "tests/testing/temp_dir.h"

namespace tether {
namespace {

namespace fs = std::filesystem;
using testing::ReadFileBytes;

constexpr char kMetrics[] = "{\"precision_at_1\": 0.5, \"train_seconds\": 1.5, \"samples_per_second\": 100}\n";

class OldMetricsTest : public ::testing::Test {
 protected:
  std::string In(const std::string& name) const { return dir_.File(name); }
  std::string Write(const std::string& name, const std::string& text) const {
    std::ofstream(In(name)) << text;
    return In(name);
  }
  testing::ScopedTempDir dir_;
};

TEST_F(OldMetricsTest, EarlierMetricsJsonIsRemoved) {
  const std::string m = Write("m.json", kMetrics);
  EXPECT_TRUE(IsMetricsJson(m));
  ASSERT_TRUE(CheckMetricsOutReplaceable(m, "flag --metrics_out").ok());
  ASSERT_TRUE(RemoveOldMetrics(m, "flag --metrics_out").ok());
  EXPECT_FALSE(fs::exists(m));
  // Nothing there: nothing to do.
  EXPECT_TRUE(RemoveOldMetrics(m, "flag --metrics_out").ok());
}

TEST_F(OldMetricsTest, LaunchersFailureRecordIsRemoved) {
  const std::string m = Write("m.json", "{\"exit_code\": 1, \"failure\": \"server 1 (pid 7) was killed\"}\n");
  EXPECT_TRUE(IsMetricsJson(m));
  ASSERT_TRUE(RemoveOldMetrics(m, "flag --metrics_out").ok());
  EXPECT_FALSE(fs::exists(m));
  // A third key, or a failure that is no string, is not the launcher's.
  EXPECT_FALSE(IsMetricsJson(Write("more.json", "{\"exit_code\": 1, \"failure\": \"x\", \"notes\": 1}")));
  EXPECT_FALSE(IsMetricsJson(Write("number.json", "{\"exit_code\": 1, \"failure\": 3}")));
  EXPECT_FALSE(IsMetricsJson(Write("float.json", "{\"exit_code\": 1.5, \"failure\": \"x\"}")));
}

TEST_F(OldMetricsTest, OtherFileIsRefusedAndKept) {
  const std::string data = Write("test.txt", "1 1:0.5\n");
  const std::string json = Write("other.json", "{\"train_seconds\": 1}\n");
  for (const std::string& f : {data, json}) {
    EXPECT_FALSE(IsMetricsJson(f));
    const Status st = RemoveOldMetrics(f, "flag --metrics_out");
    EXPECT_EQ(st.message(), "flag --metrics_out=" + f +
                                ": holds a file that is not a Tether metrics JSON; tether-launch replaces only an "
                                "earlier run's metrics there: give another file name, or move that file away");
    EXPECT_EQ(CheckMetricsOutReplaceable(f, "flag --metrics_out").message(), st.message());
  }
  EXPECT_EQ(ReadFileBytes(data), "1 1:0.5\n");
  EXPECT_EQ(ReadFileBytes(json), "{\"train_seconds\": 1}\n");
}

TEST_F(OldMetricsTest, LinkKeptAndItsTargetRemoved) {
  const std::string m = Write("real.json", kMetrics);
  fs::create_symlink(m, In("link.json"));
  ASSERT_TRUE(RemoveOldMetrics(In("link.json"), "flag --metrics_out").ok());
  EXPECT_FALSE(fs::exists(m));
  EXPECT_TRUE(fs::is_symlink(In("link.json")));
}

TEST_F(OldMetricsTest, FifoIsLeftAsItIsAndDirectoryRefused) {
  ASSERT_EQ(::mkfifo(In("pipe").c_str(), 0600), 0) << std::strerror(errno);
  EXPECT_TRUE(RemoveOldMetrics(In("pipe"), "flag --metrics_out").ok());
  EXPECT_TRUE(fs::is_fifo(In("pipe")));
  fs::create_directories(In("d"));
  EXPECT_EQ(RemoveOldMetrics(In("d"), "flag --metrics_out").message(),
            "flag --metrics_out=" + In("d") + ": is a directory; give a file name");
  EXPECT_TRUE(fs::is_directory(In("d")));
}

}  // namespace
}  // namespace tether
