// --metrics_sd_file under the output policy: a link's target is written
// and withdrawn, never the link; a stream, a directory and an input are
// refused.
#include "telemetry/sd_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "tests/testing/file_bytes.h"
#include "tests/testing/temp_dir.h"

namespace tether {
namespace {

namespace fs = std::filesystem;
using testing::ReadFileBytes;
using testing::WriteFileBytes;

constexpr char kTargets[] = "[{\"targets\": [\"127.0.0.1:9100\"]}]\n";

TEST(SdFileTest, ARegularFileIsWrittenAndRemovedAtTheEnd) {
  testing::ScopedTempDir tmp;
  const std::string path = tmp.path() + "/worker-0.json";
  ASSERT_TRUE(CheckSdFile(path, {}).ok());
  ASSERT_TRUE(WriteSdFile(path, kTargets).ok());
  EXPECT_EQ(ReadFileBytes(path), kTargets);
  ASSERT_TRUE(WithdrawSdFile(path).ok());
  EXPECT_FALSE(fs::exists(path));
  // Gone already: nothing to do.
  EXPECT_TRUE(WithdrawSdFile(path).ok());
}

TEST(SdFileTest, ALinksTargetIsWrittenThenEmptiedAndTheLinkKept) {
  testing::ScopedTempDir tmp;
  fs::create_directories(tmp.path() + "/sd");
  fs::create_directories(tmp.path() + "/real");
  const std::string link = tmp.path() + "/sd/worker-0.json";
  fs::create_symlink("../real/w0.json", link);  // dangling: names the file to make
  ASSERT_TRUE(CheckSdFile(link, {}).ok());
  ASSERT_TRUE(WriteSdFile(link, kTargets).ok());
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(ReadFileBytes(tmp.path() + "/real/w0.json"), kTargets);
  ASSERT_TRUE(WithdrawSdFile(link).ok());
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(fs::read_symlink(link), "../real/w0.json");
  EXPECT_EQ(ReadFileBytes(tmp.path() + "/real/w0.json"), "[]\n");
}

TEST(SdFileTest, StreamsDirectoriesAndInputsAreRefused) {
  testing::ScopedTempDir tmp;
  const std::string fifo = tmp.path() + "/pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  EXPECT_EQ(CheckSdFile(fifo, {}).message(),
            "flag --metrics_sd_file=" + fifo +
                ": is a FIFO (named pipe), not a regular file; this output is written by temporary file and "
                "rename, which would replace it: give a file name");
  EXPECT_FALSE(WriteSdFile(fifo, kTargets).ok());  // refused, never opened (that would wait for a reader)
  EXPECT_TRUE(fs::is_fifo(fifo));
  fs::create_symlink(fifo, tmp.path() + "/to_pipe.json");
  EXPECT_EQ(WriteSdFile(tmp.path() + "/to_pipe.json", kTargets).message(),
            "flag --metrics_sd_file=" + tmp.path() + "/to_pipe.json (a link to " + fifo +
                "): is a FIFO (named pipe), not a regular file; this output is written by temporary file and "
                "rename, which would replace it: give a file name");
  EXPECT_EQ(WithdrawSdFile(fifo).message(), CheckSdFile(fifo, {}).message());
  EXPECT_TRUE(fs::is_fifo(fifo));
  fs::create_directories(tmp.path() + "/d");
  EXPECT_EQ(CheckSdFile(tmp.path() + "/d", {}).message(),
            "flag --metrics_sd_file=" + tmp.path() + "/d: is a directory; give a file name");
  const std::string config = tmp.path() + "/job.pbtxt";
  WriteFileBytes(config, "cluster {}\n");
  fs::create_symlink(config, tmp.path() + "/sd.json");
  EXPECT_EQ(CheckSdFile(tmp.path() + "/sd.json", {{"flag --config", config}}).message(),
            "flag --metrics_sd_file=" + tmp.path() + "/sd.json is the same file as flag --config=" + config +
                ": writing it would destroy an input of this run; give another file name");
  EXPECT_EQ(ReadFileBytes(config), "cluster {}\n");
}

}  // namespace
}  // namespace tether
