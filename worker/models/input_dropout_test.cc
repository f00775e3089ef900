// InputDropout (worker/models/input_dropout.h): the count of entries a fixed
// seed drops, the 1 / (1 − rate) scale of the others, the mask's position
// indexing on a row slice, binary rows, and rate 0 leaving the view as it is.
#include "worker/models/input_dropout.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace tether {
namespace {

// rows × per_row entries (columns 0 .. per_row − 1 of cols), the entry at
// position p valued 0.5 + (p % 5) / 4 (every value non-zero).
CsrMatrix Rows(int64_t rows, int per_row, int64_t cols) {
  CsrMatrix m;
  m.cols = cols;
  std::vector<uint32_t> idx(per_row);
  std::vector<float> val(per_row);
  for (int64_t r = 0; r < rows; ++r) {
    for (int c = 0; c < per_row; ++c) {
      idx[c] = static_cast<uint32_t>(c);
      val[c] = 0.5f + static_cast<float>((r * per_row + c) % 5) / 4.0f;
    }
    m.AppendRow(idx.data(), val.data(), idx.size());
  }
  return m;
}

TEST(InputDropoutTest, FixedSeedDropsAnExactCountAndScalesTheOthers) {
  const CsrMatrix x = Rows(128, 50, 1836);  // a Bibtex-sized minibatch: 6,400 entries
  InputDropout dropout(0.25f);
  const CsrView out = dropout.Apply(ViewOf(x), /*seed=*/42);
  EXPECT_EQ(dropout.dropped(), 1593);  // of 6,400: 1,600 on average
  EXPECT_EQ(out.rows, x.rows);
  EXPECT_EQ(out.cols, x.cols);
  EXPECT_EQ(out.row_ptr, x.row_ptr.data());  // the rows to pull do not change
  EXPECT_EQ(out.col_idx, x.col_idx.data());
  int64_t zeros = 0;
  for (int64_t p = 0; p < x.nnz(); ++p) {
    if (out.values[p] == 0.0f) {
      ++zeros;
    } else {
      EXPECT_FLOAT_EQ(out.values[p], x.values[p] / 0.75f) << p;
    }
  }
  EXPECT_EQ(zeros, dropout.dropped());
  EXPECT_EQ(x.values[0], 0.5f);  // the input is left as read
}

TEST(InputDropoutTest, TheMaskIsPureInTheSeedAndEntryPosition) {
  const CsrMatrix x = Rows(64, 20, 100);
  InputDropout a(0.5f), b(0.5f);
  const CsrView va = a.Apply(ViewOf(x), 7);
  const std::vector<float> first(va.values, va.values + x.nnz());
  const CsrView vb = b.Apply(ViewOf(x), 7);
  EXPECT_EQ(std::vector<float>(vb.values, vb.values + x.nnz()), first);
  const CsrView other = b.Apply(ViewOf(x), 8);
  int64_t differ = 0;
  for (int64_t p = 0; p < x.nnz(); ++p) differ += (other.values[p] == 0.0f) != (first[p] == 0.0f);
  EXPECT_EQ(differ, 637);  // of 1,280: 640 on average for independent masks
  // Entry e is kept exactly when Backend::Dropout's mask keeps element e.
  for (int64_t p = 0; p < x.nnz(); ++p)
    EXPECT_EQ(first[p] != 0.0f, DropoutKeeps(7, static_cast<uint64_t>(p), DropoutThreshold(0.5f))) << p;
}

TEST(InputDropoutTest, ARowSliceCountsEntriesFromItsFirstRow) {
  const CsrMatrix x = Rows(10, 4, 16);
  InputDropout whole(0.5f), slice(0.5f);
  CsrMatrix tail;  // rows 6..9 on their own
  tail.cols = x.cols;
  for (int64_t r = 6; r < 10; ++r)
    tail.AppendRow(&x.col_idx[x.row_ptr[r]], &x.values[x.row_ptr[r]], x.row_ptr[r + 1] - x.row_ptr[r]);
  const CsrView want = whole.Apply(ViewOf(tail), 3);
  const CsrView got = slice.Apply(RowSliceOf(x, 6, 10), 3);
  ASSERT_EQ(got.row_ptr[0], 24);
  for (int64_t e = 0; e < 16; ++e) EXPECT_EQ(got.values[24 + e], want.values[e]) << e;
  EXPECT_EQ(slice.dropped(), whole.dropped());
}

TEST(InputDropoutTest, BinaryRowsReadAsOnes) {
  CsrMatrix x = Rows(8, 10, 10);
  x.values.clear();
  InputDropout dropout(0.2f);
  const CsrView out = dropout.Apply(ViewOf(x), 11);
  ASSERT_NE(out.values, nullptr);
  for (int64_t p = 0; p < x.nnz(); ++p)
    EXPECT_TRUE(out.values[p] == 0.0f || out.values[p] == 1.0f / 0.8f) << p << ": " << out.values[p];
  EXPECT_EQ(dropout.dropped(), 9);  // of 80: 16 on average
}

TEST(InputDropoutTest, RateZeroIsTheInputItself) {
  const CsrMatrix x = Rows(4, 3, 8);
  InputDropout none(0.0f);
  const CsrView out = none.Apply(ViewOf(x), 5);
  EXPECT_EQ(out.values, x.values.data());
  EXPECT_EQ(none.dropped(), 0);
}

TEST(InputDropoutTest, ItsSeedStreamIsNotTheHiddenMasks) {
  EXPECT_NE(InputDropout::SeedFor(1), 1u);
  EXPECT_NE(InputDropout::SeedFor(1), InputDropout::SeedFor(2));
  EXPECT_EQ(InputDropout::SeedFor(1), DropoutHash(1, ~uint64_t{0}));
}

TEST(InputDropoutTest, ARateOutsideZeroToOneIsAProgrammingError) {
  EXPECT_DEATH(InputDropout(1.0f), "outside");
  EXPECT_DEATH(InputDropout(-0.1f), "outside");
}

}  // namespace
}  // namespace tether
