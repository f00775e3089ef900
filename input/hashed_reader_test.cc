// Hashed 64-bit feature ids (ReadOptions::hashed_features):
// ids are read exactly as uint64 (never through a double), each distinct id
// of a share gets a column in id order (CsrMatrix::col_keys), and an id past
// 2^64 - 1 is refused with path:line and the token.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "input/reader.h"
#include "input/synthetic_xmc.h"
#include "tests/testing/temp_dir.h"

namespace tether {
namespace {

constexpr uint64_t kTwo63 = uint64_t{1} << 63;
constexpr uint64_t kMax = ~uint64_t{0};  // 2^64 - 1

ReadOptions Hashed(DataFormat format, int base) {
  ReadOptions o;
  o.format = format;
  o.index_base = base;
  o.hashed_features = true;
  return o;
}

std::vector<uint64_t> RowIds(const CsrMatrix& m, int64_t r) {
  std::vector<uint64_t> ids;
  for (int64_t p = m.row_ptr[r]; p < m.row_ptr[r + 1]; ++p) ids.push_back((*m.col_keys)[m.col_idx[p]]);
  return ids;
}

std::vector<float> RowVals(const CsrMatrix& m, int64_t r) {
  return {m.values.begin() + m.row_ptr[r], m.values.begin() + m.row_ptr[r + 1]};
}

TEST(HashedReaderTest, IdsThatADoubleWouldMergeStayDistinct) {
  // The premise: 2^63 + 1 and 2^63 + 2 are one number once rounded through a double.
  ASSERT_EQ(static_cast<double>(kTwo63 + 1), static_cast<double>(kTwo63 + 2));
  // The XMC header's feature count (here 0) is not used in hashed mode.
  const std::string text =
      "3 0 2\n"
      "0 9223372036854775810:2 9223372036854775809:1\n"
      "1 18446744073709551615:3 5:0.5\n"
      "0,1 9223372036854775809:4\n";
  auto ds = ParseDataset(text, "mem", Hashed(DataFormat::kXmc, 0));
  ASSERT_TRUE(ds.ok()) << ds.status().message();
  const CsrMatrix& f = ds->features;
  ASSERT_NE(f.col_keys, nullptr);
  EXPECT_EQ(*f.col_keys, (std::vector<uint64_t>{5, kTwo63 + 1, kTwo63 + 2, kMax}));
  EXPECT_EQ(f.cols, 4);
  EXPECT_EQ(f.rows, 3);
  // Rows sorted by id (the line wrote 2^63+2 first), as columns are in id order.
  EXPECT_EQ(RowIds(f, 0), (std::vector<uint64_t>{kTwo63 + 1, kTwo63 + 2}));
  EXPECT_EQ(RowVals(f, 0), (std::vector<float>{1, 2}));
  EXPECT_EQ(RowIds(f, 1), (std::vector<uint64_t>{5, kMax}));
  EXPECT_EQ(RowVals(f, 1), (std::vector<float>{0.5f, 3}));
  EXPECT_EQ(RowIds(f, 2), (std::vector<uint64_t>{kTwo63 + 1}));
  EXPECT_EQ(f.col_idx, (std::vector<uint32_t>{1, 2, 0, 3, 1}));
  EXPECT_EQ(ds->labels.cols, 2);
  // Slices and gathers share the dictionary.
  const CsrMatrix g = GatherRows(f, {2, 0});
  EXPECT_EQ(g.col_keys, f.col_keys);
  EXPECT_EQ(RowIds(g, 1), (std::vector<uint64_t>{kTwo63 + 1, kTwo63 + 2}));
  EXPECT_EQ(SliceRows(f, 1, 2).col_keys, f.col_keys);
}

TEST(HashedReaderTest, TwoToThe64IsRefusedWithFileLineAndToken) {
  auto xmc = ParseDataset("2 0 1\n0 1:1\n0 18446744073709551616:1 3:1\n", "data.txt", Hashed(DataFormat::kXmc, 0));
  ASSERT_FALSE(xmc.ok());
  EXPECT_EQ(xmc.status().message(),
            "data.txt:3: feature id too large in token '18446744073709551616:1': hashed feature ids are at most "
            "18446744073709551615 (2^64 - 1)");
  auto svm = ParseDataset("+1 18446744073709551616:1\n", "a.svm", Hashed(DataFormat::kLibsvm, 1));
  ASSERT_FALSE(svm.ok());
  EXPECT_EQ(svm.status().message().rfind("a.svm:1: feature id too large in token '18446744073709551616:1'", 0), 0u)
      << svm.status().message();
  // Signs and non-integers stay invalid ids.
  auto neg = ParseDataset("2 0 1\n0 -1:1\n0 1:1\n", "n", Hashed(DataFormat::kXmc, 0));
  ASSERT_FALSE(neg.ok());
  EXPECT_EQ(neg.status().message(), "n:2: invalid feature index in token '-1:1': expected a non-negative integer");
  auto real = ParseDataset("2 0 1\n0 1e19:1\n0 1:1\n", "r", Hashed(DataFormat::kXmc, 0));
  ASSERT_FALSE(real.ok());
  EXPECT_EQ(real.status().message(), "r:2: invalid feature index in token '1e19:1': expected a non-negative integer");
}

TEST(HashedReaderTest, LibsvmBaseOneAndSharesWithoutAWidth) {
  // Base 1: id i is key i - 1, so 2^64 - 1 is key 2^64 - 2 and 0 is refused.
  const std::string text = "+1 18446744073709551615:1 7:2\n-1 7:1\n+1 9223372036854775810:1\n-1 2:1\n";
  auto whole = ParseDataset(text, "mem", Hashed(DataFormat::kLibsvm, 1));
  ASSERT_TRUE(whole.ok()) << whole.status().message();
  EXPECT_EQ(*whole->features.col_keys, (std::vector<uint64_t>{1, 6, kTwo63 + 1, kMax - 1}));
  EXPECT_EQ(whole->targets, (std::vector<float>{1, -1, 1, -1}));
  // A share needs no num_features in hashed mode; each share has its own dictionary.
  ReadOptions o = Hashed(DataFormat::kLibsvm, 1);
  o.num_partitions = 2;
  std::vector<uint64_t> seen;
  int64_t rows = 0;
  for (int p = 0; p < 2; ++p) {
    o.partition = p;
    auto share = ParseDataset(text, "mem", o);
    ASSERT_TRUE(share.ok()) << share.status().message();
    rows += share->features.rows;
    for (int64_t r = 0; r < share->features.rows; ++r)
      for (uint64_t id : RowIds(share->features, r)) seen.push_back(id);
  }
  EXPECT_EQ(rows, 4);
  EXPECT_EQ(seen, (std::vector<uint64_t>{6, kMax - 1, 6, kTwo63 + 1, 1}));  // rows sorted by id
  auto zero = ParseDataset("+1 0:1\n", "z", Hashed(DataFormat::kLibsvm, 1));
  ASSERT_FALSE(zero.ok());
  EXPECT_EQ(zero.status().message(), "z:1: feature index 0 is invalid with 1-based indexing (token '0:1')");
}

TEST(HashedReaderTest, DeclaredWidthAndArffAreRefused) {
  ReadOptions o = Hashed(DataFormat::kXmc, 0);
  o.num_features = 10;
  auto ds = ParseDataset("1 10 1\n0 1:1\n", "w", o);
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(ds.status().message(),
            "w: num_features must be 0 with hashed_features (feature ids are any 64-bit integer; the model has no "
            "input width), got 10");
  auto arff = ParseDataset("@relation r\n", "x.arff", Hashed(DataFormat::kArff, 0));
  ASSERT_FALSE(arff.ok());
  EXPECT_NE(arff.status().message().find("hashed_features applies to XMC and LIBSVM text"), std::string::npos)
      << arff.status().message();
}

TEST(HashedReaderTest, DuplicateIdsFollowThePolicy) {
  auto err = ParseDataset("1 0 1\n0 18446744073709551615:1 18446744073709551615:2\n", "d", Hashed(DataFormat::kXmc, 0));
  ASSERT_FALSE(err.ok());
  EXPECT_EQ(err.status().message().rfind("d:2: duplicate feature index 18446744073709551615 ", 0), 0u)
      << err.status().message();
  ReadOptions o = Hashed(DataFormat::kXmc, 0);
  o.duplicates = DuplicatePolicy::kSum;
  auto sum = ParseDataset("1 0 1\n0 18446744073709551615:1 18446744073709551615:2\n", "d", o);
  ASSERT_TRUE(sum.ok()) << sum.status().message();
  EXPECT_EQ(RowVals(sum->features, 0), (std::vector<float>{3}));
}

TEST(HashedReaderTest, GeneratorWritesDistinct64BitIdsDeterministically) {
  tether::testing::ScopedTempDir dir;
  SyntheticXmcOptions o;
  o.num_features = 500;
  o.num_labels = 20;
  o.features_per_row = 10;
  o.feature_id_bits = 64;
  o.seed = 7;
  SyntheticXmcGenerator a(o), b(o);
  ASSERT_TRUE(a.WriteXmcFile(200, dir.path() + "/a.txt").ok());
  ASSERT_TRUE(b.WriteXmcFile(200, dir.path() + "/b.txt").ok());
  ReadOptions r = Hashed(DataFormat::kXmc, 0);
  auto da = ReadDataset(dir.path() + "/a.txt", r);
  auto db = ReadDataset(dir.path() + "/b.txt", r);
  ASSERT_TRUE(da.ok()) << da.status().message();
  ASSERT_TRUE(db.ok()) << db.status().message();
  EXPECT_EQ(*da->features.col_keys, *db->features.col_keys);
  EXPECT_EQ(da->features.col_idx, db->features.col_idx);
  // Every id is FeatureId(f) of some f < F, and ids reach the top half of the range.
  std::vector<uint64_t> all;
  for (uint32_t f = 0; f < 500; ++f) all.push_back(a.FeatureId(f));
  std::sort(all.begin(), all.end());
  EXPECT_EQ(std::unique(all.begin(), all.end()), all.end());  // a bijection: 500 distinct ids
  uint64_t top = 0;
  for (uint64_t id : *da->features.col_keys) {
    EXPECT_TRUE(std::binary_search(all.begin(), all.end(), id)) << id;
    top = std::max(top, id);
  }
  EXPECT_GT(top, kTwo63);
  EXPECT_LE(da->features.cols, 500);
  SyntheticXmcOptions bad = o;
  bad.feature_id_bits = 48;
  EXPECT_EQ(ValidateSyntheticXmcOptions(bad).message(), "synthetic XMC: feature_id_bits must be 32 or 64");
}

}  // namespace
}  // namespace tether
