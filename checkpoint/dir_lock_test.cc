// One live job per checkpoint folder: a writer's lock refuses another
// writer and any reader, naming the folder and the holder; readers share;
// the lock of a process that died (SIGKILL) blocks nothing.
#include "checkpoint/dir_lock.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "checkpoint/checkpoint.h"
#include "tests/testing/temp_dir.h"

namespace tether {
namespace {

using Mode = CheckpointDirLock::Mode;

std::string Me() {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  return "pid " + std::to_string(getpid()) + " on host " + host;
}

TEST(CheckpointDirLockTest, AWritersFolderRefusesAnotherWriterAndAnyReaderNamingTheHolder) {
  testing::ScopedTempDir tmp;
  const std::string dir = tmp.File("ck");  // created by the writer
  {
    StatusOr<CheckpointDirLock> a = CheckpointDirLock::Acquire(dir, Mode::kWrite);
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    EXPECT_TRUE(a->held());
    EXPECT_TRUE(std::filesystem::is_directory(dir));
    const StatusOr<CheckpointDirLock> b = CheckpointDirLock::Acquire(dir, Mode::kWrite);
    ASSERT_FALSE(b.ok());
    EXPECT_EQ(b.status().code(), Status::Code::kFailedPrecondition);
    EXPECT_EQ(b.status().message(),
              "checkpoint folder " + dir + " is in use by a live job (" + Me() + ", holding " + dir +
                  "/LOCK): a job that writes checkpoints needs the folder to itself; give it its own "
                  "--checkpoint_dir (a lock of a process that died is released with it)");
    const StatusOr<CheckpointDirLock> r = CheckpointDirLock::Acquire(dir, Mode::kRead);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("a resume reads a folder no live job writes"), std::string::npos)
        << r.status().message();
    EXPECT_FALSE(CheckpointDirLock::Probe(dir, Mode::kWrite).ok());
    EXPECT_FALSE(CheckpointDirLock::Probe(dir, Mode::kRead).ok());
    // Moved, the lock stays held.
    CheckpointDirLock moved = std::move(a).value();
    EXPECT_FALSE(CheckpointDirLock::Probe(dir, Mode::kWrite).ok());
  }
  // Released with its object.
  EXPECT_TRUE(CheckpointDirLock::Probe(dir, Mode::kWrite).ok());
  EXPECT_TRUE(CheckpointDirLock::Acquire(dir, Mode::kWrite).ok());
}

TEST(CheckpointDirLockTest, ReadersShareAndKeepWritersOut) {
  testing::ScopedTempDir tmp;
  StatusOr<CheckpointDirLock> r1 = CheckpointDirLock::Acquire(tmp.path(), Mode::kRead);
  StatusOr<CheckpointDirLock> r2 = CheckpointDirLock::Acquire(tmp.path(), Mode::kRead);
  ASSERT_TRUE(r1.ok()) << r1.status().ToString();
  ASSERT_TRUE(r2.ok()) << r2.status().ToString();
  EXPECT_TRUE(CheckpointDirLock::Probe(tmp.path(), Mode::kRead).ok());
  const Status w = CheckpointDirLock::Probe(tmp.path(), Mode::kWrite);
  EXPECT_EQ(w.code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(w.message().find("(" + Me() + ", holding"), std::string::npos) << w.message();
  // A folder no job has held (no LOCK file): the probe creates nothing.
  EXPECT_TRUE(CheckpointDirLock::Probe(tmp.File("none"), Mode::kWrite).ok());
  EXPECT_FALSE(std::filesystem::exists(tmp.File("none")));
}

// A holder in another process is named by its pid; SIGKILLed, its lock is
// gone though its LOCK file (with its name) stays.
TEST(CheckpointDirLockTest, AnotherProcesssLockIsReleasedWhenItDies) {
  testing::ScopedTempDir tmp;
  int ready[2], hold[2];
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe(hold), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    StatusOr<CheckpointDirLock> lock = CheckpointDirLock::Acquire(tmp.path(), Mode::kWrite);
    const char c = lock.ok() ? 'y' : 'n';
    if (write(ready[1], &c, 1) != 1) _exit(3);
    char ignored;
    (void)!read(hold[0], &ignored, 1);  // until killed, or the parent's end closes
    _exit(0);
  }
  close(hold[0]);
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  EXPECT_EQ(c, 'y');
  const Status held = CheckpointDirLock::Probe(tmp.path(), Mode::kWrite);
  EXPECT_NE(held.message().find("(pid " + std::to_string(child) + " on host "), std::string::npos) << held.message();
  ASSERT_EQ(kill(child, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  close(hold[1]);
  close(ready[0]);
  close(ready[1]);
  EXPECT_TRUE(std::filesystem::exists(tmp.File("LOCK")));
  StatusOr<CheckpointDirLock> mine = CheckpointDirLock::Acquire(tmp.path(), Mode::kWrite);
  ASSERT_TRUE(mine.ok()) << mine.status().ToString();
  std::ifstream in(tmp.File("LOCK"));
  std::string text;
  std::getline(in, text);
  EXPECT_EQ(text, Me());
}

// A folder this process may only read (a read-only copy of checkpoints):
// a resume holds nothing there, or the LOCK file a writer left.
TEST(CheckpointDirLockTest, AReadOnlyFolderCanBeResumedFrom) {
  if (geteuid() == 0) GTEST_SKIP() << "root may write a mode-555 folder";
  testing::ScopedTempDir tmp;
  const std::string ro = tmp.File("ro");
  std::filesystem::create_directories(ro);
  std::filesystem::permissions(ro, std::filesystem::perms::owner_read | std::filesystem::perms::owner_exec);
  StatusOr<CheckpointDirLock> r = CheckpointDirLock::Acquire(ro, Mode::kRead);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->held());
  std::filesystem::permissions(ro, std::filesystem::perms::owner_all);
  {
    StatusOr<CheckpointDirLock> w = CheckpointDirLock::Acquire(ro, Mode::kWrite);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
  }
  std::filesystem::permissions(ro, std::filesystem::perms::owner_read | std::filesystem::perms::owner_exec);
  std::filesystem::permissions(ro + "/LOCK", std::filesystem::perms::owner_read);
  r = CheckpointDirLock::Acquire(ro, Mode::kRead);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->held());
  EXPECT_FALSE(CheckpointDirLock::Probe(ro, Mode::kWrite).ok());
  std::filesystem::permissions(ro, std::filesystem::perms::owner_all);
}

// A FIFO that no process writes (a read-only open of it would wait for a
// writer) or a device in place of LOCK: refused at once, naming it and what
// it is, by a resume's lock, the launcher's probe and a writer's lock.
TEST(CheckpointDirLockTest, AFifoOrADeviceAsTheLockFileIsRefusedAtOnce) {
  testing::ScopedTempDir tmp;
  const std::string lock = tmp.File(kCheckpointLockName);
  for (const bool fifo : {true, false}) {
    std::filesystem::remove(lock);
    if (fifo) {
      ASSERT_EQ(::mkfifo(lock.c_str(), 0600), 0);
    } else {
      ASSERT_EQ(::symlink("/dev/zero", lock.c_str()), 0);
    }
    const std::string want = lock + (fifo ? ": is a FIFO (named pipe)" : ": is a character device") +
                             ", not a regular file";
    const auto start = std::chrono::steady_clock::now();
    for (const Mode mode : {Mode::kRead, Mode::kWrite}) {
      const StatusOr<CheckpointDirLock> held = CheckpointDirLock::Acquire(tmp.path(), mode);
      EXPECT_EQ(held.status().code(), Status::Code::kInvalidArgument);
      EXPECT_EQ(held.status().message(), want);
      EXPECT_EQ(CheckpointDirLock::Probe(tmp.path(), mode).message(), want);
    }
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  }
}

TEST(CheckpointDirLockTest, ResumeFolderIsTheFolderOfCheckpoints) {
  testing::ScopedTempDir tmp;
  const std::string ckpt = tmp.File("ckpt-000000000200");
  std::filesystem::create_directories(ckpt);
  std::ofstream(ckpt + "/" + kManifestName) << "x";
  EXPECT_EQ(ResumeFolder(tmp.path()), tmp.path());
  EXPECT_EQ(ResumeFolder(ckpt), tmp.path());
  EXPECT_EQ(ResumeFolder(ckpt + "/"), tmp.path());
}

}  // namespace
}  // namespace tether
