#include "input/drifting_xmc.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "input/reader.h"
#include "tests/testing/temp_dir.h"

namespace tether {
namespace {

SyntheticXmcOptions Generator() {
  SyntheticXmcOptions o;
  o.num_features = 3000;
  o.num_labels = 500;
  o.features_per_row = 30;
  o.labels_per_row = 3;
  o.seed = 11;
  o.feature_id_bits = 64;
  return o;
}

DriftingStreamOptions Stream() {
  DriftingStreamOptions s;
  s.files = 5;
  s.train_rows = 2002;  // 401 rows in each of the first two files, 400 in the rest
  s.test_rows = 300;
  s.new_id_share = 0.1;
  return s;
}

// The feature ids of every row of an XMC text file.
std::vector<std::set<uint64_t>> RowIds(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);  // header
  std::vector<std::set<uint64_t>> rows;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string field;
    fields >> field;  // labels
    rows.emplace_back();
    while (fields >> field) rows.back().insert(std::stoull(field.substr(0, field.find(':'))));
  }
  return rows;
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(DriftingXmcTest, EachLaterFileHoldsTheStatedShareOfNewIds) {
  testing::ScopedTempDir dir;
  auto stats = DriftingXmcStream(Generator(), Stream()).Write(dir.File("d"));
  ASSERT_TRUE(stats.ok()) << stats.status().message();
  ASSERT_EQ(stats->size(), 6u);  // five training files and the test file
  EXPECT_EQ((*stats)[0].path, dir.File("d.train.000.txt"));
  EXPECT_EQ((*stats)[4].path, dir.File("d.train.004.txt"));
  EXPECT_EQ((*stats)[5].path, dir.File("d.test.txt"));
  std::set<uint64_t> seen;
  std::vector<std::set<uint64_t>> new_by_file(5);
  for (int t = 0; t < 5; ++t) {
    const DriftingFileStats& s = (*stats)[t];
    EXPECT_EQ(s.rows, t < 2 ? 401 : 400) << s.path;
    const auto rows = RowIds(s.path);
    ASSERT_EQ(static_cast<int64_t>(rows.size()), s.rows) << s.path;
    std::set<uint64_t> ids;
    for (const auto& r : rows) ids.insert(r.begin(), r.end());
    EXPECT_EQ(static_cast<int64_t>(ids.size()), s.distinct_ids) << s.path;
    for (uint64_t id : ids)
      if (!seen.count(id)) new_by_file[t].insert(id);
    EXPECT_EQ(static_cast<int64_t>(new_by_file[t].size()), s.new_ids) << s.path;
    if (t == 0) {
      EXPECT_EQ(s.new_ids, s.distinct_ids);
    } else {
      // Exactly the stated share, rounded, of the file's distinct ids.
      EXPECT_EQ(s.new_ids, std::llround(0.1 * static_cast<double>(s.distinct_ids))) << s.path;
      std::printf("%s: %lld distinct ids, %lld new\n", s.path.c_str(), static_cast<long long>(s.distinct_ids),
                  static_cast<long long>(s.new_ids));
    }
    seen.insert(ids.begin(), ids.end());
  }
  // New ids are signature features: they recur in later files and in the
  // test rows, which are drawn from the last files' vocabulary.
  std::set<uint64_t> test_ids;
  for (const auto& r : RowIds((*stats)[5].path)) test_ids.insert(r.begin(), r.end());
  int recurring = 0, in_test = 0;
  for (int t = 1; t < 5; ++t)
    for (uint64_t id : new_by_file[t]) in_test += test_ids.count(id);
  std::set<uint64_t> last;
  for (const auto& r : RowIds((*stats)[4].path)) last.insert(r.begin(), r.end());
  for (uint64_t id : new_by_file[1]) recurring += last.count(id);
  EXPECT_GT(recurring, static_cast<int>(new_by_file[1].size()) / 2) << "file 1's new ids fade out by file 4";
  EXPECT_GT(in_test, 0);
}

TEST(DriftingXmcTest, RepeatsByteForByteAndReadsAsHashedFeatures) {
  testing::ScopedTempDir a, b;
  ASSERT_TRUE(DriftingXmcStream(Generator(), Stream()).Write(a.File("d")).ok());
  ASSERT_TRUE(DriftingXmcStream(Generator(), Stream()).Write(b.File("d")).ok());
  for (const char* f : {"d.train.000.txt", "d.train.003.txt", "d.test.txt"})
    EXPECT_EQ(Slurp(a.File(f)), Slurp(b.File(f))) << f;
  ReadOptions opts;
  opts.format = DataFormat::kXmc;
  opts.index_base = 0;
  opts.hashed_features = true;
  auto d = ReadDataset(a.File("d.train.004.txt"), opts);
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->features.rows, 400);
  EXPECT_EQ(d->labels.cols, 500);
}

TEST(DriftingXmcTest, OptionsOutOfRangeAreRefused) {
  EXPECT_TRUE(ValidateDriftingStream(Generator(), Stream()).ok());
  SyntheticXmcOptions narrow = Generator();
  narrow.feature_id_bits = 32;
  EXPECT_EQ(ValidateDriftingStream(narrow, Stream()).code(), Status::Code::kInvalidArgument);
  DriftingStreamOptions s = Stream();
  s.new_id_share = 1.0;
  EXPECT_EQ(ValidateDriftingStream(Generator(), s).code(), Status::Code::kInvalidArgument);
  s = Stream();
  s.files = 1;
  EXPECT_EQ(ValidateDriftingStream(Generator(), s).code(), Status::Code::kInvalidArgument);
  s.new_id_share = 0;
  EXPECT_TRUE(ValidateDriftingStream(Generator(), s).ok());
  s = Stream();
  s.train_rows = 4;
  EXPECT_EQ(ValidateDriftingStream(Generator(), s).code(), Status::Code::kInvalidArgument);
}

}  // namespace
}  // namespace tether
