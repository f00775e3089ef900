// The lock on an output: one holder at a time, named in the refusal,
// released with its holder.
#include "core/file_lock.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "tests/testing/temp_dir.h"

namespace tether {
namespace {

std::string Host() {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  return host;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(FileLockTest, SecondHolderIsRefusedNamingTheFirstUntilItLetsGo) {
  testing::ScopedTempDir dir;
  const std::string path = dir.File("LOCK");
  EXPECT_TRUE(FileLock::Probe(path, "out=md", "give another").ok());
  auto first = FileLock::Acquire(path, "out=md", "give another");
  ASSERT_TRUE(first.ok()) << first.status().message();
  EXPECT_TRUE(first->held());
  EXPECT_EQ(first->path(), path);
  const std::string me = "pid " + std::to_string(getpid()) + " on host " + Host();
  EXPECT_EQ(ReadAll(path), me + "\n");
  const std::string refused = "out=md: in use by a live job (" + me + ", holding " + path +
                              "): give another (a lock of a process that died is released with it)";
  auto second = FileLock::Acquire(path, "out=md", "give another");
  EXPECT_EQ(second.status().code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(second.status().message(), refused);
  EXPECT_EQ(FileLock::Probe(path, "out=md", "give another").message(), refused);
  {
    FileLock moved = std::move(*first);  // the lock moves with the object
    EXPECT_FALSE(FileLock::Acquire(path, "out=md", "give another").ok());
  }
  EXPECT_TRUE(FileLock::Probe(path, "out=md", "give another").ok());
  EXPECT_TRUE(FileLock::Acquire(path, "out=md", "give another").ok());
}

TEST(FileLockTest, LockOfAProcessThatDiedIsFree) {
  testing::ScopedTempDir dir;
  const std::string path = dir.File("LOCK");
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto lock = FileLock::Acquire(path, "out", "fix");
    _exit(lock.ok() ? 0 : 1);  // dies holding it
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(ReadAll(path), "pid " + std::to_string(child) + " on host " + Host() + "\n");
  auto lock = FileLock::Acquire(path, "out", "fix");
  EXPECT_TRUE(lock.ok()) << lock.status().message();
}

TEST(FileLockTest, FifoInTheLockFilesPlaceIsRefusedNotWaitedOn) {
  testing::ScopedTempDir dir;
  const std::string path = dir.File("LOCK");
  ASSERT_EQ(mkfifo(path.c_str(), 0600), 0);
  const std::string why = path + ": is a FIFO (named pipe), not a regular file";
  EXPECT_EQ(FileLock::Acquire(path, "out", "fix").status().message(), why);
  EXPECT_EQ(FileLock::Probe(path, "out", "fix").message(), why);
}

TEST(FileLockTest, MissingFolderIsAnIOErrorNamingThePath) {
  testing::ScopedTempDir dir;
  const std::string path = dir.File("no/LOCK");
  EXPECT_EQ(FileLock::Acquire(path, "out", "fix").status().message(),
            path + ": cannot open the lock file: No such file or directory");
  EXPECT_TRUE(FileLock::Probe(path, "out", "fix").ok());
}

}  // namespace
}  // namespace tether
