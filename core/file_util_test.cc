#include "core/file_util.h"

#include <sys/stat.h>

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
