// Tests of the XMC/LIBSVM readers, continued (reader_test.cc holds the
// options and the hard cases C01 to C08): C10 byte-range shares, C11 empty
// and gzip input, what the readers log, parsing from memory, C08's finite
// guarantee and C07 (qid and comments). Same binary as reader_test.cc; run
// from the repository root.
#include "input/reader.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include <glog/logging.h>
#include <gtest/gtest.h>

#include "input/csr.h"
#include "input/reader_test.h"
#include "tests/testing/temp_dir.h"

namespace tether {
namespace {

using namespace reader_testing;  // NOLINT(build/namespaces): the tests' shared helpers

// ---------------------------------------------------------------- C10


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

TEST(BibtexTest, ByteRangeSharesOfTheWholeFile) {
  for (int n : {1, 3, 4}) {
    std::vector<int64_t> counts;
    const std::vector<int64_t> lines = ReadAllShares(kBibtex, Xmc(0), n, &counts);
    ASSERT_EQ(lines.size(), 7395u) << "n=" << n;
    for (size_t i = 0; i < lines.size(); ++i) ASSERT_EQ(lines[i], static_cast<int64_t>(i) + 2);
  }
}

// ---------------------------------------------------------------- logs



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

// The header of a gzip file cut inside its first line is read as the
// whole file would be: a truncated stream, never a malformed header.
TEST(ReaderTest, TruncatedGzipHeaderIsDataLossNotAMalformedHeader) {
  const std::string gz = FileBytes(kCases + "C11_gzip_input.txt.gz");
  testing::ScopedTempDir dir;
  const std::string cut = dir.File("cut.gz");
  { std::ofstream(cut, std::ios::binary) << gz.substr(0, 15); }
  const auto header = ReadXmcHeader(cut);
  ASSERT_FALSE(header.ok());
  EXPECT_EQ(header.status().code(), Status::Code::kDataLoss);
  EXPECT_EQ(header.status().message(), cut + ": truncated gzip stream (it ends after 15 bytes)");
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
