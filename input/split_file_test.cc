// Split files (ReadSplitFile: 1-based row indices, one per line) and the
// bundled Bibtex data read through its train and test splits with exact row,
// feature and label counts. Run from the repository root (ctest sets it as
// the working directory): fixtures live in tests/data/readers/, byte-exact
// copies of the hard cases in tests/data/cases/, Bibtex in data/bibtex/.
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "input/csr.h"
#include "input/reader.h"
#include "tests/testing/temp_dir.h"

namespace tether {
namespace {

const std::string kCases = "tests/data/cases/";
const std::string kFixtures = "tests/data/readers/";
const std::string kBibtex = "data/bibtex/Bibtex_data.txt.gz";
const std::string kBibtexTrain = "data/bibtex/bibtex_trSplit.txt";
const std::string kBibtexTest = "data/bibtex/bibtex_tstSplit.txt";

ReadOptions Xmc(int base) {
  ReadOptions o;
  o.format = DataFormat::kXmc;
  o.index_base = base;
  return o;
}

std::vector<uint32_t> RowCols(const CsrMatrix& m, int64_t r) {
  return {m.col_idx.begin() + m.row_ptr[r], m.col_idx.begin() + m.row_ptr[r + 1]};
}


TEST(SplitFileTest, ParsesOneBasedIndices) {
  auto rows = ReadSplitFile(kFixtures + "split_small.txt");
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  EXPECT_EQ(*rows, (std::vector<int64_t>{0, 1, 2}));
}

TEST(SplitFileTest, ErrorsNameFileAndLine) {
  const std::string zero = kFixtures + "split_zero.txt";
  auto z = ReadSplitFile(zero);
  ASSERT_FALSE(z.ok());
  EXPECT_EQ(z.status().message(), zero + ":2: row index 0 is invalid: split files are 1-based");
  const std::string dup = kFixtures + "split_duplicate.txt";
  auto d = ReadSplitFile(dup);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().message(), dup + ":3: duplicate row index 2 (also on line 1)");
  const std::string two = kFixtures + "split_two_columns.txt";
  auto t = ReadSplitFile(two);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().message(), two + ":1: expected one row index per line, got '1 2'");
  auto e = ReadSplitFile(kCases + "C11_empty_file.txt");
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().message(), kCases + "C11_empty_file.txt: no row indices found");
}

// A number past int64 is named too large, not "not a positive integer";
// a byte-order mark is named as such.
TEST(SplitFileTest, TooLargeIndexAndByteOrderMarkAreNamed) {
  testing::ScopedTempDir dir;
  const std::string path = dir.File("val.txt");
  std::ofstream(path) << "3\n99999999999999999999\n";
  auto rows = ReadSplitFile(path);
  ASSERT_FALSE(rows.ok());
  EXPECT_EQ(rows.status().message(),
            path + ":2: row index '99999999999999999999' is too large: at most 9223372036854775807");
  std::ofstream(path) << "9223372036854775808\n";  // fits uint64, not int64
  EXPECT_EQ(ReadSplitFile(path).status().message(),
            path + ":1: row index '9223372036854775808' is too large: at most 9223372036854775807");
  std::ofstream(path) << "99999999999999999999x\n";
  EXPECT_EQ(ReadSplitFile(path).status().message(),
            path + ":1: invalid row index '99999999999999999999x': expected a positive integer");
  std::ofstream(path) << "-3\n";
  EXPECT_EQ(ReadSplitFile(path).status().message(),
            path + ":1: invalid row index '-3': expected a positive integer");
  std::ofstream(path) << "\xEF\xBB\xBF" "1\n2\n";
  EXPECT_EQ(ReadSplitFile(path).status().message(),
            path + ":1: the file starts with a UTF-8 byte-order mark (bytes EF BB BF), which a split file may not "
                   "hold: save it without one (UTF-8 without BOM)");
  std::ofstream(path) << "1\n\xEF\xBB\xBF" "2\n";
  EXPECT_EQ(ReadSplitFile(path).status().message(),
            path + ":2: the line starts with a UTF-8 byte-order mark (bytes EF BB BF), which a split file may not "
                   "hold: save it without one (UTF-8 without BOM)");
}

TEST(SplitFileTest, RowPastTheDataNamesTheSplitLine) {
  std::vector<int64_t> lines;
  auto rows = ReadSplitFile(kFixtures + "split_small.txt", &lines);
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  EXPECT_EQ(lines, (std::vector<int64_t>{2, 3, 1}));  // rows 1, 2, 3 are on lines 2, 3, 1
  const std::string data = kFixtures + "xmc_partition.txt";
  auto whole = ReadDataset(data, Xmc(0));
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  const std::vector<int64_t> past = {0, whole->features.rows + 4};
  const std::vector<int64_t> past_lines = {1, 7};
  ReadOptions o = Xmc(0);
  o.row_subset = &past;
  o.row_subset_file = "s.txt";
  o.row_subset_lines = &past_lines;
  EXPECT_EQ(ReadDataset(data, o).status().message(),
            "s.txt:7: row " + std::to_string(whole->features.rows + 5) + " is past the end of " + data +
                ", which has " + std::to_string(whole->features.rows) + " data rows (split files are 1-based)");
}

TEST(SplitFileTest, BibtexSplitsPartitionTheRows) {
  auto tr = ReadSplitFile(kBibtexTrain);
  auto ts = ReadSplitFile(kBibtexTest);
  ASSERT_TRUE(tr.ok()) << tr.status().ToString();
  ASSERT_TRUE(ts.ok()) << ts.status().ToString();
  EXPECT_EQ(tr->size(), 4880u);
  EXPECT_EQ(ts->size(), 2515u);
  std::vector<int64_t> all = *tr;
  all.insert(all.end(), ts->begin(), ts->end());
  std::sort(all.begin(), all.end());
  ASSERT_EQ(all.size(), 7395u);
  for (int64_t i = 0; i < 7395; ++i) ASSERT_EQ(all[i], i);
}

// ---------------------------------------------------------------- Bibtex

// nnz, label nnz computed independently with awk over the decompressed file:
//   zcat Bibtex_data.txt.gz | awk 'NR==FNR{tr[$1]=1;next} FNR>1 && ((FNR-1) in tr)
//     {for(i=1;i<=NF;i++) if($i ~ /:/) n++; m+=split($1,a,",")} END{print n, m}'
//     bibtex_trSplit.txt -
constexpr int64_t kBibtexTrainNnz = 334668;
constexpr int64_t kBibtexTrainLabelNnz = 11681;
constexpr int64_t kBibtexTestNnz = 173078;
constexpr int64_t kBibtexTestLabelNnz = 6081;

TEST(BibtexTest, TrainAndTestSplitsLoadWithExactCounts) {
  auto tr_rows = ReadSplitFile(kBibtexTrain);
  auto ts_rows = ReadSplitFile(kBibtexTest);
  ASSERT_TRUE(tr_rows.ok() && ts_rows.ok());
  ReadOptions o = Xmc(0);
  o.row_subset = &*tr_rows;
  const auto t0 = std::chrono::steady_clock::now();
  auto tr = ReadDataset(kBibtex, o);
  const double train_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(tr.ok()) << tr.status().ToString();
  RecordProperty("train_load_ms", static_cast<int>(train_s * 1000));
  std::printf("Bibtex train split load: %.1f ms\n", train_s * 1000);
  EXPECT_LT(train_s, 2.0);  // ~0.1 s in Release; generous for sanitizer builds
  EXPECT_EQ(tr->features.rows, 4880);
  EXPECT_EQ(tr->labels.rows, 4880);
  EXPECT_EQ(tr->features.cols, 1836);
  EXPECT_EQ(tr->labels.cols, 159);
  EXPECT_EQ(tr->features.nnz(), kBibtexTrainNnz);
  EXPECT_EQ(tr->labels.nnz(), kBibtexTrainLabelNnz);
  EXPECT_EQ(tr->unlabeled_rows, 0);
  // Data row 0 (file line 2) is "122,158 44:1 51:1 ...".
  EXPECT_EQ(tr->source_lines.front(), 2);
  EXPECT_EQ(RowCols(tr->labels, 0), (std::vector<uint32_t>{122, 158}));
  EXPECT_EQ(tr->features.col_idx[0], 44u);
  EXPECT_EQ(tr->features.values[0], 1.0f);

  o.row_subset = &*ts_rows;
  auto ts = ReadDataset(kBibtex, o);
  ASSERT_TRUE(ts.ok()) << ts.status().ToString();
  EXPECT_EQ(ts->features.rows, 2515);
  EXPECT_EQ(ts->features.cols, 1836);
  EXPECT_EQ(ts->labels.cols, 159);
  EXPECT_EQ(ts->features.nnz(), kBibtexTestNnz);
  EXPECT_EQ(ts->labels.nnz(), kBibtexTestLabelNnz);
}

TEST(BibtexTest, PartitionedTrainSplitSumsToAllRows) {
  auto tr_rows = ReadSplitFile(kBibtexTrain);
  ASSERT_TRUE(tr_rows.ok());
  ReadOptions o = Xmc(0);
  o.row_subset = &*tr_rows;
  o.num_partitions = 2;
  int64_t rows = 0, nnz = 0;
  std::vector<int64_t> lines;
  for (int p = 0; p < 2; ++p) {
    o.partition = p;
    auto ds = ReadDataset(kBibtex, o);
    ASSERT_TRUE(ds.ok()) << ds.status().ToString();
    EXPECT_EQ(ds->features.rows, 2440);  // blocks [0, 2440) and [2440, 4880)
    EXPECT_EQ(ds->features.cols, 1836);
    rows += ds->features.rows;
    nnz += ds->features.nnz();
    lines.insert(lines.end(), ds->source_lines.begin(), ds->source_lines.end());
  }
  EXPECT_EQ(rows, 4880);
  EXPECT_EQ(nnz, kBibtexTrainNnz);
  ASSERT_EQ(lines.size(), tr_rows->size());
  for (size_t i = 0; i < lines.size(); ++i) ASSERT_EQ(lines[i], (*tr_rows)[i] + 2);
}

}  // namespace
}  // namespace tether
