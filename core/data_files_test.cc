// Tests for core/data_files.h: lists, globs and their errors.
#include "core/data_files.h"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "tests/testing/temp_dir.h"

namespace tether {
namespace {

TEST(DataFilesTest, OneFileIsNotAList) {
  EXPECT_FALSE(IsFileList("data/a.txt"));
  EXPECT_TRUE(IsFileList("a.txt,b.txt"));
  EXPECT_TRUE(IsFileList("part-*.gz"));
  StatusOr<std::vector<std::string>> one = ExpandFileList("data/a.txt", "data.train_file");
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(*one, std::vector<std::string>{"data/a.txt"});
}

TEST(DataFilesTest, ListsAndGlobsExpandInOrder) {
  testing::ScopedTempDir dir;
  for (const char* n : {"p-2.gz", "p-1.gz", "p-10.gz", "q.txt"}) std::ofstream(dir.path() + "/" + n) << "x";
  const std::string d = dir.path();
  StatusOr<std::vector<std::string>> got = ExpandFileList(d + "/q.txt, " + d + "/p-*.gz", "data.train_file");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, (std::vector<std::string>{d + "/q.txt", d + "/p-1.gz", d + "/p-10.gz", d + "/p-2.gz"}));
}

TEST(DataFilesTest, GlobMatchingNothingNamesThePatternAndFolder) {
  testing::ScopedTempDir dir;
  const std::string pattern = dir.path() + "/part-*.gz";
  StatusOr<std::vector<std::string>> got = ExpandFileList(pattern, "data.train_file");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), Status::Code::kNotFound);
  EXPECT_EQ(got.status().message(), "config field data.train_file: the pattern '" + pattern +
                                        "' matches no file (looked in " + dir.path() + ")");
}

TEST(DataFilesTest, EmptyEntriesAndDuplicatesAreRefused) {
  testing::ScopedTempDir dir;
  std::ofstream(dir.path() + "/a") << "x";
  const std::string a = dir.path() + "/a";
  StatusOr<std::vector<std::string>> got = ExpandFileList(a + ",,", "data.test_file");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().message(), "config field data.test_file: entry 2 of '" + a + ",,' is empty");
  got = ExpandFileList(a + "," + dir.path() + "/?", "data.train_file");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().message(), "config field data.train_file: '" + a + "," + dir.path() + "/?' names '" + a +
                                        "' twice: its rows would be read twice each epoch");
}

// One file under two names (a symbolic link) would be read twice each epoch.
TEST(DataFilesTest, AFileAndALinkToItAreRefused) {
  testing::ScopedTempDir dir;
  const std::string d = dir.path();
  std::ofstream(d + "/a.txt") << "x";
  std::filesystem::create_symlink(d + "/a.txt", d + "/link.txt");
  StatusOr<std::vector<std::string>> got = ExpandFileList(d + "/a.txt, " + d + "/link.txt", "data.train_file");
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("twice"), std::string::npos) << got.status().ToString();
}

TEST(DataFilesTest, ResolveFileListResolvesEachEntry) {
  EXPECT_EQ(ResolveFileList("a.txt, /abs/b.gz,sub/../c-*.gz", "/cfg"), "/cfg/a.txt,/abs/b.gz,/cfg/c-*.gz");
  EXPECT_EQ(ResolveFileList("x/../a.txt", "/cfg"), "/cfg/a.txt");
}

}  // namespace
}  // namespace tether
