// Tests for CsrMatrix and the XMC/LIBSVM readers: options, the hard cases
// C01 to C08 and LIBSVM's extras (reader_cases_test.cc, in the same binary,
// holds C10, C11, the logs, in-memory parsing and C07). Run from the
// repository root (ctest sets it as the working directory): fixtures live in
// tests/data/, byte-exact copies of the hard cases in tests/data/cases/, and
// the bundled Bibtex data in data/bibtex/.
#include "input/reader.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "input/csr.h"
#include "input/reader_test.h"
#include "tests/testing/temp_dir.h"

namespace tether {
namespace {

using namespace reader_testing;  // NOLINT(build/namespaces): the tests' shared helpers

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

}  // namespace
}  // namespace tether
