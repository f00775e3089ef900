// Output paths are refused at start with the reason: a pseudo file system,
// a file on the way, a missing folder, a metrics folder holding a run.
#include "core/output_path.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "tests/testing/temp_dir.h"

namespace tether {
namespace {

class OutputPathTest : public ::testing::Test {
 protected:
  std::string In(const std::string& name) const { return dir_.File(name); }
  testing::ScopedTempDir dir_;
};

TEST_F(OutputPathTest, WritableFoldersPassAlsoWhenNotYetMade) {
  EXPECT_TRUE(CheckWritableDir(In("ck"), "flag --checkpoint_dir").ok());
  EXPECT_TRUE(CheckWritableDir(In("a/b/c"), "flag --metrics_dir").ok());
  EXPECT_TRUE(CheckWritableFile(In("m.safetensors"), "flag --model_out", false).ok());
  EXPECT_TRUE(CheckWritableFile(In("x/y/m.json"), "flag --metrics_out", true).ok());
}

TEST_F(OutputPathTest, PseudoFileSystemsAreRefused) {
  EXPECT_EQ(CheckWritableDir("/proc/ck", "flag --checkpoint_dir").message(),
            "flag --checkpoint_dir=/proc/ck: /proc is on /proc (procfs), which holds no files of ours: choose a "
            "folder on a disk");
  EXPECT_NE(CheckWritableFile("/sys/m.npz", "flag --model_out", false).message().find("is on sysfs"),
            std::string::npos);
}

TEST_F(OutputPathTest, AFileOnTheWayOrAMissingFolder) {
  std::ofstream(In("f")) << "x";
  EXPECT_EQ(CheckWritableDir(In("f/ck"), "flag --checkpoint_dir").message(),
            "flag --checkpoint_dir=" + In("f/ck") + ": " + In("f") +
                " is a file, not a directory, so nothing can be made under it");
  EXPECT_EQ(CheckWritableFile(In("none/m.safetensors"), "flag --model_out", false).message(),
            "flag --model_out=" + In("none/m.safetensors") + ": its folder " + In("none") + " does not exist");
  EXPECT_EQ(CheckWritableFile(dir_.path(), "flag --model_out", false).message(),
            "flag --model_out=" + dir_.path() + ": is a directory; give a file name");
}

TEST_F(OutputPathTest, AMetricsFolderHoldingARunIsRefused) {
  EXPECT_TRUE(CheckMetricsDirFresh(In("new"), "flag --metrics_dir").ok());
  EXPECT_TRUE(CheckMetricsDirFresh(dir_.path(), "flag --metrics_dir").ok());
  std::ofstream(In("worker-0.jsonl")) << "{}\n";
  std::ofstream(In("server-0.jsonl")) << "{}\n";
  EXPECT_EQ(RunFilesIn(dir_.path()), (std::vector<std::string>{"server-0.jsonl", "worker-0.jsonl"}));
  EXPECT_EQ(CheckMetricsDirFresh(dir_.path(), "flag --metrics_dir").message(),
            "flag --metrics_dir=" + dir_.path() +
                ": already holds a run (server-0.jsonl, worker-0.jsonl); a second run appended there would draw "
                "as one broken line: give a new folder, or remove this one");
}

}  // namespace
}  // namespace tether
