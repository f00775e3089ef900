#include "core/regular_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>

#include <gtest/gtest.h>

#include "tests/testing/temp_dir.h"

namespace tether {
namespace {

void Write(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

TEST(RegularFileTest, ReadsAWholeFile) {
  testing::ScopedTempDir dir;
  Write(dir.File("a"), "line one\nline two\n");
  const StatusOr<std::string> text = ReadRegularFile(dir.File("a"), 1024, "config file");
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_EQ(*text, "line one\nline two\n");
}

TEST(RegularFileTest, ReadsAFileOfExactlyTheLimit) {
  testing::ScopedTempDir dir;
  Write(dir.File("a"), "12345");
  const StatusOr<std::string> text = ReadRegularFile(dir.File("a"), 5, "flagfile");
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_EQ(*text, "12345");
}

TEST(RegularFileTest, RefusesAFileOverTheLimit) {
  testing::ScopedTempDir dir;
  Write(dir.File("a"), "123456");
  const StatusOr<std::string> text = ReadRegularFile(dir.File("a"), 5, "flagfile");
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(text.status().message(), "flagfile " + dir.File("a") + ": is 6 bytes, more than the 5-byte limit for a flagfile");
}

TEST(RegularFileTest, RefusesAFifoWithNoWriterAtOnce) {
  testing::ScopedTempDir dir;
  const std::string fifo = dir.File("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const auto start = std::chrono::steady_clock::now();
  const StatusOr<std::string> text = ReadRegularFile(fifo, 1024, "config file");
  // A blocking open() would never return: no process writes the FIFO.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(text.status().message(), "config file " + fifo + ": is a FIFO (named pipe), not a regular file");
  EXPECT_EQ(CheckRegularFile(fifo, "input file").message(),
            "input file " + fifo + ": is a FIFO (named pipe), not a regular file");
}

TEST(RegularFileTest, RefusesACharacterDeviceWithoutReadingIt) {
  // Opened read-only and never read: /dev/zero would never end.
  const StatusOr<std::string> text = ReadRegularFile("/dev/zero", 1024, "flagfile");
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.status().message(), "flagfile /dev/zero: is a character device, not a regular file");
}

TEST(RegularFileTest, RefusesADirectory) {
  testing::ScopedTempDir dir;
  const Status st = CheckRegularFile(dir.path(), "config file");
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(st.message(), "config file " + dir.path() + ": is a directory, not a regular file");
}

TEST(RegularFileTest, NamesAMissingFile) {
  testing::ScopedTempDir dir;
  const Status st = CheckRegularFile(dir.File("none"), "input file");
  EXPECT_EQ(st.code(), Status::Code::kNotFound);
  EXPECT_EQ(st.message(), "input file " + dir.File("none") + ": no such file");
}

TEST(RegularFileTest, HandsOnABlockingDescriptorAndTheSize) {
  testing::ScopedTempDir dir;
  Write(dir.File("a"), "abc");
  const StatusOr<RegularFile> f = OpenRegularFile(dir.File("a"), "input file");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->bytes, 3u);
  EXPECT_EQ(::fcntl(f->fd, F_GETFL) & O_NONBLOCK, 0);
  ::close(f->fd);
}

// A reader with its own bound checks the size first, then reads the
// descriptor it checked, from its start whatever was read before.
TEST(RegularFileTest, ReadOpenedFileReadsTheCheckedDescriptorWithinItsBound) {
  testing::ScopedTempDir dir;
  Write(dir.File("a"), "0123456789");
  StatusOr<RegularFile> f = OpenRegularFile(dir.File("a"), "");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  char head[4];
  ASSERT_EQ(::read(f->fd, head, sizeof(head)), 4);
  const StatusOr<std::string> text = ReadOpenedFile(*f, 10, dir.File("a"), "");
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_EQ(*text, "0123456789");
  f = OpenRegularFile(dir.File("a"), "");
  ASSERT_TRUE(f.ok());
  const StatusOr<std::string> over = ReadOpenedFile(*f, 9, dir.File("a"), "state file");
  EXPECT_EQ(over.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(over.status().message(),
            "state file " + dir.File("a") + ": is 10 bytes, more than the 9-byte limit for a state file");
  // The descriptor is closed either way.
  EXPECT_EQ(::fcntl(f->fd, F_GETFD), -1);
  f = OpenRegularFile(dir.File("a"), "");
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(ReadOpenedFile(*f, 10, dir.File("a"), "").ok());
  EXPECT_EQ(::fcntl(f->fd, F_GETFD), -1);
}

}  // namespace
}  // namespace tether
