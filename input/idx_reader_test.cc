// IDX reader: hand-made files (plain and gzip), every header error, the
// partition / row-subset rules, and the bundled MNIST test set.
#include "input/idx_reader.h"
#include "input/reader.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdio>
#include <string>
#include <vector>

#include "input/file_input.h"
#include "tests/testing/temp_dir.h"

namespace tether {
namespace {

std::string Idx(const std::vector<uint32_t>& dims, const std::vector<uint8_t>& data, uint8_t type = 0x08) {
  std::string s = {'\0', '\0', static_cast<char>(type), static_cast<char>(dims.size())};
  for (uint32_t d : dims) {
    for (int shift = 24; shift >= 0; shift -= 8) s.push_back(static_cast<char>((d >> shift) & 0xff));
  }
  s.append(data.begin(), data.end());
  return s;
}

class IdxFiles : public ::testing::Test {
 protected:
  std::string Write(const std::string& name, const std::string& bytes, bool gzip = false) {
    const std::string path = dir_.File("idx_" + name);
    if (gzip) {
      gzFile f = gzopen(path.c_str(), "wb");
      EXPECT_NE(f, nullptr);
      EXPECT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())), static_cast<int>(bytes.size()));
      gzclose(f);
    } else {
      FILE* f = std::fopen(path.c_str(), "wb");
      EXPECT_NE(f, nullptr);
      std::fwrite(bytes.data(), 1, bytes.size(), f);
      std::fclose(f);
    }
    return path;
  }

  // 4 images of 2 × 3 pixels; image i has pixel values i*10 + j, with every
  // pixel j == i zeroed; labels 3, 0, 2, 1.
  void MakeSmall(bool gzip) {
    std::vector<uint8_t> px;
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 6; ++j) px.push_back(j == i ? 0 : static_cast<uint8_t>(i * 10 + j));
    images_ = Write(gzip ? "img.gz" : "img", Idx({4, 2, 3}, px), gzip);
    labels_ = Write(gzip ? "lab.gz" : "lab", Idx({4}, {3, 0, 2, 1}), gzip);
  }
  testing::ScopedTempDir dir_;
  std::string images_, labels_;
};

TEST_F(IdxFiles, ReadsPlainAndGzipIdentically) {
  for (bool gzip : {false, true}) {
    MakeSmall(gzip);
    StatusOr<Dataset> d = ReadIdxDataset(images_, labels_, {});
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    EXPECT_EQ(d->features.rows, 4);
    EXPECT_EQ(d->features.cols, 6);
    EXPECT_EQ(d->labels.rows, 4);
    EXPECT_EQ(d->labels.cols, 0);
    EXPECT_EQ(d->targets, (std::vector<float>{3, 0, 2, 1}));
    EXPECT_EQ(d->source_lines, (std::vector<int64_t>{1, 2, 3, 4}));
    // Image 0: pixel 0 is zero (left out), pixels 1..5 hold 1..5.
    ASSERT_EQ(d->features.row_ptr[1], 5);
    EXPECT_EQ(std::vector<uint32_t>(d->features.col_idx.begin(), d->features.col_idx.begin() + 5),
              (std::vector<uint32_t>{1, 2, 3, 4, 5}));
    EXPECT_EQ(d->features.values[0], 1.0f);
    // Image 2: pixel 2 left out; pixel 5 = 25.
    EXPECT_EQ(d->features.row_ptr[3] - d->features.row_ptr[2], 5);
    EXPECT_EQ(d->features.values[d->features.row_ptr[3] - 1], 25.0f);
    EXPECT_EQ(d->features.nnz(), 20);
  }
}

TEST_F(IdxFiles, PartitionsAndSubsetsSplitTheItems) {
  MakeSmall(false);
  IdxReadOptions o;
  o.num_partitions = 3;
  std::vector<float> all;
  for (int p = 0; p < 3; ++p) {
    o.partition = p;
    StatusOr<Dataset> d = ReadIdxDataset(images_, labels_, o);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    all.insert(all.end(), d->targets.begin(), d->targets.end());
  }
  EXPECT_EQ(all, (std::vector<float>{3, 0, 2, 1}));  // every item once, in order

  const std::vector<int64_t> subset{1, 3};
  o = IdxReadOptions{};
  o.row_subset = &subset;
  StatusOr<Dataset> d = ReadIdxDataset(images_, labels_, o);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->targets, (std::vector<float>{0, 1}));
  EXPECT_EQ(d->source_lines, (std::vector<int64_t>{2, 4}));

  const std::vector<int64_t> past_end{1, 4};
  o.row_subset = &past_end;
  d = ReadIdxDataset(images_, labels_, o);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().message(),
            images_ + ": row_subset entry 4 (0-based) is past the last of the file's 4 data rows");
  // From a split file: its line and the 1-based row, as the text readers say.
  const std::string split = Write("val.txt", "2\n\n5\n");
  std::vector<int64_t> lines;
  StatusOr<std::vector<int64_t>> rows = ReadSplitFile(split, &lines);
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  o.row_subset = &*rows;
  o.row_subset_file = split;
  o.row_subset_lines = &lines;
  d = ReadIdxDataset(images_, labels_, o);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().message(),
            split + ":3: row 5 is past the end of " + images_ + ", which has 4 data rows (split files are 1-based)");
  o.row_subset_file.clear();
  o.row_subset_lines = nullptr;
  const std::vector<int64_t> unsorted{2, 1};
  o.row_subset = &unsorted;
  EXPECT_FALSE(ReadIdxDataset(images_, labels_, o).ok());
}

TEST_F(IdxFiles, LabelsOutOfRangeAndCountMismatchAreErrors) {
  MakeSmall(false);
  IdxReadOptions o;
  o.num_classes = 3;  // label 3 on item 1 does not fit
  StatusOr<Dataset> d = ReadIdxDataset(images_, labels_, o);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find(labels_ + ": item 1: label 3 >= 3 classes"), std::string::npos)
      << d.status().message();

  const std::string three = Write("lab3", Idx({3}, {0, 1, 2}));
  d = ReadIdxDataset(images_, three, {});
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("3 labels but"), std::string::npos) << d.status().message();
  // The files swapped: a 1-dimensional "image" file.
  EXPECT_FALSE(ReadIdxDataset(labels_, images_, {}).ok());
}

TEST(IdxParse, HeaderErrorsNameTheProblem) {
  struct Case {
    std::string bytes, expect;
  };
  const std::vector<Case> cases = {
      {"", "not an IDX file"},
      {std::string("\x01\x00\x08\x01", 4) + std::string(4, '\0'), "not an IDX file"},
      {Idx({2}, {1, 2}, 0x0D), "element type 0x0d is not supported"},
      {Idx({}, {}), "declares 0 dimensions"},
      {Idx({2, 0}, {}), "dimension 1 has size 0"},
      {Idx({3}, {1, 2}), "declares 3 bytes of data but the file holds 2 (truncated)"},
      {Idx({1}, {1, 2}), "declares 1 bytes of data but the file holds 2 (trailing bytes)"},
      {std::string("\0\0\x08\x02\0\0", 6), "truncated IDX header"},
      {Idx({0xffffffffu, 0xffffffffu}, {}), "more than 2^32 elements"},
  };
  for (const Case& c : cases) {
    StatusOr<IdxArray> a = ParseIdx(c.bytes, "mem");
    ASSERT_FALSE(a.ok()) << c.expect;
    EXPECT_EQ(a.status().code(), Status::Code::kInvalidArgument);
    EXPECT_NE(a.status().message().find("mem: " + std::string()), std::string::npos);
    EXPECT_NE(a.status().message().find(c.expect), std::string::npos) << a.status().message();
  }
  StatusOr<IdxArray> ok = ParseIdx(Idx({2, 2}, {9, 8, 7, 6}), "mem");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->dims, (std::vector<uint32_t>{2, 2}));
  EXPECT_EQ(ok->data, (std::vector<uint8_t>{9, 8, 7, 6}));
}

TEST_F(IdxFiles, TruncatedGzipAndMissingFile) {
  MakeSmall(true);
  FILE* f = std::fopen(images_.c_str(), "rb");
  ASSERT_NE(f, nullptr);
  std::string gz(4096, '\0');
  gz.resize(std::fread(&gz[0], 1, gz.size(), f));
  std::fclose(f);
  const std::string cut = Write("cut.gz", gz.substr(0, gz.size() / 2));
  StatusOr<IdxArray> a = ReadIdxFile(cut);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), Status::Code::kDataLoss) << a.status().ToString();
  EXPECT_EQ(ReadIdxFile(dir_.File("no_such_idx")).status().code(), Status::Code::kNotFound);
}

// The IDX and text readers share one file reader (input/file_input.h), so
// the same fault gets the same code and message from both: bytes after the
// gzip stream are DataLoss (the IDX reader said InvalidArgument before).
TEST_F(IdxFiles, GzipFaultsMatchTheTextReaders) {
  MakeSmall(true);
  std::string gz;
  ASSERT_TRUE(ReadFileBytes(images_, &gz).ok());
  const std::string tail = Write("tail.gz", gz + "garbage!!");
  StatusOr<IdxArray> a = ReadIdxFile(tail);
  ASSERT_EQ(a.status().code(), Status::Code::kDataLoss) << a.status().ToString();
  EXPECT_EQ(a.status().message(), tail + ": 9 bytes of non-gzip data after the end of the gzip stream");
  const std::string cut = Write("cut2.gz", gz.substr(0, gz.size() - 4));
  StatusOr<IdxArray> b = ReadIdxFile(cut);
  ASSERT_EQ(b.status().code(), Status::Code::kDataLoss);
  EXPECT_EQ(b.status().message(), cut + ": truncated gzip stream (it ends after " + std::to_string(gz.size() - 4) +
                                      " bytes)");
  // A directory is an IOError naming it, as for the text readers.
  EXPECT_EQ(ReadIdxFile(dir_.path()).status().message(), dir_.path() + ": is a directory, not a regular file");
  // The inflated size is bounded: a stream that would pass the limit stops there.
  std::string out;
  Status big = Gunzip("mem", gz, &out, /*max_bytes=*/10);
  EXPECT_EQ(big.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(big.message(), "mem: inflates to more than 10 bytes");
  EXPECT_TRUE(out.empty());
}

// The bundled MNIST test set (data/mnist/, LeCun et al. 1998): 10,000
// 28 × 28 images; the first labels are 7, 2, 1, 0, 4 (the well-known first
// digits of t10k).
TEST(IdxBundled, MnistTestSet) {
  StatusOr<Dataset> d =
      ReadIdxDataset("data/mnist/t10k-images-idx3-ubyte.gz", "data/mnist/t10k-labels-idx1-ubyte.gz", {});
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->features.rows, 10000);
  EXPECT_EQ(d->features.cols, 784);
  EXPECT_EQ(std::vector<float>(d->targets.begin(), d->targets.begin() + 5), (std::vector<float>{7, 2, 1, 0, 4}));
  std::vector<int> count(10, 0);
  for (float t : d->targets) ++count[static_cast<int>(t)];
  EXPECT_EQ(count[0], 980);  // the t10k class counts
  EXPECT_EQ(count[1], 1135);
  EXPECT_EQ(count[9], 1009);
  for (float v : d->features.values) {
    ASSERT_GT(v, 0.0f);
    ASSERT_LE(v, 255.0f);
  }
}

}  // namespace
}  // namespace tether
