// The output policy on every kind of path: what is written, what is written
// through, what is refused, and outputs that are the run's inputs.
#include "core/output_target.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/testing/temp_dir.h"

namespace tether {
namespace {

namespace fs = std::filesystem;

class OutputTargetTest : public ::testing::Test {
 protected:
  std::string In(const std::string& name) const { return dir_.File(name); }
  std::string Write(const std::string& name, const std::string& text) const {
    std::ofstream(In(name)) << text;
    return In(name);
  }
  static std::string Message(const StatusOr<OutputTarget>& t) { return t.ok() ? "ok" : t.status().message(); }
  testing::ScopedTempDir dir_;
};

TEST_F(OutputTargetTest, RegularAndMissingFilesAreWrittenWhereNamed) {
  const std::string file = Write("m.json", "{}");
  auto t = ResolveOutputTarget(file, "flag --metrics_out", StreamOutput::kRefuse);
  ASSERT_TRUE(t.ok()) << Message(t);
  EXPECT_EQ(t->path, file);
  EXPECT_TRUE(t->exists);
  EXPECT_FALSE(t->write_through);

  t = ResolveOutputTarget(In("new.json"), "flag --metrics_out", StreamOutput::kRefuse);
  ASSERT_TRUE(t.ok()) << Message(t);
  EXPECT_EQ(t->path, In("new.json"));
  EXPECT_FALSE(t->exists);
  // A missing folder is the start-up check's to refuse (CheckWritableFile):
  // here it is a file still to be made.
  t = ResolveOutputTarget(In("no/such/dir/m.json"), "flag --metrics_out", StreamOutput::kRefuse);
  ASSERT_TRUE(t.ok()) << Message(t);
  EXPECT_FALSE(t->exists);
}

TEST_F(OutputTargetTest, DirectoryIsRefusedNamingFlagAndPath) {
  fs::create_directories(In("d"));
  EXPECT_EQ(Message(ResolveOutputTarget(In("d"), "flag --output", StreamOutput::kWriteThrough)),
            "flag --output=" + In("d") + ": is a directory; give a file name");
}

TEST_F(OutputTargetTest, LinkIsFollowedToItsTargetNeverReplaced) {
  const std::string file = Write("real.json", "old");
  fs::create_directories(In("links"));
  fs::create_symlink("../real.json", In("links/m.json"));
  auto t = ResolveOutputTarget(In("links/m.json"), "flag --metrics_out", StreamOutput::kRefuse);
  ASSERT_TRUE(t.ok()) << Message(t);
  EXPECT_EQ(t->path, file);
  EXPECT_TRUE(t->exists);
  // A link to a link: followed to the end.
  fs::create_symlink(In("links/m.json"), In("twice"));
  t = ResolveOutputTarget(In("twice"), "flag --metrics_out", StreamOutput::kRefuse);
  ASSERT_TRUE(t.ok()) << Message(t);
  EXPECT_EQ(t->path, file);
}

TEST_F(OutputTargetTest, DanglingLinkNamesTheFileToMake) {
  fs::create_symlink("made.json", In("link"));
  auto t = ResolveOutputTarget(In("link"), "flag --metrics_out", StreamOutput::kRefuse);
  ASSERT_TRUE(t.ok()) << Message(t);
  EXPECT_EQ(t->path, In("made.json"));
  EXPECT_FALSE(t->exists);
}

TEST_F(OutputTargetTest, LinkLoopIsRefused) {
  fs::create_symlink(In("b"), In("a"));
  fs::create_symlink(In("a"), In("b"));
  EXPECT_NE(Message(ResolveOutputTarget(In("a"), "flag --out", StreamOutput::kRefuse)).find("symbolic links in a row"),
            std::string::npos);
}

TEST_F(OutputTargetTest, FifoIsWrittenThroughOrRefusedByTheOutputsChoice) {
  ASSERT_EQ(::mkfifo(In("pipe").c_str(), 0600), 0) << std::strerror(errno);
  auto t = ResolveOutputTarget(In("pipe"), "flag --output", StreamOutput::kWriteThrough);
  ASSERT_TRUE(t.ok()) << Message(t);
  EXPECT_TRUE(t->write_through);
  EXPECT_EQ(t->path, In("pipe"));
  EXPECT_EQ(Message(ResolveOutputTarget(In("pipe"), "flag --out", StreamOutput::kRefuse)),
            "flag --out=" + In("pipe") + ": is a FIFO (named pipe), not a regular file; this output is written by "
            "temporary file and rename, which would replace it: give a file name");
  // Through a link: the FIFO is written, the link stays.
  fs::create_symlink(In("pipe"), In("to_pipe"));
  t = ResolveOutputTarget(In("to_pipe"), "flag --output", StreamOutput::kWriteThrough);
  ASSERT_TRUE(t.ok()) << Message(t);
  EXPECT_TRUE(t->write_through);
  EXPECT_EQ(t->path, In("pipe"));
}

TEST_F(OutputTargetTest, CharacterDeviceIsWrittenThroughOrRefused) {
  // The null device's numbers (1, 3), made in this test's own folder.
  if (::mknod(In("null").c_str(), S_IFCHR | 0600, makedev(1, 3)) != 0)
    GTEST_SKIP() << "mknod of a character device not permitted here: " << std::strerror(errno);
  auto t = ResolveOutputTarget(In("null"), "flag --metrics_out", StreamOutput::kWriteThrough);
  ASSERT_TRUE(t.ok()) << Message(t);
  EXPECT_TRUE(t->write_through);
  EXPECT_NE(Message(ResolveOutputTarget(In("null"), "flag --model_out", StreamOutput::kRefuse))
                .find("flag --model_out=" + In("null") + ": is a character device"),
            std::string::npos);
}

TEST_F(OutputTargetTest, OutputThatIsAnInputIsRefusedByInode) {
  const std::string test = Write("test.txt", "1 1:1\n");
  const std::string config = Write("job.pbtxt", "data {}\n");
  const std::vector<NamedInput> inputs = {{"flag --config", config}, {"data.test_file", test}};
  EXPECT_TRUE(CheckOutputNotInput(In("m.json"), "flag --metrics_out", inputs).ok());
  Write("other.json", "{}");
  EXPECT_TRUE(CheckOutputNotInput(In("other.json"), "flag --metrics_out", inputs).ok());
  ASSERT_EQ(::link(test.c_str(), In("hard").c_str()), 0) << std::strerror(errno);
  EXPECT_EQ(CheckOutputNotInput(In("hard"), "flag --metrics_out", inputs).message(),
            "flag --metrics_out=" + In("hard") + " is the same file as data.test_file=" + test +
                ": writing it would destroy an input of this run; give another file name");
  fs::create_symlink(config, In("soft"));
  EXPECT_NE(CheckOutputNotInput(In("soft"), "flag --metrics_out", inputs).message().find("flag --config=" + config),
            std::string::npos);
  // Named differently: "./" and a folder's "..".
  fs::create_directories(In("sub"));
  EXPECT_FALSE(CheckOutputNotInput(In("sub/../job.pbtxt"), "flag --metrics_out", inputs).ok());
}

// A descriptor this process holds open, closed at the end of the test.
struct OpenFd {
  int fd = -1;
  ~OpenFd() {
    if (fd >= 0) ::close(fd);
  }
};

TEST_F(OutputTargetTest, DescriptorOnAPipeOrSocketIsWrittenThroughItNeverLookedUp) {
  int p[2];
  ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0) << std::strerror(errno);
  OpenFd read_end{p[0]}, write_end{p[1]};
  const std::string n = std::to_string(write_end.fd);
  const std::string own = "/proc/" + std::to_string(::getpid()) + "/fd/" + n;
  for (const std::string& path : {"/dev/fd/" + n, "/proc/self/fd/" + n, own}) {
    auto t = ResolveOutputTarget(path, "flag --output", StreamOutput::kWriteThrough);
    ASSERT_TRUE(t.ok()) << path << ": " << Message(t);
    EXPECT_EQ(t->path, path) << path;
    EXPECT_TRUE(t->write_through) << path;
    EXPECT_TRUE(t->exists) << path;
    EXPECT_EQ(t->fd, write_end.fd) << path;
  }
  // Where the output is always a regular file, a pipe is still refused.
  EXPECT_EQ(Message(ResolveOutputTarget("/proc/self/fd/" + n, "flag --model_out", StreamOutput::kRefuse)),
            "flag --model_out=/proc/self/fd/" + n +
                ": is a FIFO (named pipe), not a regular file; this output is written by temporary file and rename, "
                "which would replace it: give a file name");

  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0) << std::strerror(errno);
  OpenFd a{sv[0]}, b{sv[1]};
  auto t = ResolveOutputTarget("/dev/fd/" + std::to_string(a.fd), "flag --output", StreamOutput::kWriteThrough);
  ASSERT_TRUE(t.ok()) << Message(t);
  EXPECT_TRUE(t->write_through);
  EXPECT_EQ(t->fd, a.fd);
}

TEST_F(OutputTargetTest, DescriptorOnATerminalIsWrittenThroughIt) {
  OpenFd master{::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC)};
  if (master.fd < 0 || ::grantpt(master.fd) != 0 || ::unlockpt(master.fd) != 0)
    GTEST_SKIP() << "no pseudo-terminal here: " << std::strerror(errno);
  OpenFd tty{::open(::ptsname(master.fd), O_RDWR | O_NOCTTY | O_CLOEXEC)};
  ASSERT_GE(tty.fd, 0) << std::strerror(errno);
  auto t = ResolveOutputTarget("/proc/self/fd/" + std::to_string(tty.fd), "flag --output", StreamOutput::kWriteThrough);
  ASSERT_TRUE(t.ok()) << Message(t);
  EXPECT_TRUE(t->write_through);
  EXPECT_EQ(t->fd, tty.fd);
}

TEST_F(OutputTargetTest, DescriptorOnARegularFileIsThatFileByItsPath) {
  const std::string file = Write("out.txt", "old");
  OpenFd f{::open(file.c_str(), O_WRONLY | O_CLOEXEC)};
  ASSERT_GE(f.fd, 0) << std::strerror(errno);
  for (const std::string& path : {"/dev/fd/" + std::to_string(f.fd), "/proc/self/fd/" + std::to_string(f.fd)}) {
    auto t = ResolveOutputTarget(path, "flag --output", StreamOutput::kWriteThrough);
    ASSERT_TRUE(t.ok()) << path << ": " << Message(t);
    EXPECT_EQ(t->path, file) << path;
    EXPECT_FALSE(t->write_through) << path;
    EXPECT_EQ(t->fd, -1) << path;
  }
}

TEST_F(OutputTargetTest, SocketNotOpenInThisProcessIsRefused) {
  // Another process's descriptor folder: its socket cannot be opened by name.
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0) << std::strerror(errno);
  OpenFd a{sv[0]}, b{sv[1]};
  const pid_t child = ::fork();
  ASSERT_GE(child, 0) << std::strerror(errno);
  if (child == 0) {
    char c;
    (void)!::read(b.fd, &c, 1);  // holds the socket open until the parent writes
    ::_exit(0);
  }
  const std::string path = "/proc/" + std::to_string(child) + "/fd/" + std::to_string(a.fd);
  const std::string message = Message(ResolveOutputTarget(path, "flag --output", StreamOutput::kWriteThrough));
  ASSERT_EQ(::write(a.fd, "x", 1), 1);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_EQ(message, "flag --output=" + path + ": is a socket, not a regular file; nothing is written over it: give a file name");
}

}  // namespace
}  // namespace tether
