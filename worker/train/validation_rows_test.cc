#include "worker/train/validation_rows.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "input/validation_split.h"
#include "tests/testing/temp_dir.h"
#include "worker/train/training_data.h"

namespace tether {
namespace {

// An XMC file of 20 rows: data row r (0-based) is line r + 2, with label
// r % 3 and feature r % 5.
std::string WriteRows(const testing::ScopedTempDir& dir) {
  std::string text = "20 5 3\n";
  for (int r = 0; r < 20; ++r) text += std::to_string(r % 3) + " " + std::to_string(r % 5) + ":1\n";
  const std::string path = dir.File("rows.txt");
  std::ofstream(path) << text;
  return path;
}

std::string Write(const testing::ScopedTempDir& dir, const std::string& name, const std::string& text) {
  std::ofstream(dir.File(name)) << text;
  return dir.File(name);
}

JobConfig Job(const std::string& train_file) {
  JobConfig c;
  c.mutable_data()->set_format(XMC);
  c.mutable_data()->set_index_base(0);
  c.mutable_data()->set_num_features(5);
  c.mutable_data()->set_num_labels(3);
  c.mutable_data()->set_train_file(train_file);
  return c;
}

struct Rows {
  std::vector<int64_t> train, validation;  // file lines over all workers, sorted
  std::vector<int64_t> shares;             // validation rows per worker
};

Rows ReadAll(const JobConfig& c, int workers) {
  Rows out;
  JobConfig job = c;
  job.mutable_cluster()->set_num_workers(workers);
  for (int rank = 0; rank < workers; ++rank) {
    StatusOr<TrainingData> data = LoadTrainingData(job, rank, false);
    EXPECT_TRUE(data.ok()) << data.status().ToString();
    if (!data.ok()) return out;
    StatusOr<Dataset> val = TakeValidationShare(job, rank, workers, &data->rows);
    EXPECT_TRUE(val.ok()) << val.status().ToString();
    if (!val.ok()) return out;
    EXPECT_EQ(val->features.rows, static_cast<int64_t>(val->source_lines.size()));
    EXPECT_EQ(val->labels.rows, val->features.rows);
    EXPECT_EQ(data->rows.features.rows, static_cast<int64_t>(data->rows.source_lines.size()));
    out.train.insert(out.train.end(), data->rows.source_lines.begin(), data->rows.source_lines.end());
    out.validation.insert(out.validation.end(), val->source_lines.begin(), val->source_lines.end());
    out.shares.push_back(val->features.rows);
  }
  std::sort(out.train.begin(), out.train.end());
  std::sort(out.validation.begin(), out.validation.end());
  return out;
}

// Lines of the 1-based rows `rows` (line = row + 1 after the XMC header).
std::vector<int64_t> Lines(const std::vector<int64_t>& rows) {
  std::vector<int64_t> out;
  for (int64_t r : rows) out.push_back(r + 1);
  return out;
}

std::vector<int64_t> Range(int64_t from, int64_t to) {  // [from, to]
  std::vector<int64_t> out;
  for (int64_t r = from; r <= to; ++r) out.push_back(r);
  return out;
}

// Rows 2, 5, 9, 14 of train_split's 1..16 and row 18 outside it.
TEST(ValidationRowsTest, SplitFileRowsAreTheSameForOneToThreeWorkers) {
  const testing::ScopedTempDir dir;
  JobConfig c = Job(WriteRows(dir));
  std::string split;
  for (int r = 1; r <= 16; ++r) split += std::to_string(r) + "\n";
  c.mutable_data()->set_train_split(Write(dir, "train.split", split));
  c.mutable_data()->set_validation_split(Write(dir, "val.split", "14\n2\n18\r\n\n5\n9\n"));
  std::vector<int64_t> want_train;
  for (int64_t r : Range(1, 16))
    if (r != 2 && r != 5 && r != 9 && r != 14) want_train.push_back(r);
  for (int workers = 1; workers <= 3; ++workers) {
    const Rows got = ReadAll(c, workers);
    EXPECT_EQ(got.validation, Lines({2, 5, 9, 14, 18})) << workers << " worker(s)";
    EXPECT_EQ(got.train, Lines(want_train)) << workers << " worker(s)";
    // Rows [rank*K/n, (rank+1)*K/n) of the K = 5 validation rows.
    const std::vector<std::vector<int64_t>> shares = {{5}, {2, 3}, {1, 2, 2}};
    EXPECT_EQ(got.shares, shares[workers - 1]);
  }
  // Without train_split: every other row trains.
  c.mutable_data()->clear_train_split();
  for (int workers = 1; workers <= 3; ++workers) {
    const Rows got = ReadAll(c, workers);
    EXPECT_EQ(got.validation, Lines({2, 5, 9, 14, 18}));
    EXPECT_EQ(got.train, Lines({1, 3, 4, 6, 7, 8, 10, 11, 12, 13, 15, 16, 17, 19, 20}));
  }
  StatusOr<Dataset> job = JobTrainingRows(c);
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(job->source_lines, Lines({1, 3, 4, 6, 7, 8, 10, 11, 12, 13, 15, 16, 17, 19, 20}));
  // A validation row keeps its own label and feature.
  Dataset all = *LoadSplit(c, c.data().train_file(), "", "", 0, 1);
  const Dataset val = *TakeValidationShare(c, 0, 1, &all);
  for (int64_t i = 0; i < val.features.rows; ++i) {
    const int64_t r = val.source_lines[i] - 2;
    EXPECT_EQ(val.labels.col_idx[val.labels.row_ptr[i]], static_cast<uint32_t>(r % 3));
    EXPECT_EQ(val.features.col_idx[val.features.row_ptr[i]], static_cast<uint32_t>(r % 5));
  }
}

// train.validation_fraction takes the rows TakeValidationRows takes, from
// each worker's own partition.
TEST(ValidationRowsTest, FractionCarvesEachPartition) {
  const testing::ScopedTempDir dir;
  JobConfig c = Job(WriteRows(dir));
  c.mutable_train()->set_validation_fraction(0.3);
  Dataset whole = *LoadSplit(c, c.data().train_file(), "", "", 0, 1);
  const Dataset want = TakeValidationRows(&whole, 0.3, c.train().validation_seed());
  ASSERT_GT(want.features.rows, 0);
  for (int workers = 1; workers <= 3; ++workers) {
    const Rows got = ReadAll(c, workers);
    EXPECT_EQ(got.validation, want.source_lines);
    EXPECT_EQ(got.train, whole.source_lines);
  }
  c.mutable_train()->set_validation_fraction(0);
  const Rows none = ReadAll(c, 2);
  EXPECT_TRUE(none.validation.empty());
  EXPECT_EQ(none.train.size(), 20u);
}

// Each bad split file is refused naming the file and the line.
TEST(ValidationRowsTest, BadSplitFilesNameFileAndLine) {
  const testing::ScopedTempDir dir;
  JobConfig c = Job(WriteRows(dir));
  const struct {
    const char* text;
    std::string want;  // after "PATH:"
  } cases[] = {
      {"2\nabc\n", "2: invalid row index 'abc': expected a positive integer"},
      {"2\n5\n2\n", "3: duplicate row index 2 (also on line 1)"},
      {"0\n", "1: row index 0 is invalid: split files are 1-based"},
      {"3\n4 5\n", "2: expected one row index per line, got '4 5'"},
      {"2\n21\n", "2: row 21 is past the end of " + c.data().train_file() +
                      ", which has 20 data rows (split files are 1-based)"},
  };
  for (const auto& k : cases) {
    const std::string path = Write(dir, "bad.split", k.text);
    c.mutable_data()->set_validation_split(path);
    for (int workers = 1; workers <= 2; ++workers) {
      StatusOr<TrainingData> data = LoadTrainingData(c, 0, false);
      ASSERT_TRUE(data.ok()) << data.status().ToString();
      StatusOr<Dataset> val = TakeValidationShare(c, 0, workers, &data->rows);
      ASSERT_FALSE(val.ok()) << k.text;
      EXPECT_EQ(val.status().code(), Status::Code::kInvalidArgument);
      EXPECT_EQ(val.status().message(), path + ":" + k.want);
    }
  }
  c.mutable_data()->set_validation_split(Write(dir, "empty.split", "\n \n"));
  StatusOr<Dataset> whole = JobTrainingRows(c);
  ASSERT_FALSE(whole.ok());
  EXPECT_EQ(whole.status().message(), dir.File("empty.split") + ": no row indices found");
}

TEST(ValidationRowsTest, ValidationRowsThatAreTestRowsAreCounted) {
  testing::ScopedTempDir dir;
  JobConfig c = Job(WriteRows(dir));
  EXPECT_EQ(*ValidationRowsInTestSplit(c), 0);  // no split
  c.mutable_data()->set_validation_split(Write(dir, "val.txt", "6\n5\n20\n2\n"));
  c.mutable_data()->set_test_file(c.data().train_file());
  c.mutable_data()->set_test_split(Write(dir, "test.txt", "5\n17\n18\n19\n20\n"));
  EXPECT_EQ(*ValidationRowsInTestSplit(c), 2);  // rows 5 and 20
  c.mutable_data()->set_test_split(Write(dir, "test2.txt", "17\n18\n"));
  EXPECT_EQ(*ValidationRowsInTestSplit(c), 0);
  c.mutable_data()->set_test_split(dir.File("test.txt"));
  c.mutable_data()->set_test_file(Write(dir, "other.txt", "1 5 3\n0 0:1\n"));
  EXPECT_EQ(*ValidationRowsInTestSplit(c), 0);  // another file: other rows
  c.mutable_data()->set_test_file(c.data().train_file());
  c.mutable_data()->set_test_split(Write(dir, "bad.txt", "5\nx\n"));
  const StatusOr<int64_t> bad = ValidationRowsInTestSplit(c);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find(dir.File("bad.txt") + ":2:"), std::string::npos) << bad.status().message();
}

}  // namespace
}  // namespace tether
