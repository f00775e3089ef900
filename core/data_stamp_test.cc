// Data-file stamps: an unchanged file compares equal; a file appended to,
// edited in place near an end, replaced by another of the same size, or only
// touched, is told apart and named with what changed; a directory or FIFO in
// its place is named as such, without waiting on the FIFO.
#include "core/data_stamp.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>

#include <fstream>
#include <string>

#include "tests/testing/file_bytes.h"
#include "tests/testing/temp_dir.h"

namespace tether {
namespace {

void Write(const std::string& path, const std::string& text) { testing::WriteFileBytes(path, text); }
using testing::SetMtime;

TEST(DataStampTest, ChangesAreToldApartAndNamed) {
  testing::ScopedTempDir dir;
  const std::string path = dir.File("train.txt");
  const std::string body(200000, 'a');
  Write(path, "3 10 5\n" + body);
  SetMtime(path, 1796000000);
  StatusOr<DataFileStamp> then = StampDataFile(path);
  ASSERT_TRUE(then.ok()) << then.status().message();
  EXPECT_EQ(then->bytes, 200007u);
  StatusOr<DataFileStamp> again = StampDataFile(path);
  EXPECT_EQ(DataFileChange(*then, *again), "");
  EXPECT_TRUE(CheckDataFilesUnchanged({*then}, "while the job ran").ok());

  // The same size and time, one byte changed at the end.
  Write(path, "3 10 5\n" + body.substr(0, body.size() - 1) + "b");
  SetMtime(path, 1796000000);
  StatusOr<DataFileStamp> edited = StampDataFile(path);
  ASSERT_TRUE(edited.ok());
  const std::string change = DataFileChange(*then, *edited);
  EXPECT_EQ(change.rfind("data file " + path + " changed: content digest ", 0), 0u) << change;
  // Appended to, with a new time.
  Write(path, "3 10 5\n" + body + "more\n");
  SetMtime(path, 1796000060);
  Status st = CheckDataFilesUnchanged({*then}, "since checkpoint ckpt-000000000100");
  EXPECT_EQ(st.code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(st.message().rfind("data file " + path + " changed: size 200007 → 200012 bytes, modified "
                               "2026-11-30T00:53:20.000000000Z → 2026-11-30T00:54:20.000000000Z, content digest ",
                               0),
            0u)
      << st.message();
  EXPECT_NE(st.message().find(" (since checkpoint ckpt-000000000100): rows are never trained from a file other than "
                              "the one read; restore the file, or start a new job from it"),
            std::string::npos);
  // Only touched: the time alone tells.
  Write(path, "3 10 5\n" + body);
  SetMtime(path, 1796000120);
  StatusOr<DataFileStamp> touched = StampDataFile(path);
  EXPECT_EQ(DataFileChange(*then, *touched),
            "data file " + path + " changed: modified 2026-11-30T00:53:20.000000000Z → 2026-11-30T00:55:20.000000000Z");
  // Gone.
  std::remove(path.c_str());
  st = CheckDataFilesUnchanged({*then}, "while the job ran");
  EXPECT_EQ(st.message().rfind("data file " + path + ": no such file (while the job ran)", 0), 0u) << st.message();
}

TEST(DataStampTest, ADirectoryOrFifoInAFilesPlaceIsNamedNotWaitedOn) {
  testing::ScopedTempDir dir;
  const std::string path = dir.File("val.txt");
  ASSERT_EQ(mkdir(path.c_str(), 0755), 0);
  StatusOr<DataFileStamp> d = StampDataFile(path);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().message(), "data file " + path + ": is a directory, not the file that was read");
  const std::string fifo = dir.File("train.txt");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0644), 0);
  StatusOr<DataFileStamp> f = StampDataFile(fifo);  // no writer: a blocking open would never return
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().message(), "data file " + fifo + ": is not a regular file, not the file that was read");
}

}  // namespace
}  // namespace tether
