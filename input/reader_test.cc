// Tests for CsrMatrix and the XMC/LIBSVM readers. Run from the repository
// root (ctest sets it as the working directory): fixtures live in tests/data/,
// byte-exact copies of the hard cases in tests/data/cases/, and the bundled
// Bibtex data in data/bibtex/.
#include "input/reader.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <iostream>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include <glog/logging.h>
#include <gtest/gtest.h>

#include "input/csr.h"
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

ReadOptions Libsvm(int base) {
  ReadOptions o;
  o.format = DataFormat::kLibsvm;
  o.index_base = base;
  return o;
}

std::vector<uint32_t> RowCols(const CsrMatrix& m, int64_t r) {
  return {m.col_idx.begin() + m.row_ptr[r], m.col_idx.begin() + m.row_ptr[r + 1]};
}

std::vector<float> RowVals(const CsrMatrix& m, int64_t r) {
  return {m.values.begin() + m.row_ptr[r], m.values.begin() + m.row_ptr[r + 1]};
}

bool StartsWith(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

// ---------------------------------------------------------------- CsrMatrix

CsrMatrix ThreeRows() {
  CsrMatrix m;
  m.cols = 5;
  const uint32_t i0[] = {0, 3};
  const float v0[] = {1.0f, 2.0f};
  const uint32_t i2[] = {1, 2, 4};
  const float v2[] = {3.0f, 4.0f, 5.0f};
  m.AppendRow(i0, v0, 2);
  m.AppendRow(nullptr, nullptr, 0);
  m.AppendRow(i2, v2, 3);
  return m;
}

TEST(CsrMatrixTest, AppendRowBuildsOffsets) {
  const CsrMatrix m = ThreeRows();
  EXPECT_EQ(m.rows, 3);
  EXPECT_EQ(m.cols, 5);
  EXPECT_EQ(m.nnz(), 5);
  EXPECT_EQ(m.row_ptr, (std::vector<int64_t>{0, 2, 2, 5}));
  EXPECT_EQ(m.col_idx, (std::vector<uint32_t>{0, 3, 1, 2, 4}));
  EXPECT_EQ(m.values, (std::vector<float>{1, 2, 3, 4, 5}));
}

TEST(CsrMatrixTest, SliceRowsRebasesOffsets) {
  const CsrMatrix s = SliceRows(ThreeRows(), 1, 3);
  EXPECT_EQ(s.rows, 2);
  EXPECT_EQ(s.cols, 5);
  EXPECT_EQ(s.row_ptr, (std::vector<int64_t>{0, 0, 3}));
  EXPECT_EQ(s.col_idx, (std::vector<uint32_t>{1, 2, 4}));
  EXPECT_EQ(s.values, (std::vector<float>{3, 4, 5}));
  const CsrMatrix empty = SliceRows(ThreeRows(), 2, 2);
  EXPECT_EQ(empty.rows, 0);
  EXPECT_EQ(empty.row_ptr, (std::vector<int64_t>{0}));
}

TEST(CsrMatrixTest, GatherRowsKeepsGivenOrder) {
  const CsrMatrix g = GatherRows(ThreeRows(), {2, 0, 2});
  EXPECT_EQ(g.rows, 3);
  EXPECT_EQ(g.cols, 5);
  EXPECT_EQ(g.row_ptr, (std::vector<int64_t>{0, 3, 5, 8}));
  EXPECT_EQ(g.col_idx, (std::vector<uint32_t>{1, 2, 4, 0, 3, 1, 2, 4}));
  EXPECT_EQ(g.values, (std::vector<float>{3, 4, 5, 1, 2, 3, 4, 5}));
}

// ---------------------------------------------------------------- options

TEST(ReaderTest, IndexBaseIsRequired) {
  ReadOptions o;  // index_base left at -1
  auto ds = ReadDataset(kCases + "C05_empty_label_list.txt", o);
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(ds.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(ds.status().message().find("index_base must be 0 or 1, got -1 (unset)"), std::string::npos)
      << ds.status().message();
}

TEST(ReaderTest, BadPartitionIsRejected) {
  ReadOptions o = Xmc(0);
  o.partition = 2;
  o.num_partitions = 2;
  auto ds = ReadDataset(kCases + "C05_empty_label_list.txt", o);
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(ds.status().code(), Status::Code::kInvalidArgument);
}

TEST(ReaderTest, MissingFileIsNotFound) {
  auto ds = ReadDataset(kFixtures + "no_such_file.txt", Xmc(0));
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(ds.status().code(), Status::Code::kNotFound);
}

// ---------------------------------------------------------------- C01

// An XMC file read as LIBSVM: its header is no LIBSVM row. Refused at line
// 1, also when a row subset skips line 1 (which would have shifted every
// selected row by one and scored the wrong rows without an error).
TEST(ReaderTest, XmcHeaderReadAsLibsvmIsRefusedEvenWithARowSubset) {
  tether::testing::ScopedTempDir tmp;
  const std::string path = tmp.path() + "/xmc.txt";
  std::ofstream(path) << "2 4 3\n0,2 0:1 3:0.5\n1 2:1\n";
  for (const bool subset : {false, true}) {
    ReadOptions o = Libsvm(0);
    o.num_labels = 3;
    o.num_features = 4;
    const std::vector<int64_t> rows = {1};
    if (subset) o.row_subset = &rows;
    auto ds = ReadDataset(path, o);
    ASSERT_FALSE(ds.ok()) << "subset " << subset;
    EXPECT_EQ(ds.status().message(), path + ":1: line 1 '2 4 3' looks like an XMC header (examples, features, "
                                            "labels), not a LIBSVM row: read the file as XMC (format XMC, "
                                            "--format=xmc)");
  }
}

TEST(ReaderTest, C01HeaderCountMismatchNamesLine1AndBothCounts) {
  const std::string path = kCases + "C01_xmc_header_count_mismatch.txt";
  auto ds = ReadDataset(path, Xmc(0));
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(ds.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(ds.status().message(),
            path + ":1: header declares 4 examples but the file has 3 data rows (declared 4, found 3)");
}

TEST(ReaderTest, C01HeaderCountMismatchCanBeAWarning) {
  ReadOptions o = Xmc(0);
  o.header_mismatch_is_error = false;
  auto ds = ReadDataset(kCases + "C01_xmc_header_count_mismatch.txt", o);
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  EXPECT_EQ(ds->features.rows, 3);
  EXPECT_EQ(ds->features.cols, 10);
  EXPECT_EQ(ds->labels.cols, 5);
  EXPECT_EQ(RowCols(ds->labels, 2), (std::vector<uint32_t>{3, 4}));
  EXPECT_EQ(RowCols(ds->features, 1), (std::vector<uint32_t>{0, 9}));
}

TEST(ReaderTest, C01WidthComesFromTheHeader) {
  auto ds = ReadDataset(kCases + "C01_xmc_header_test_split.txt", Xmc(0));
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  EXPECT_EQ(ds->features.rows, 2);
  EXPECT_EQ(ds->features.cols, 10);  // largest index is 6: the header wins
  EXPECT_EQ(ds->labels.cols, 5);
  EXPECT_EQ(RowCols(ds->features, 1), (std::vector<uint32_t>{4, 6}));
  EXPECT_EQ(RowVals(ds->features, 1), (std::vector<float>{0.2f, 0.9f}));
  EXPECT_EQ(RowCols(ds->labels, 0), (std::vector<uint32_t>{1}));
  EXPECT_EQ(RowCols(ds->labels, 1), (std::vector<uint32_t>{0, 3}));
}

TEST(ReaderTest, C01NumFeaturesMustAgreeWithHeader) {
  ReadOptions o = Xmc(0);
  o.num_features = 12;
  const std::string path = kCases + "C01_xmc_header_test_split.txt";
  auto ds = ReadDataset(path, o);
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(ds.status().message(), path + ":1: header declares 10 features but num_features is 12");
}

TEST(ReaderTest, XmcMissingHeaderIsNamed) {
  const std::string path = kFixtures + "xmc_missing_header.txt";
  auto ds = ReadDataset(path, Xmc(0));
  ASSERT_FALSE(ds.ok());
  EXPECT_TRUE(StartsWith(ds.status().message(), path + ":1: malformed XMC header '0,1 1:0.5 2:1'"))
      << ds.status().message();
  EXPECT_NE(ds.status().message().find("looks like a data row"), std::string::npos);
}

TEST(ReaderTest, XmcOutOfRangeIndicesNameTheToken) {
  const std::string lpath = kFixtures + "xmc_label_out_of_range.txt";
  auto l = ReadDataset(lpath, Xmc(0));
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.status().message(),
            lpath + ":2: label id 3 is out of range (label list '0,3'): 3 labels, valid ids 0..2");
  const std::string fpath = kFixtures + "xmc_feature_out_of_range.txt";
  auto f = ReadDataset(fpath, Xmc(0));
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().message(), fpath + ":2: feature index 4 is out of range (token '4:0.5'): "
                                          "4 features, valid indices 0..3 with 0-based indexing");
  // Under base 1 index 4 would fit, but label 0 does not: the base applies to both.
  auto f1 = ReadDataset(fpath, Xmc(1));
  ASSERT_FALSE(f1.ok());
  EXPECT_EQ(f1.status().message(),
            fpath + ":2: label id 0 is invalid with 1-based indexing (label list '0')");
}

TEST(ReaderTest, XmcZeroDimensionsInHeaderAreEnforced) {
  const std::string path = kFixtures + "xmc_zero_dims.txt";
  auto ds = ReadDataset(path, Xmc(0));
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(ds.status().message(),
            path + ":1: the XMC header '2 0 0' declares 0 features, but the file has rows: the header is "
                   "'num_examples num_features num_labels'; write the feature count there (or, for 64-bit feature "
                   "ids, read it with data.hashed_features: true, tether-data --hashed_features)");
}

TEST(ReaderTest, XmcLeadingSpaceMeansNoLabels) {
  const std::string path = kFixtures + "xmc_space_then_label.txt";
  auto ds = ReadDataset(path, Xmc(0));
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(ds.status().message(),
            path + ":2: expected a feature 'index:value', got '5' "
                   "(a line that starts with whitespace has an empty label list)");
}

// ---------------------------------------------------------------- C02

TEST(ReaderTest, C02ZeroBasedFileWithoutIndexZeroIsNotShifted) {
  auto ds = ReadDataset(kCases + "C02_zero_based_no_zero_index.txt", Xmc(0));
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  EXPECT_EQ(ds->features.rows, 3);
  EXPECT_EQ(ds->features.cols, 4);
  EXPECT_EQ(ds->labels.cols, 3);
  EXPECT_EQ(RowCols(ds->features, 0), (std::vector<uint32_t>{1, 2}));
  EXPECT_EQ(RowVals(ds->features, 0), (std::vector<float>{1.0f, 0.5f}));
  EXPECT_EQ(RowCols(ds->features, 1), (std::vector<uint32_t>{3}));
  EXPECT_EQ(RowCols(ds->features, 2), (std::vector<uint32_t>{1, 3}));
  EXPECT_EQ(RowVals(ds->features, 2), (std::vector<float>{0.75f, 1.0f}));
  EXPECT_EQ(ds->labels.col_idx, (std::vector<uint32_t>{0, 1, 2}));
}

TEST(ReaderTest, C02IndexZeroUnderOneBasedIsAnError) {
  const std::string path = kCases + "C02_one_based_with_zero.txt";
  auto ds = ReadDataset(path, Libsvm(1));
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(ds.status().code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(StartsWith(ds.status().message(),
                         path + ":1: feature index 0 is invalid with 1-based indexing"))
      << ds.status().message();
  EXPECT_NE(ds.status().message().find("'0:0.5'"), std::string::npos);
}

TEST(ReaderTest, C02SameFileUnderZeroBased) {
  auto ds = ReadDataset(kCases + "C02_one_based_with_zero.txt", Libsvm(0));
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  EXPECT_EQ(ds->targets, (std::vector<float>{1.0f, -1.0f}));
  EXPECT_EQ(ds->features.cols, 5);  // inferred: max index 4, base 0
  EXPECT_EQ(RowCols(ds->features, 0), (std::vector<uint32_t>{0, 4}));
}

// ---------------------------------------------------------------- C04

TEST(ReaderTest, C04DuplicateIndexIsAnErrorByDefault) {
  const std::string path = kCases + "C04_unsorted_duplicate_indices.txt";
  auto ds = ReadDataset(path, Libsvm(1));
  ASSERT_FALSE(ds.ok());
  EXPECT_TRUE(StartsWith(ds.status().message(), path + ":2: duplicate feature index 3"))
      << ds.status().message();
}

TEST(ReaderTest, C04UnsortedRowIsSortedAndDuplicatesSummed) {
  ReadOptions o = Libsvm(1);
  o.duplicates = DuplicatePolicy::kSum;
  auto ds = ReadDataset(kCases + "C04_unsorted_duplicate_indices.txt", o);
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  ASSERT_EQ(ds->features.rows, 3);
  EXPECT_EQ(ds->features.cols, 7);
  // Line 1 "7:0.5 2:1.0 4:0.25" == sorted "2:1.0 4:0.25 7:0.5".
  EXPECT_EQ(RowCols(ds->features, 0), (std::vector<uint32_t>{1, 3, 6}));
  EXPECT_EQ(RowVals(ds->features, 0), (std::vector<float>{1.0f, 0.25f, 0.5f}));
  EXPECT_EQ(RowCols(ds->features, 1), (std::vector<uint32_t>{2, 4}));
  EXPECT_EQ(RowVals(ds->features, 1), (std::vector<float>{3.0f, 0.5f}));
  EXPECT_EQ(ds->targets, (std::vector<float>{1.0f, -1.0f, 1.0f}));
}

TEST(ReaderTest, C04DuplicatesKeepLast) {
  ReadOptions o = Libsvm(1);
  o.duplicates = DuplicatePolicy::kKeepLast;
  auto ds = ReadDataset(kCases + "C04_unsorted_duplicate_indices.txt", o);
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  EXPECT_EQ(RowCols(ds->features, 1), (std::vector<uint32_t>{2, 4}));
  EXPECT_EQ(RowVals(ds->features, 1), (std::vector<float>{2.0f, 0.5f}));
  EXPECT_EQ(RowVals(ds->features, 0), (std::vector<float>{1.0f, 0.25f, 0.5f}));
}

// ---------------------------------------------------------------- C05

TEST(ReaderTest, C05EmptyLabelListsKeptAsAllNegative) {
  auto ds = ReadDataset(kCases + "C05_empty_label_list.txt", Xmc(0));
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  EXPECT_EQ(ds->rows_read, 4);
  EXPECT_EQ(ds->unlabeled_rows, 2);
  EXPECT_EQ(ds->dropped_rows, 0);
  ASSERT_EQ(ds->features.rows, 4);
  ASSERT_EQ(ds->labels.rows, 4);
  EXPECT_EQ(ds->features.cols, 8);
  EXPECT_EQ(ds->labels.cols, 5);
  EXPECT_EQ(ds->labels.row_ptr, (std::vector<int64_t>{0, 2, 2, 2, 3}));
  EXPECT_EQ(ds->labels.col_idx, (std::vector<uint32_t>{0, 3, 2}));
  EXPECT_EQ(ds->labels.values, (std::vector<float>{1.0f, 1.0f, 1.0f}));
  EXPECT_EQ(RowCols(ds->features, 1), (std::vector<uint32_t>{2, 7}));
  EXPECT_EQ(RowVals(ds->features, 1), (std::vector<float>{0.25f, 0.5f}));
  // "1:0.75" is a feature, not label "1".
  EXPECT_EQ(RowCols(ds->features, 2), (std::vector<uint32_t>{1, 6}));
  EXPECT_EQ(RowVals(ds->features, 2), (std::vector<float>{0.75f, 0.1f}));
  EXPECT_EQ(ds->source_lines, (std::vector<int64_t>{2, 3, 4, 5}));
  EXPECT_TRUE(ds->targets.empty());
}

TEST(ReaderTest, C05EmptyLabelListsSkippedButCounted) {
  ReadOptions o = Xmc(0);
  o.skip_unlabeled = true;
  auto ds = ReadDataset(kCases + "C05_empty_label_list.txt", o);
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  EXPECT_EQ(ds->rows_read, 4);
  EXPECT_EQ(ds->unlabeled_rows, 2);
  EXPECT_EQ(ds->features.rows, 2);
  EXPECT_EQ(ds->source_lines, (std::vector<int64_t>{2, 5}));
  EXPECT_EQ(RowCols(ds->labels, 1), (std::vector<uint32_t>{2}));
  EXPECT_EQ(RowCols(ds->features, 1), (std::vector<uint32_t>{0}));
}

// ---------------------------------------------------------------- C06

TEST(ReaderTest, C06CrlfAndStrayWhitespaceMatchCleanTwin) {
  auto dirty = ReadDataset(kCases + "C06_crlf_trailing_ws.txt", Libsvm(1));
  auto clean = ReadDataset(kCases + "C06_crlf_trailing_ws_clean_twin.txt", Libsvm(1));
  ASSERT_TRUE(dirty.ok()) << dirty.status().ToString();
  ASSERT_TRUE(clean.ok()) << clean.status().ToString();
  for (const Dataset* ds : {&*dirty, &*clean}) {
    EXPECT_EQ(ds->features.rows, 3);
    EXPECT_EQ(ds->targets, (std::vector<float>{1.0f, -1.0f, 1.0f}));
    EXPECT_EQ(ds->features.values, (std::vector<float>{0.5f, 1.0f, 0.25f, 1.0f}));
    EXPECT_EQ(ds->features.col_idx, (std::vector<uint32_t>{0, 2, 1, 3}));
    EXPECT_EQ(ds->features.row_ptr, (std::vector<int64_t>{0, 2, 3, 4}));
    EXPECT_EQ(ds->features.cols, 4);
    EXPECT_EQ(ds->labels.rows, 3);  // single-label LIBSVM: rows × 0 labels
    EXPECT_EQ(ds->labels.cols, 0);
    EXPECT_EQ(ds->labels.nnz(), 0);
  }
  EXPECT_EQ(dirty->source_lines, clean->source_lines);
}

// ---------------------------------------------------------------- C08

TEST(ReaderTest, C08NonFiniteValuesListedInOneError) {
  const std::string path = kCases + "C08_nan_inf_values.txt";
  auto ds = ReadDataset(path, Libsvm(1));
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(ds.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(ds.status().message(),
            path + ":1: non-finite value: '2:nan' is NaN; 4 lines have non-finite or overflowing "
                   "values (line 1 '2:nan' is NaN, line 2 '1:inf' is infinite, line 3 "
                   "'2:-Infinity' is infinite, line 4 '1:1e999' overflows double (not read as "
                   "inf)); to drop such rows instead, set data.non_finite: NON_FINITE_DROP_ROW (tether-data: "
                   "--non_finite=drop_row)");
}

TEST(ReaderTest, C08DropRowKeepsOnlyTheFiniteRow) {
  ReadOptions o = Libsvm(1);
  o.non_finite = NonFinitePolicy::kDropRow;
  o.num_features = 4;
  auto ds = ReadDataset(kCases + "C08_nan_inf_values.txt", o);
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  EXPECT_EQ(ds->rows_read, 5);
  EXPECT_EQ(ds->dropped_rows, 4);
  EXPECT_EQ(ds->features.rows, 1);
  EXPECT_EQ(ds->source_lines, (std::vector<int64_t>{5}));
  EXPECT_EQ(ds->targets, (std::vector<float>{1.0f}));
  EXPECT_EQ(ds->features.col_idx, (std::vector<uint32_t>{0}));
  EXPECT_EQ(ds->features.values, (std::vector<float>{0.25f}));
}

TEST(ReaderTest, FloatOverflowIsNotReadAsInf) {
  const std::string path = kFixtures + "libsvm_float_overflow.txt";
  auto ds = ReadDataset(path, Libsvm(1));
  ASSERT_FALSE(ds.ok());
  EXPECT_TRUE(StartsWith(ds.status().message(),
                         path + ":1: non-finite value: '1:1e39' overflows float"))
      << ds.status().message();
}

TEST(ReaderTest, OverflowAndUnderflowAreToldApart) {
  const std::string path = kFixtures + "libsvm_extreme_values.txt";
  auto err = ReadDataset(path, Libsvm(1));
  ASSERT_FALSE(err.ok());
  EXPECT_EQ(err.status().message(),
            path + ":2: non-finite value: '1:1e400' overflows double (not read as inf); 3 lines "
                   "have non-finite or overflowing values (line 2 '1:1e400' overflows double (not "
                   "read as inf), line 3 '1:-123.5e306' overflows float (not read as inf), line 4 "
                   "'1:0.00001e315' overflows double (not read as inf)); to drop such rows instead, set "
                   "data.non_finite: NON_FINITE_DROP_ROW (tether-data: --non_finite=drop_row)");
  ReadOptions o = Libsvm(1);
  o.non_finite = NonFinitePolicy::kDropRow;
  auto ds = ReadDataset(path, o);
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  EXPECT_EQ(ds->dropped_rows, 3);
  EXPECT_EQ(ds->source_lines, (std::vector<int64_t>{1, 5}));
  // Values below the double range are zeros (a float could not hold them anyway).
  EXPECT_EQ(RowVals(ds->features, 0), (std::vector<float>{0.0f, 0.0f, 0.0f, 0.0f}));
  EXPECT_EQ(RowVals(ds->features, 1), (std::vector<float>{1e38f, -3.4e38f}));
}

TEST(ReaderTest, DropRowWithNothingLeftIsAnError) {
  ReadOptions o = Libsvm(1);
  o.non_finite = NonFinitePolicy::kDropRow;
  const std::string path = kFixtures + "libsvm_all_nonfinite.txt";
  auto ds = ReadDataset(path, o);
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(ds.status().message(), path + ": no examples found after filtering: 2 rows read, "
                                          "2 dropped as non-finite, 0 skipped as unlabeled");
  // With one finite row left it loads.
  auto one = ReadDataset(kFixtures + "libsvm_float_overflow.txt", o);
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_EQ(one->features.rows, 1);
  EXPECT_EQ(one->dropped_rows, 1);
  EXPECT_EQ(one->source_lines, (std::vector<int64_t>{2}));
}

// ---------------------------------------------------------------- LIBSVM extras

TEST(ReaderTest, LibsvmCommentsAndUnderflow) {
  auto ds = ReadDataset(kFixtures + "libsvm_comments.txt", Libsvm(1));
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  EXPECT_EQ(ds->features.rows, 2);
  EXPECT_EQ(ds->source_lines, (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(ds->targets, (std::vector<float>{1.0f, -1.0f}));
  EXPECT_EQ(RowCols(ds->features, 1), (std::vector<uint32_t>{1, 2}));
  EXPECT_EQ(RowVals(ds->features, 1), (std::vector<float>{0.0f, 2.5f}));
}

TEST(ReaderTest, LibsvmMultilabel) {
  auto ds = ReadDataset(kFixtures + "libsvm_multilabel.txt", Libsvm(1));
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  EXPECT_EQ(ds->features.rows, 4);
  EXPECT_TRUE(ds->targets.empty());
  EXPECT_EQ(ds->labels.cols, 4);  // max label id 3, used as written
  EXPECT_EQ(ds->labels.row_ptr, (std::vector<int64_t>{0, 2, 3, 3, 6}));
  EXPECT_EQ(ds->labels.col_idx, (std::vector<uint32_t>{1, 3, 2, 0, 1, 2}));
  EXPECT_EQ(ds->unlabeled_rows, 1);
  EXPECT_EQ(ds->features.cols, 4);
  EXPECT_EQ(RowCols(ds->features, 2), (std::vector<uint32_t>{3}));
}

TEST(ReaderTest, LibsvmNumLabelsSelectsMultilabel) {
  ReadOptions o = Libsvm(1);
  o.num_labels = 2;
  const std::string path = kFixtures + "libsvm_two_rows.txt";
  auto ds = ReadDataset(path, o);
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(ds.status().message(),
            path + ":1: invalid label id '+1' in label list '+1': expected a non-negative integer "
                   "(the file is read as multilabel LIBSVM because num_labels is set); 2 lines are malformed, "
                   "also line 2: invalid label id '-1' in label list '-1': expected a non-negative integer "
                   "(the file is read as multilabel LIBSVM because num_labels is set)");
  o.num_labels = 0;
  auto single = ReadDataset(path, o);
  ASSERT_TRUE(single.ok()) << single.status().ToString();
  EXPECT_EQ(single->targets, (std::vector<float>{1.0f, -1.0f}));
  EXPECT_EQ(single->labels.cols, 0);
}

TEST(ReaderTest, LibsvmShareNeedsNumFeatures) {
  ReadOptions o = Libsvm(1);
  o.num_partitions = 2;
  auto ds = ReadDataset(kCases + "C10_no_trailing_newline.txt", o);
  ASSERT_FALSE(ds.ok());
  EXPECT_NE(ds.status().message().find("num_features must be set"), std::string::npos);
}

// ---------------------------------------------------------------- C10

// Reads `path` as n byte-range partitions and returns the source lines of all
// shares, in partition order; the per-share row counts go to *counts.
std::vector<int64_t> ReadAllShares(const std::string& path, ReadOptions o, int n,
                                   std::vector<int64_t>* counts) {
  std::vector<int64_t> lines;
  o.num_partitions = n;
  for (int p = 0; p < n; ++p) {
    o.partition = p;
    auto ds = ReadDataset(path, o);
    EXPECT_TRUE(ds.ok()) << "n=" << n << " p=" << p << ": " << ds.status().ToString();
    if (!ds.ok()) continue;
    EXPECT_EQ(ds->features.rows, static_cast<int64_t>(ds->source_lines.size()));
    lines.insert(lines.end(), ds->source_lines.begin(), ds->source_lines.end());
    if (counts != nullptr) counts->push_back(ds->features.rows);
  }
  return lines;
}

TEST(ReaderTest, C10LastRowWithoutNewlineIsRead) {
  ReadOptions o = Libsvm(1);
  auto ds = ReadDataset(kCases + "C10_no_trailing_newline.txt", o);
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  EXPECT_EQ(ds->features.rows, 5);
  EXPECT_EQ(ds->targets, (std::vector<float>{1, -1, 1, -1, 1}));
  EXPECT_EQ(RowCols(ds->features, 4), (std::vector<uint32_t>{4}));
  EXPECT_EQ(RowVals(ds->features, 4), (std::vector<float>{0.5f}));
}

TEST(ReaderTest, C10ByteRangeSharesCoverEveryRowOnce) {
  ReadOptions o = Libsvm(1);
  o.num_features = 5;
  const std::string path = kCases + "C10_no_trailing_newline.txt";
  for (int n : {1, 2, 3}) {
    std::vector<int64_t> counts;
    const std::vector<int64_t> lines = ReadAllShares(path, o, n, &counts);
    EXPECT_EQ(lines, (std::vector<int64_t>{1, 2, 3, 4, 5})) << "n=" << n;
    EXPECT_EQ(counts.size(), static_cast<size_t>(n));
  }
  // 2 shares: the file is 44 bytes, the cut at byte 22 falls inside line 3
  // ("+1 3:0.3" starts at byte 18), so line 3 belongs to share 0.
  std::vector<int64_t> counts;
  ReadAllShares(path, o, 2, &counts);
  EXPECT_EQ(counts, (std::vector<int64_t>{3, 2}));
  // The last share, which holds row 5, has its exact values.
  o.num_partitions = 3;
  o.partition = 2;
  auto last = ReadDataset(path, o);
  ASSERT_TRUE(last.ok()) << last.status().ToString();
  EXPECT_EQ(last->source_lines.back(), 5);
  EXPECT_EQ(last->targets.back(), 1.0f);
  EXPECT_EQ(last->features.col_idx.back(), 4u);
  EXPECT_EQ(last->features.values.back(), 0.5f);
}

TEST(ReaderTest, ByteRangeSharesForAnyPartitionCount) {
  // XMC with a header, a CRLF line and a blank line (a row with neither
  // labels nor features); up to more shares than bytes.
  const std::string path = kFixtures + "xmc_partition.txt";
  for (int n = 1; n <= 100; ++n) {
    const std::vector<int64_t> lines = ReadAllShares(path, Xmc(0), n, nullptr);
    EXPECT_EQ(lines, (std::vector<int64_t>{2, 3, 4, 5, 6, 7, 8})) << "n=" << n;
  }
}

TEST(ReaderTest, RowSubsetIsSplitIntoContiguousBlocks) {
  const std::string path = kFixtures + "xmc_partition.txt";
  const std::vector<int64_t> subset = {0, 3, 6};  // lines 2, 5 and 8
  ReadOptions o = Xmc(0);
  o.row_subset = &subset;
  o.num_partitions = 2;
  o.partition = 0;
  auto p0 = ReadDataset(path, o);
  o.partition = 1;
  auto p1 = ReadDataset(path, o);
  ASSERT_TRUE(p0.ok()) << p0.status().ToString();
  ASSERT_TRUE(p1.ok()) << p1.status().ToString();
  EXPECT_EQ(p0->source_lines, (std::vector<int64_t>{2}));
  EXPECT_EQ(p1->source_lines, (std::vector<int64_t>{5, 8}));
  EXPECT_EQ(p1->unlabeled_rows, 1);
  EXPECT_EQ(RowCols(p1->features, 0), (std::vector<uint32_t>{2, 3}));
  EXPECT_EQ(RowVals(p1->features, 1), (std::vector<float>{3.0f}));
  EXPECT_EQ(p1->features.cols, 5);
  EXPECT_EQ(p1->labels.cols, 4);
}

// Real XMC files hold rows with neither labels nor features, written as
// blank lines: each is a row (the header counts it), kept as an all-negative
// row or skipped like any unlabeled row; blank lines after the declared rows
// are not rows. LIBSVM has no such row (a blank line there is none).
TEST(ReaderTest, BlankXmcLinesAreRowsWithNeitherLabelsNorFeatures) {
  testing::ScopedTempDir dir;
  const std::string path = dir.File("blank_rows.txt");
  std::ofstream(path) << "4 3 2\n0 1:1\n\n  \n1 2:0.5\n\n\n";
  auto ds = ReadDataset(path, Xmc(0));
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  EXPECT_EQ(ds->features.rows, 4);
  EXPECT_EQ(ds->source_lines, (std::vector<int64_t>{2, 3, 4, 5}));
  EXPECT_EQ(ds->unlabeled_rows, 2);
  EXPECT_EQ(RowCols(ds->features, 1), std::vector<uint32_t>{});
  EXPECT_EQ(RowCols(ds->features, 2), std::vector<uint32_t>{});
  // Declared 5: the blank lines at the end are still short of it.
  std::ofstream(path) << "5 3 2\n0 1:1\n\n1 2:0.5\n";
  ds = ReadDataset(path, Xmc(0));
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(ds.status().message(),
            path + ":1: header declares 5 examples but the file has 3 data rows (declared 5, found 3)");
}

TEST(ReaderTest, RowSubsetPastTheEndIsAnError) {
  const std::vector<int64_t> subset = {0, 7};
  ReadOptions o = Xmc(0);
  o.row_subset = &subset;
  const std::string path = kFixtures + "xmc_partition.txt";
  auto ds = ReadDataset(path, o);
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(ds.status().message(),
            path + ": row_subset entry 7 (0-based) is past the last of the file's 7 data rows");
  const std::vector<int64_t> unsorted = {2, 1};
  o.row_subset = &unsorted;
  EXPECT_FALSE(ReadDataset(path, o).ok());
}

// ---------------------------------------------------------------- C11

TEST(ReaderTest, C11EmptyFileIsAnError) {
  const std::string path = kCases + "C11_empty_file.txt";
  for (const ReadOptions& o : {Libsvm(1), Xmc(0)}) {
    auto ds = ReadDataset(path, o);
    ASSERT_FALSE(ds.ok());
    EXPECT_EQ(ds.status().code(), Status::Code::kInvalidArgument);
    EXPECT_TRUE(StartsWith(ds.status().message(), path + ": no examples found"))
        << ds.status().message();
  }
}

void ExpectSameRows(const Dataset& a, const Dataset& b) {
  EXPECT_EQ(a.features.rows, b.features.rows);
  EXPECT_EQ(a.features.cols, b.features.cols);
  EXPECT_EQ(a.features.row_ptr, b.features.row_ptr);
  EXPECT_EQ(a.features.col_idx, b.features.col_idx);
  EXPECT_EQ(a.features.values, b.features.values);
  EXPECT_EQ(a.targets, b.targets);
  EXPECT_EQ(a.source_lines, b.source_lines);
}

TEST(ReaderTest, C11GzipMatchesPlainTwin) {
  auto gz = ReadDataset(kCases + "C11_gzip_input.txt.gz", Libsvm(1));
  auto plain = ReadDataset(kCases + "C11_gzip_input_plain_twin.txt", Libsvm(1));
  ASSERT_TRUE(gz.ok()) << gz.status().ToString();
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ(gz->features.rows, 3);
  EXPECT_EQ(gz->targets, (std::vector<float>{1, -1, 1}));
  EXPECT_EQ(gz->features.values, (std::vector<float>{0.5f, 1.0f, 0.25f, 1.0f}));
  ExpectSameRows(*gz, *plain);
}

TEST(ReaderTest, GzipDetectedByMagicNotName) {
  auto plain = ReadDataset(kCases + "C11_gzip_input_plain_twin.txt", Libsvm(1));
  auto gz_named_txt = ReadDataset(kFixtures + "gzip_named_txt.txt", Libsvm(1));
  auto txt_named_gz = ReadDataset(kFixtures + "plain_named.gz", Libsvm(1));
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  ASSERT_TRUE(gz_named_txt.ok()) << gz_named_txt.status().ToString();
  ASSERT_TRUE(txt_named_gz.ok()) << txt_named_gz.status().ToString();
  ExpectSameRows(*gz_named_txt, *plain);
  ExpectSameRows(*txt_named_gz, *plain);
}

TEST(ReaderTest, TruncatedGzipIsDataLoss) {
  auto ds = ReadDataset(kFixtures + "truncated.gz", Libsvm(1));
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(ds.status().code(), Status::Code::kDataLoss) << ds.status().ToString();
}

TEST(ReaderTest, BinaryGarbageIsNeverParsed) {
  const std::string path = kFixtures + "binary_garbage.txt";
  auto ds = ReadDataset(path, Libsvm(1));
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(ds.status().message(),
            path + ":2: binary data (NUL byte at offset 9): not a text data file");
}

// ---------------------------------------------------------------- split files

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

TEST(BibtexTest, ByteRangeSharesOfTheWholeFile) {
  for (int n : {1, 3, 4}) {
    std::vector<int64_t> counts;
    const std::vector<int64_t> lines = ReadAllShares(kBibtex, Xmc(0), n, &counts);
    ASSERT_EQ(lines.size(), 7395u) << "n=" << n;
    for (size_t i = 0; i < lines.size(); ++i) ASSERT_EQ(lines[i], static_cast<int64_t>(i) + 2);
  }
}

// ---------------------------------------------------------------- logs

// Collects the glog lines written while it is alive (C02: the index base in
// force is logged; C05: rows without labels are counted in the log; C10: the
// per-share row counts are logged).
class LogCapture : public google::LogSink {
 public:
  LogCapture() { google::AddLogSink(this); }
  ~LogCapture() override { google::RemoveLogSink(this); }
  void send(google::LogSeverity, const char*, const char*, int, const struct ::tm*,
            const char* message, size_t message_len) override {
    std::lock_guard<std::mutex> lock(mu_);
    lines_.emplace_back(message, message_len);
  }
  // Lines that contain every one of `parts`.
  std::vector<std::string> Matching(const std::vector<std::string>& parts) {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::string> out;
    for (const auto& l : lines_) {
      bool all = true;
      for (const auto& p : parts) all = all && l.find(p) != std::string::npos;
      if (all) out.push_back(l);
    }
    return out;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> lines_;
};

std::string FileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(ReaderTest, C02IndexBaseInForceIsLogged) {
  LogCapture log;
  const std::string path = kCases + "C02_zero_based_no_zero_index.txt";
  auto ds = ReadDataset(path, Xmc(0));
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  EXPECT_EQ(log.Matching({path + ": XMC, index_base 0,"}).size(), 1u);
  auto one = ReadDataset(kCases + "C06_crlf_trailing_ws.txt", Libsvm(1));
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_EQ(log.Matching({"C06_crlf_trailing_ws.txt: LIBSVM, index_base 1,"}).size(), 1u);
}

TEST(ReaderTest, C05UnlabeledRowsAreCountedInTheLog) {
  LogCapture log;
  const std::string path = kCases + "C05_empty_label_list.txt";
  ASSERT_TRUE(ReadDataset(path, Xmc(0)).ok());
  EXPECT_EQ(log.Matching({path, "read 4 of 4 rows, kept 4, unlabeled 2 (kept as all-negative)"}).size(), 1u);
  ReadOptions o = Xmc(0);
  o.skip_unlabeled = true;
  ASSERT_TRUE(ReadDataset(path, o).ok());
  EXPECT_EQ(log.Matching({path, "read 4 of 4 rows, kept 2, unlabeled 2 (skipped)"}).size(), 1u);
}

TEST(ReaderTest, C10PerShareCountsAreLoggedAndSumToFive) {
  const std::string path = kCases + "C10_no_trailing_newline.txt";
  ReadOptions o = Libsvm(1);
  o.num_features = 5;
  for (int n : {1, 2, 3}) {
    LogCapture log;
    std::vector<int64_t> counts;
    ReadAllShares(path, o, n, &counts);
    int64_t logged = 0;
    for (int p = 0; p < n; ++p) {
      const std::string share = "partition " + std::to_string(p) + "/" + std::to_string(n) + ": read " +
                                std::to_string(counts[p]) + " of 5 rows";
      EXPECT_EQ(log.Matching({path, share}).size(), 1u) << share;
      logged += counts[p];
    }
    EXPECT_EQ(logged, 5) << "n=" << n;
  }
}

// ---------------------------------------------------------------- in memory

// ParseDataset is what ReadDataset runs after reading the file: identical
// results and identical messages for every case file, plain or gzip.
TEST(ReaderTest, ParseDatasetAgreesWithReadDatasetOnEveryCase) {
  const std::vector<std::pair<std::string, ReadOptions>> files = {
      {"C01_xmc_header_count_mismatch.txt", Xmc(0)}, {"C01_xmc_header_test_split.txt", Xmc(0)},
      {"C02_zero_based_no_zero_index.txt", Xmc(0)},  {"C02_one_based_with_zero.txt", Libsvm(1)},
      {"C04_unsorted_duplicate_indices.txt", Libsvm(1)}, {"C05_empty_label_list.txt", Xmc(0)},
      {"C06_crlf_trailing_ws.txt", Libsvm(1)},       {"C08_nan_inf_values.txt", Libsvm(1)},
      {"C10_no_trailing_newline.txt", Libsvm(1)},    {"C11_empty_file.txt", Libsvm(1)},
      {"C11_gzip_input.txt.gz", Libsvm(1)},
  };
  for (const auto& [name, o] : files) {
    const std::string path = kCases + name;
    auto from_file = ReadDataset(path, o);
    auto from_bytes = ParseDataset(FileBytes(path), path, o);
    ASSERT_EQ(from_file.ok(), from_bytes.ok()) << name;
    if (!from_file.ok()) {
      EXPECT_EQ(from_file.status().ToString(), from_bytes.status().ToString()) << name;
      continue;
    }
    ExpectSameRows(*from_file, *from_bytes);
    EXPECT_EQ(from_file->labels.col_idx, from_bytes->labels.col_idx) << name;
  }
}

TEST(ReaderTest, ConcatenatedGzipMembersAreReadInTurn) {
  const std::string gz = FileBytes(kCases + "C11_gzip_input.txt.gz");
  auto twice = ParseDataset(gz + gz, "twice.gz", Libsvm(1));
  ASSERT_TRUE(twice.ok()) << twice.status().ToString();
  EXPECT_EQ(twice->features.rows, 6);
  EXPECT_EQ(twice->targets, (std::vector<float>{1, -1, 1, 1, -1, 1}));
  EXPECT_EQ(twice->source_lines, (std::vector<int64_t>{1, 2, 3, 4, 5, 6}));
}

TEST(ReaderTest, BytesAfterTheGzipStreamAreDataLoss) {
  const std::string gz = FileBytes(kCases + "C11_gzip_input.txt.gz");
  auto ds = ParseDataset(gz + "+1 1:0.5\n", "tail.gz", Libsvm(1));
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(ds.status().code(), Status::Code::kDataLoss);
  EXPECT_EQ(ds.status().message(), "tail.gz: 9 bytes of non-gzip data after the end of the gzip stream");
  auto cut = ParseDataset(gz.substr(0, gz.size() - 5), "cut.gz", Libsvm(1));
  ASSERT_FALSE(cut.ok());
  EXPECT_EQ(cut.status().code(), Status::Code::kDataLoss);
  EXPECT_EQ(cut.status().message(), "cut.gz: truncated gzip stream (it ends after " +
                                        std::to_string(gz.size() - 5) + " bytes)");
  auto magic_only = ParseDataset(std::string("\x1f\x8b", 2), "magic.gz", Libsvm(1));
  ASSERT_FALSE(magic_only.ok());
  EXPECT_EQ(magic_only.status().code(), Status::Code::kDataLoss);
}

// Found by tests/fuzz (libsvm_reader_fuzz): the width inferred under
// kDropRow used to ignore the dropped rows, so reading the same file again
// with that width (as the shares of a partitioned read do) failed on them.
TEST(ReaderTest, C08DroppedRowsCountTowardsTheInferredWidth) {
  const std::string path = kCases + "C08_nan_inf_values.txt";
  ReadOptions o = Libsvm(1);
  o.non_finite = NonFinitePolicy::kDropRow;
  auto whole = ReadDataset(path, o);
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  EXPECT_EQ(whole->features.cols, 4);  // "4:0.5" on dropped line 4
  o.num_features = whole->features.cols;
  std::vector<int64_t> counts;
  EXPECT_EQ(ReadAllShares(path, o, 2, &counts), (std::vector<int64_t>{5}));
  EXPECT_EQ(counts, (std::vector<int64_t>{0, 1}));
}

TEST(ReaderTest, C08RowWithANonFiniteValueMustOtherwiseBeWellFormed) {
  ReadOptions o = Libsvm(1);
  o.non_finite = NonFinitePolicy::kDropRow;
  auto ds = ParseDataset("+1 1:nan 2:x\n+1 1:1\n", "mixed.txt", o);
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(ds.status().message(), "mixed.txt:1: invalid value in token '2:x': expected a number");
  auto label = ParseDataset("nan 1:0.5 7\n+1 1:1\n", "label.txt", o);
  ASSERT_FALSE(label.ok());
  EXPECT_EQ(label.status().message(), "label.txt:1: expected a feature 'index:value', got '7'");
}

// Several bad lines: the first in full, the next four, and how many in all;
// non-finite lines met on the way are counted too.
TEST(ReaderTest, ManyBadLinesAreListedAndCounted) {
  std::string text = "+1 1:0.5\n";
  for (int i = 0; i < 8; ++i) text += "+1 x" + std::to_string(i) + ":1\n";
  text += "+1 1:nan\n";
  auto ds = ParseDataset(text, "many.txt", Libsvm(1));
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(ds.status().message(),
            "many.txt:2: invalid feature index in token 'x0:1': expected a non-negative integer; 8 lines are "
            "malformed, also line 3: invalid feature index in token 'x1:1': expected a non-negative integer; "
            "line 4: invalid feature index in token 'x2:1': expected a non-negative integer; line 5: invalid "
            "feature index in token 'x3:1': expected a non-negative integer; line 6: invalid feature index in "
            "token 'x4:1': expected a non-negative integer (and 3 more); besides, 1 line has non-finite or "
            "overflowing values (first: line 10 '1:nan' is NaN)");
}

// ---------------------------------------------------------------- C08 finite

// Whatever the policy, a Dataset that loads holds only finite numbers: no
// non-finite value can reach a gradient through the reader (the server also
// refuses non-finite pushes: tests/transport_test.cc).
TEST(ReaderTest, C08LoadedDataIsAlwaysFinite) {
  for (const std::string& path : {kCases + "C08_nan_inf_values.txt", kFixtures + "libsvm_extreme_values.txt",
                                 kFixtures + "libsvm_float_overflow.txt"}) {
    const std::string& name = path;
    ReadOptions o = Libsvm(1);
    o.non_finite = NonFinitePolicy::kDropRow;
    auto ds = ReadDataset(path, o);
    ASSERT_TRUE(ds.ok()) << ds.status().ToString();
    EXPECT_GT(ds->dropped_rows, 0) << name;
    for (float v : ds->features.values) EXPECT_TRUE(std::isfinite(v)) << name;
    for (float t : ds->targets) EXPECT_TRUE(std::isfinite(t)) << name;
  }
}

// ---------------------------------------------------------------- C07

// Learning-to-rank files carry "qid:N" after the label and "# ..." comments
// (with or without a space before the '#'). Tether has no ranking objective:
// qid is recognised, never read as a feature, counted and warned about once.
TEST(ReaderTest, C07QidIgnoredAndCommentsStripped) {
  LogCapture log;
  const std::string path = kCases + "C07_qid_and_comments.txt";
  auto ds = ReadDataset(path, Libsvm(1));
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  EXPECT_EQ(ds->features.rows, 4);
  EXPECT_EQ(ds->features.cols, 4);
  EXPECT_EQ(ds->targets, (std::vector<float>{2.0f, 0.0f, 1.0f, 0.0f}));
  EXPECT_EQ(ds->features.row_ptr, (std::vector<int64_t>{0, 2, 3, 4, 5}));
  EXPECT_EQ(ds->features.col_idx, (std::vector<uint32_t>{0, 2, 1, 0, 3}));
  EXPECT_EQ(ds->features.values, (std::vector<float>{0.5f, 1.0f, 0.25f, 1.0f, 0.5f}));
  EXPECT_EQ(ds->qid_rows, 4);
  EXPECT_EQ(log.Matching({path + ": 4 of 4 lines have a 'qid:' field", "ignored"}).size(), 1u);
}

TEST(ReaderTest, C07CommentTouchingAValueAndQidFormsAreChecked) {
  // '#' right after a value ends the value; a qid is read only as the
  // first token after the label and must be a non-negative integer.
  auto ok = ParseDataset("1 qid:7 2:0.5#c\n-1 1:1#x y:z\n", "mem", Libsvm(1));
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->qid_rows, 1);
  EXPECT_EQ(ok->features.col_idx, (std::vector<uint32_t>{1, 0}));
  EXPECT_EQ(ok->features.values, (std::vector<float>{0.5f, 1.0f}));
  auto bad = ParseDataset("1 qid:x 2:0.5\n", "mem", Libsvm(1));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "mem:1: invalid query id in token 'qid:x': expected a non-negative integer");
  auto late = ParseDataset("1 2:0.5 qid:3\n", "mem", Libsvm(1));
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.status().message(),
            "mem:1: 'qid:3' must come right after the label (a query id is not a feature)");
  // XMC has no query ids: there the token stays a malformed feature.
  auto xmc = ParseDataset("1 2 1\n0 qid:1 1:0.5\n", "mem", Xmc(0));
  ASSERT_FALSE(xmc.ok());
  EXPECT_EQ(xmc.status().message(),
            "mem:2: invalid feature index in token 'qid:1': expected a non-negative integer");
}

}  // namespace
}  // namespace tether
