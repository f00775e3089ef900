#include "core/file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "tests/testing/temp_dir.h"

namespace tether {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Files in `dir`, to show no temporary file is left behind.
int CountFiles(const std::string& dir) {
  int n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir)) ++n;
  return n;
}

TEST(FileUtilTest, ReplacesTheFileAndLeavesNoTemporary) {
  testing::ScopedTempDir dir;
  const std::string path = dir.File("port");
  ASSERT_TRUE(WriteFileAtomically(path, "tcp://127.0.0.1:5555\n").ok());
  EXPECT_EQ(ReadAll(path), "tcp://127.0.0.1:5555\n");
  ASSERT_TRUE(WriteFileAtomically(path, "second").ok());
  EXPECT_EQ(ReadAll(path), "second");
  EXPECT_EQ(CountFiles(dir.path()), 1);
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_NE(st.st_mode & S_IRUSR, 0u);  // not mkstemp's 0600-only surprise for others
}

TEST(FileUtilTest, StreamedPiecesAppearOnlyAtCommit) {
  testing::ScopedTempDir dir;
  const std::string path = dir.File("data.txt");
  ASSERT_TRUE(WriteFileAtomically(path, "old").ok());
  auto file = AtomicFile::Create(path);
  ASSERT_TRUE(file.ok()) << file.status().message();
  ASSERT_TRUE(file->Append("a ").ok());
  ASSERT_TRUE(file->Append("b").ok());
  EXPECT_EQ(ReadAll(path), "old");  // readers see the old file until Commit
  EXPECT_EQ(CountFiles(dir.path()), 2);
  ASSERT_TRUE(file->Commit().ok());
  EXPECT_EQ(ReadAll(path), "a b");
  EXPECT_EQ(CountFiles(dir.path()), 1);
}

TEST(FileUtilTest, AbandonedWriteRemovesItsTemporary) {
  testing::ScopedTempDir dir;
  const std::string path = dir.File("metrics.json");
  {
    auto file = AtomicFile::Create(path);
    ASSERT_TRUE(file.ok());
    ASSERT_TRUE(file->Append("half").ok());
  }
  EXPECT_EQ(CountFiles(dir.path()), 0);
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(FileUtilTest, LinkTargetIsReplacedAndTheLinkKept) {
  testing::ScopedTempDir dir;
  const std::string target = dir.File("m.json");
  ASSERT_TRUE(WriteFileAtomically(target, "old").ok());
  std::filesystem::create_symlink("m.json", dir.File("link.json"));
  ASSERT_TRUE(WriteFileAtomically(dir.File("link.json"), "new").ok());
  EXPECT_TRUE(std::filesystem::is_symlink(dir.File("link.json")));
  EXPECT_EQ(ReadAll(target), "new");
  EXPECT_EQ(CountFiles(dir.path()), 2);
}

TEST(FileUtilTest, FifoIsWrittenThroughOnlyWhereAllowed) {
  testing::ScopedTempDir dir;
  const std::string fifo = dir.File("pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(WriteFileAtomically(fifo, "x").message(),
            "output=" + fifo + ": is a FIFO (named pipe), not a regular file; this output is written by temporary "
            "file and rename, which would replace it: give a file name");
  // A reader opened first (not blocking), so the writer's open returns at once.
  const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  ASSERT_GE(reader, 0);
  ASSERT_TRUE(WriteFileAtomically(fifo, "1:0.5\n", StreamOutput::kWriteThrough).ok());
  char buf[16] = {};
  EXPECT_EQ(::read(reader, buf, sizeof(buf)), 6);
  ::close(reader);
  EXPECT_EQ(std::string(buf), "1:0.5\n");
  struct stat st;
  ASSERT_EQ(::lstat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  EXPECT_EQ(CountFiles(dir.path()), 1);
}

TEST(FileUtilTest, FifoWithNoReaderIsRefusedAtOnce) {
  testing::ScopedTempDir dir;
  const std::string fifo = dir.File("pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // A blocking open() would wait for a reader forever: none is started.
  const Status st = WriteFileAtomically(fifo, "x", StreamOutput::kWriteThrough);
  EXPECT_EQ(st.code(), Status::Code::kIOError);
  EXPECT_EQ(st.message(), fifo + ": is a FIFO with no reader (opened with O_NONBLOCK, so as not to wait for one): "
                                 "start the reader first, or give a regular file");
  EXPECT_EQ(CountFiles(dir.path()), 1);
}

TEST(FileUtilTest, MissingDirectoryIsAnIOErrorNamingThePath) {
  testing::ScopedTempDir dir;
  const std::string path = dir.File("no_such_dir/out.json");
  Status st = WriteFileAtomically(path, "x");
  ASSERT_EQ(st.code(), Status::Code::kIOError);
  EXPECT_NE(st.message().find(path), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("No such file or directory"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace tether
