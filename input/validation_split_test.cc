#include "input/validation_split.h"

#include <gtest/gtest.h>

#include <string>

namespace tether {
namespace {

// A LIBSVM file of n rows, row r with label r % 2 and feature (r % 5) + 1.
std::string Rows(int n) {
  std::string text;
  for (int r = 0; r < n; ++r) text += std::to_string(r % 2) + " " + std::to_string(r % 5 + 1) + ":1\n";
  return text;
}

Dataset Read(const std::string& text, int partition, int partitions) {
  ReadOptions o;
  o.format = DataFormat::kLibsvm;
  o.index_base = 1;
  o.num_features = 5;
  o.partition = partition;
  o.num_partitions = partitions;
  StatusOr<Dataset> d = ParseDataset(text, "rows.txt", o);
  EXPECT_TRUE(d.ok()) << d.status().ToString();
  return std::move(d).value();
}

// The choice is a hash of (seed, line): a fixed count for a fixed seed, and
// about the fraction.
TEST(ValidationSplitTest, FixedSeedGivesAFixedCount) {
  int chosen = 0;
  for (int64_t line = 1; line <= 10000; ++line) chosen += IsValidationRow(line, 0.2, 1) ? 1 : 0;
  EXPECT_EQ(chosen, 1960);  // this hash's draw: within 2 % of 2000
  int other = 0;
  for (int64_t line = 1; line <= 10000; ++line) other += IsValidationRow(line, 0.2, 2) ? 1 : 0;
  EXPECT_NE(other, chosen);
  for (int64_t line = 1; line <= 1000; ++line) EXPECT_FALSE(IsValidationRow(line, 0.0, 1));
  // A smaller fraction chooses a subset of a larger one's rows.
  for (int64_t line = 1; line <= 1000; ++line)
    if (IsValidationRow(line, 0.1, 1)) {
      EXPECT_TRUE(IsValidationRow(line, 0.2, 1)) << line;
    }
}

// Workers carve their own shares and together set aside exactly the rows
// one reader of the whole file does.
TEST(ValidationSplitTest, SameRowsWhateverTheLayout) {
  const std::string text = Rows(500);
  Dataset whole = Read(text, 0, 1);
  const Dataset val = TakeValidationRows(&whole, 0.25, 7);
  ASSERT_GT(val.features.rows, 90);
  ASSERT_LT(val.features.rows, 160);
  EXPECT_EQ(whole.features.rows + val.features.rows, 500);
  EXPECT_EQ(val.features.rows, static_cast<int64_t>(val.source_lines.size()));
  EXPECT_EQ(val.targets.size(), val.source_lines.size());
  EXPECT_EQ(val.features.cols, 5);
  std::vector<int64_t> shares;
  int64_t kept = 0;
  for (int p = 0; p < 3; ++p) {
    Dataset part = Read(text, p, 3);
    const Dataset v = TakeValidationRows(&part, 0.25, 7);
    shares.insert(shares.end(), v.source_lines.begin(), v.source_lines.end());
    kept += part.features.rows;
    for (int64_t line : part.source_lines) EXPECT_FALSE(IsValidationRow(line, 0.25, 7));
  }
  std::sort(shares.begin(), shares.end());
  EXPECT_EQ(shares, val.source_lines);
  EXPECT_EQ(kept, whole.features.rows);
  // Rows move whole: a validation row keeps its label and feature.
  for (size_t i = 0; i < val.source_lines.size(); ++i) {
    const int64_t r = val.source_lines[i] - 1;  // LIBSVM: line r + 1 is row r
    EXPECT_EQ(val.targets[i], static_cast<float>(r % 2));
    EXPECT_EQ(val.features.col_idx[val.features.row_ptr[i]], static_cast<uint32_t>(r % 5));
  }
}

// The rows at given lines move out whole, in order; lines no row has are
// ignored.
TEST(ValidationSplitTest, TakeRowsAtLines) {
  Dataset rows = Read(Rows(10), 0, 1);
  const Dataset taken = TakeRowsAtLines(&rows, {2, 5, 6, 40});
  EXPECT_EQ(taken.source_lines, (std::vector<int64_t>{2, 5, 6}));
  EXPECT_EQ(taken.targets, (std::vector<float>{1, 0, 1}));
  EXPECT_EQ(taken.features.rows, 3);
  EXPECT_EQ(taken.features.cols, 5);
  EXPECT_EQ(taken.features.col_idx, (std::vector<uint32_t>{1, 4, 0}));
  EXPECT_EQ(rows.source_lines, (std::vector<int64_t>{1, 3, 4, 7, 8, 9, 10}));
  EXPECT_EQ(rows.features.rows, 7);
  EXPECT_EQ(rows.targets.size(), 7u);
  EXPECT_EQ(TakeRowsAtLines(&rows, {}).features.rows, 0);
  EXPECT_EQ(rows.features.rows, 7);
}

TEST(ValidationSplitTest, SubtractRows) {
  EXPECT_EQ(SubtractRows({0, 2, 3, 7, 9}, {2, 5, 9}), (std::vector<int64_t>{0, 3, 7}));
  EXPECT_EQ(SubtractRows({1, 2}, {}), (std::vector<int64_t>{1, 2}));
}

}  // namespace
}  // namespace tether
