#include "core/file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
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

// Runs WriteFileAtomically(PATH, TEXT) in a child whose descriptor `target`
// (1, 2, or another) is `fd`; returns the child's exit status: 0 when the
// write succeeded, 1 with the error written to `fd` otherwise.
int WriteInChild(int fd, int target, const std::string& path, const std::string& text) {
  const pid_t child = ::fork();
  if (child == 0) {
    if (::dup2(fd, target) < 0) ::_exit(3);
    const Status st = WriteFileAtomically(path, text, StreamOutput::kWriteThrough);
    if (!st.ok()) (void)!::write(target, st.message().data(), st.message().size());
    ::_exit(st.ok() ? 0 : 1);
  }
  int status = 0;
  if (child < 0 || ::waitpid(child, &status, 0) != child) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Everything in the pipe whose write end is closed now.
std::string Drain(int read_fd) {
  std::string out;
  char buf[256];
  for (ssize_t n; (n = ::read(read_fd, buf, sizeof(buf))) > 0;) out.append(buf, static_cast<size_t>(n));
  return out;
}

TEST(FileUtilTest, StdoutStderrAndDescriptorsOnAPipeAreWrittenThrough) {
  testing::ScopedTempDir dir;
  int p[2];
  ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
  // Descriptor 9 in the child: /dev/fd/9 and /proc/self/fd/9.
  EXPECT_EQ(WriteInChild(p[1], 1, "/dev/stdout", "out\n"), 0);
  EXPECT_EQ(WriteInChild(p[1], 2, "/dev/stderr", "err\n"), 0);
  EXPECT_EQ(WriteInChild(p[1], 9, "/dev/fd/9", "fd\n"), 0);
  EXPECT_EQ(WriteInChild(p[1], 9, "/proc/self/fd/9", "proc\n"), 0);
  ::close(p[1]);
  EXPECT_EQ(Drain(p[0]), "out\nerr\nfd\nproc\n");
  ::close(p[0]);
  EXPECT_EQ(CountFiles(dir.path()), 0);
}

TEST(FileUtilTest, StdoutOnARegularFileReplacesThatFile) {
  testing::ScopedTempDir dir;
  const std::string file = dir.File("out.txt");
  std::ofstream(file) << "old\n";
  const int fd = ::open(file.c_str(), O_WRONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(WriteInChild(fd, 1, "/dev/stdout", "new\n"), 0);
  ::close(fd);
  EXPECT_EQ(ReadAll(file), "new\n");
  EXPECT_EQ(CountFiles(dir.path()), 1);  // renamed into place: no temporary, nothing moved aside
}

}  // namespace
}  // namespace tether
