// Helpers shared by the reader tests (reader_test.cc, reader_cases_test.cc,
// one test binary): the read options of each format, a CSR row's columns and
// values, the rows of every byte-range share, two datasets compared row for
// row, a file's bytes, and the tests' glog sink (tests/testing/log_capture.h).
// Paths are from the repository root (ctest's working directory).
#pragma once

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <glog/logging.h>
#include <gtest/gtest.h>

#include "input/csr.h"
#include "input/reader.h"
#include "tests/testing/log_capture.h"

namespace tether {
namespace reader_testing {

inline const std::string kCases = "tests/data/cases/";
inline const std::string kFixtures = "tests/data/readers/";
inline const std::string kBibtex = "data/bibtex/Bibtex_data.txt.gz";
inline const std::string kBibtexTrain = "data/bibtex/bibtex_trSplit.txt";
inline const std::string kBibtexTest = "data/bibtex/bibtex_tstSplit.txt";

inline ReadOptions Xmc(int base) {
  ReadOptions o;
  o.format = DataFormat::kXmc;
  o.index_base = base;
  return o;
}

inline ReadOptions Libsvm(int base) {
  ReadOptions o;
  o.format = DataFormat::kLibsvm;
  o.index_base = base;
  return o;
}

inline std::vector<uint32_t> RowCols(const CsrMatrix& m, int64_t r) {
  return {m.col_idx.begin() + m.row_ptr[r], m.col_idx.begin() + m.row_ptr[r + 1]};
}

inline std::vector<float> RowVals(const CsrMatrix& m, int64_t r) {
  return {m.values.begin() + m.row_ptr[r], m.values.begin() + m.row_ptr[r + 1]};
}

inline bool StartsWith(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

// Reads `path` as n byte-range partitions and returns the source lines of all
// shares, in partition order; the per-share row counts go to *counts.
inline std::vector<int64_t> ReadAllShares(const std::string& path, ReadOptions o, int n,
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

inline void ExpectSameRows(const Dataset& a, const Dataset& b) {
  EXPECT_EQ(a.features.rows, b.features.rows);
  EXPECT_EQ(a.features.cols, b.features.cols);
  EXPECT_EQ(a.features.row_ptr, b.features.row_ptr);
  EXPECT_EQ(a.features.col_idx, b.features.col_idx);
  EXPECT_EQ(a.features.values, b.features.values);
  EXPECT_EQ(a.targets, b.targets);
  EXPECT_EQ(a.source_lines, b.source_lines);
}

inline std::string FileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Collects the glog lines written while it is alive (C02: the index base in
// force is logged; C05: rows without labels are counted in the log; C10: the
// per-share row counts are logged).
using ::tether::testing::LogCapture;

}  // namespace reader_testing
}  // namespace tether
