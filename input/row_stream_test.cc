// Tests for input/row_stream.h: file assignment (every row read by exactly
// one worker, for random file sizes and worker counts), the streaming
// reader's bounded buffer and blocks, and its errors.
#include "input/row_stream.h"

#include <zlib.h>

#include <fstream>
#include <algorithm>
#include <iterator>
#include <set>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "tests/testing/temp_dir.h"

namespace tether {
namespace {

constexpr int kFeatures = 50, kLabels = 9;

ReadOptions XmcOpts() {
  ReadOptions o;
  o.format = DataFormat::kXmc;
  o.index_base = 0;
  o.num_features = kFeatures;
  o.num_labels = kLabels;
  return o;
}

// An XMC file of `rows` rows whose row i holds feature (i % 50) with value
// `tag` + i (so each row names its file and number), random padding so line
// lengths vary; blank lines sprinkled in.
// `rows` rows with a feature each, and, with `blank_rows`, a blank line now
// and then: a row with neither labels nor features, which counts as a row
// (in the header too). *total: every row written.
std::string XmcText(int rows, int tag, std::mt19937* rng, int64_t header_rows = -1, int64_t* total = nullptr,
                    bool blank_rows = true) {
  std::string body;
  int64_t n = 0;
  std::uniform_int_distribution<int> pad(0, 40), coin(0, 9);
  for (int i = 0; i < rows; ++i) {
    if (blank_rows && coin(*rng) == 0) {
      body += "   \n";
      ++n;
    }
    body += std::to_string(i % kLabels) + " " + std::to_string(i % kFeatures) + ":" + std::to_string(tag * 100000 + i);
    body += std::string(static_cast<size_t>(pad(*rng)), ' ') + "\n";
    ++n;
  }
  if (total != nullptr) *total = n;
  return std::to_string(header_rows < 0 ? n : header_rows) + " " + std::to_string(kFeatures) + " " +
         std::to_string(kLabels) + "\n" + body;
}

void WritePlain(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

void WriteGzip(const std::string& path, const std::string& text) {
  gzFile g = gzopen(path.c_str(), "wb");
  ASSERT_NE(g, nullptr);
  ASSERT_EQ(gzwrite(g, text.data(), static_cast<unsigned>(text.size())), static_cast<int>(text.size()));
  gzclose(g);
}

// Streams worker `rank`'s share; returns each row's value (tag*100000+i).
std::vector<int64_t> ReadShare(const std::vector<DataFile>& files, int rank, int workers, RowStreamOptions so,
                               int64_t* rows_read) {
  RowStream s(files, AssignFilePieces(files, rank, workers), XmcOpts(), so);
  EXPECT_TRUE(s.Start().ok());
  std::vector<int64_t> out;
  Dataset block;
  for (;;) {
    StatusOr<bool> more = s.Next(&block);
    EXPECT_TRUE(more.ok()) << more.status().ToString();
    if (!more.ok() || !*more) break;
    EXPECT_LE(block.rows_read, so.block_rows);
    for (float v : block.features.values) out.push_back(static_cast<int64_t>(v));
  }
  *rows_read = s.rows_read();
  return out;
}

TEST(AssignFilePiecesTest, CoversEveryByteOfPlainFilesAndEveryGzipFileOnce) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 500; ++trial) {
    std::vector<DataFile> files(1 + rng() % 6);
    for (auto& f : files) {
      f.bytes = rng() % 5 == 0 ? 0 : rng() % 10000;
      f.gzip = rng() % 3 == 0;
    }
    const int workers = 1 + static_cast<int>(rng() % 9);
    std::vector<std::vector<std::pair<uint64_t, uint64_t>>> ranges(files.size());
    for (int w = 0; w < workers; ++w)
      for (const FilePiece& p : AssignFilePieces(files, w, workers)) {
        ASSERT_LT(p.begin, std::max<uint64_t>(p.end, 1));
        ranges[static_cast<size_t>(p.file)].push_back({p.begin, p.end});
      }
    for (size_t i = 0; i < files.size(); ++i) {
      auto& r = ranges[i];
      if (files[i].gzip || files[i].bytes == 0) {
        ASSERT_EQ(r.size(), 1u) << "file " << i << " trial " << trial;
        EXPECT_EQ(r[0], std::make_pair(uint64_t{0}, files[i].bytes));
        continue;
      }
      std::sort(r.begin(), r.end());
      uint64_t at = 0;
      for (const auto& [b, e] : r) {
        EXPECT_EQ(b, at) << "file " << i << " trial " << trial;
        at = e;
      }
      EXPECT_EQ(at, files[i].bytes);
    }
  }
}

TEST(AssignFilePiecesTest, OneBigPlainFileSplitsLikeReadOptionsPartitions) {
  const std::vector<DataFile> files{{"a", 1000, false}};
  EXPECT_EQ(AssignFilePieces(files, 0, 3), (std::vector<FilePiece>{{0, 0, 333}}));
  EXPECT_EQ(AssignFilePieces(files, 1, 3), (std::vector<FilePiece>{{0, 333, 666}}));
  EXPECT_EQ(AssignFilePieces(files, 2, 3), (std::vector<FilePiece>{{0, 666, 1000}}));
}

TEST(RowStreamTest, EveryRowReadByExactlyOneWorker) {
  testing::ScopedTempDir dir;
  std::mt19937 rng(11);
  for (int trial = 0; trial < 12; ++trial) {
    const int num_files = 1 + static_cast<int>(rng() % 4);
    std::vector<std::string> paths;
    std::multiset<int64_t> want;
    int64_t want_rows = 0;
    for (int f = 0; f < num_files; ++f) {
      const int rows = 1 + static_cast<int>(rng() % 300);
      const std::string path = dir.path() + "/t" + std::to_string(trial) + "_" + std::to_string(f);
      int64_t total = 0;
      const std::string text = XmcText(rows, f + 1, &rng, -1, &total);
      want_rows += total;
      if (rng() % 2 == 0) WriteGzip(path, text); else WritePlain(path, text);
      paths.push_back(path);
      for (int i = 0; i < rows; ++i) want.insert(int64_t{f + 1} * 100000 + i);
    }
    StatusOr<std::vector<DataFile>> files = StatDataFiles(paths);
    ASSERT_TRUE(files.ok()) << files.status().ToString();
    const int workers = 1 + static_cast<int>(rng() % 7);
    RowStreamOptions so;
    so.block_rows = 1 + static_cast<int64_t>(rng() % 50);
    so.buffer_bytes = 64 + rng() % 2000;
    std::multiset<int64_t> got;
    int64_t total_read = 0;
    for (int w = 0; w < workers; ++w) {
      int64_t read = 0;
      for (int64_t v : ReadShare(*files, w, workers, so, &read)) got.insert(v);
      total_read += read;
    }
    EXPECT_EQ(got, want) << "trial " << trial << ": " << num_files << " files, " << workers << " workers";
    EXPECT_EQ(total_read, want_rows);
  }
}

TEST(RowStreamTest, BlocksAreBoundedAndMatchTheWholeFileRead) {
  testing::ScopedTempDir dir;
  std::mt19937 rng(3);
  const std::string path = dir.path() + "/a.txt";
  int64_t total = 0;
  WritePlain(path, XmcText(1000, 1, &rng, -1, &total));
  ASSERT_GT(total, 1000);  // blank rows among them
  StatusOr<Dataset> whole = ReadDataset(path, XmcOpts());
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  RowStreamOptions so;
  so.block_rows = 7;
  so.buffer_bytes = 256;
  const auto files = *StatDataFiles({path});
  RowStream s(files, AssignFilePieces(files, 0, 1), XmcOpts(), so);
  // Two passes: the second seeks straight to the first row and reads the same.
  for (int pass = 0; pass < 2; ++pass) {
    ASSERT_TRUE(s.Start().ok());
    std::vector<uint32_t> cols;
    std::vector<float> vals;
    std::vector<int64_t> lines;
    int64_t rows = 0, blocks = 0;
    Dataset block;
    for (;;) {
      StatusOr<bool> more = s.Next(&block);
      ASSERT_TRUE(more.ok()) << more.status().ToString();
      if (!*more) break;
      ++blocks;
      ASSERT_LE(block.features.rows, 7);
      EXPECT_EQ(block.features.cols, kFeatures);
      EXPECT_EQ(block.labels.cols, kLabels);
      rows += block.features.rows;
      cols.insert(cols.end(), block.features.col_idx.begin(), block.features.col_idx.end());
      vals.insert(vals.end(), block.features.values.begin(), block.features.values.end());
      lines.insert(lines.end(), block.source_lines.begin(), block.source_lines.end());
    }
    EXPECT_EQ(rows, total);
    EXPECT_GE(blocks, (total + 6) / 7);
    EXPECT_EQ(cols, whole->features.col_idx);
    EXPECT_EQ(vals, whole->features.values);
    EXPECT_EQ(lines, whole->source_lines);
    EXPECT_EQ(s.rows_read(), total);
  }
  // Lines are at most ~60 bytes: the 256-byte buffer never grew.
  EXPECT_EQ(s.peak_buffer_bytes(), 256u);
}

TEST(RowStreamTest, ALineLongerThanTheBufferGrowsIt) {
  testing::ScopedTempDir dir;
  std::string text = "2 50 9\n0 1:1\n1";
  for (int f = 0; f < 50; ++f) text += " " + std::to_string(f) + ":1";
  text += "\n";
  WritePlain(dir.path() + "/a", text);
  RowStreamOptions so;
  so.buffer_bytes = 64;
  const auto files = *StatDataFiles({dir.path() + "/a"});
  RowStream s(files, AssignFilePieces(files, 0, 1), XmcOpts(), so);
  ASSERT_TRUE(s.Start().ok());
  Dataset block;
  StatusOr<bool> more = s.Next(&block);
  ASSERT_TRUE(more.ok()) << more.status().ToString();
  EXPECT_EQ(block.features.rows, 2);
  EXPECT_EQ(block.features.nnz(), 51);
  EXPECT_GT(s.peak_buffer_bytes(), 64u);
}

TEST(RowStreamTest, ErrorsNameTheFileLineEvenInTheSecondWorkersRange) {
  testing::ScopedTempDir dir;
  std::string text = "100 50 9\n";
  for (int i = 0; i < 100; ++i) text += i == 80 ? "0 3:x\n" : "0 3:1\n";
  const std::string path = dir.path() + "/bad.txt";
  WritePlain(path, text);
  const auto files = *StatDataFiles({path});
  RowStream s(files, AssignFilePieces(files, 1, 2), XmcOpts(), {});
  ASSERT_TRUE(s.Start().ok());
  Dataset block;
  StatusOr<bool> more = s.Next(&block);
  ASSERT_FALSE(more.ok());
  EXPECT_EQ(more.status().message().rfind(path + ":82: ", 0), 0u) << more.status().message();
}

TEST(RowStreamTest, HeaderWidthsAndCountsAreChecked) {
  testing::ScopedTempDir dir;
  std::mt19937 rng(5);
  WritePlain(dir.path() + "/wide", "1 60 9\n0 1:1\n");
  WriteGzip(dir.path() + "/count.gz", XmcText(10, 1, &rng, /*header_rows=*/12, nullptr, /*blank_rows=*/false));
  Dataset block;
  {
    const auto files = *StatDataFiles({dir.path() + "/wide"});
    RowStream s(files, AssignFilePieces(files, 0, 1), XmcOpts(), {});
    ASSERT_TRUE(s.Start().ok());
    StatusOr<bool> more = s.Next(&block);
    ASSERT_FALSE(more.ok());
    EXPECT_NE(more.status().message().find("/wide:1: header declares 60 features and 9 labels, but the job's "
                                           "widths are 50 and 9"),
              std::string::npos)
        << more.status().message();
  }
  {
    const auto files = *StatDataFiles({dir.path() + "/count.gz"});
    RowStream s(files, {{0, 0, files[0].bytes}}, XmcOpts(), {});
    ASSERT_TRUE(s.Start().ok());
    StatusOr<bool> more = s.Next(&block);
    ASSERT_FALSE(more.ok());
    EXPECT_NE(more.status().message().find("/count.gz:1: header declares 12 examples but the file has 10 data rows"),
              std::string::npos)
        << more.status().message();
  }
}

TEST(RowStreamTest, TruncatedGzipIsDataLoss) {
  testing::ScopedTempDir dir;
  std::mt19937 rng(9);
  const std::string path = dir.path() + "/t.gz";
  WriteGzip(path, XmcText(2000, 1, &rng));
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  WritePlain(path, bytes.substr(0, bytes.size() / 2));
  const auto files = *StatDataFiles({path});
  RowStream s(files, AssignFilePieces(files, 0, 1), XmcOpts(), {});
  ASSERT_TRUE(s.Start().ok());
  Dataset block;
  Status st;
  for (;;) {
    StatusOr<bool> more = s.Next(&block);
    if (!more.ok()) {
      st = more.status();
      break;
    }
    ASSERT_TRUE(*more) << "a truncated stream read to the end without an error";
  }
  EXPECT_EQ(st.code(), Status::Code::kDataLoss) << st.ToString();
  EXPECT_EQ(st.message(), path + ": truncated gzip stream");
}

TEST(RowStreamTest, MissingFileIsNotFound) {
  StatusOr<std::vector<DataFile>> f = StatDataFiles({"/no/such/file.gz"});
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().message(), "/no/such/file.gz: no such file");
}

}  // namespace
}  // namespace tether

namespace tether {
namespace {

// Hashed features (data.hashed_features): each parsed piece numbers its
// columns in its own dictionary; the pieces of a block, and the blocks of a
// file list read into memory, are re-keyed into one (AppendHashedCsr), so
// every entry keeps its exact 64-bit id.
TEST(RowStreamTest, HashedIdsStayExactAcrossPiecesFilesAndBlocks) {
  testing::ScopedTempDir dir;
  const uint64_t kBig = (uint64_t{1} << 63) + 1, kMax = ~uint64_t{0};
  // Row r of file f holds ids {r, kBig + f, kMax - r} (r < 40), value f·100 + r.
  std::vector<std::vector<uint64_t>> want_ids;
  std::vector<float> want_vals;
  for (int f = 0; f < 3; ++f) {
    std::string text = "40 0 2\n";
    for (int r = 0; r < 40; ++r) {
      const float v = static_cast<float>(f * 100 + r);
      text += std::to_string(r % 2) + " " + std::to_string(kMax - r) + ":" + std::to_string(f * 100 + r) + " " +
              std::to_string(r) + ":" + std::to_string(f * 100 + r) + " " + std::to_string(kBig + f) + ":" +
              std::to_string(f * 100 + r) + "\n";
      want_ids.push_back({static_cast<uint64_t>(r), kBig + f, kMax - r});
      for (int k = 0; k < 3; ++k) want_vals.push_back(v);
    }
    const std::string path = dir.path() + "/part" + std::to_string(f) + (f == 1 ? ".txt.gz" : ".txt");
    if (f == 1) {
      WriteGzip(path, text);
    } else {
      WritePlain(path, text);
    }
  }
  ReadOptions o;
  o.format = DataFormat::kXmc;
  o.index_base = 0;
  o.num_labels = 2;
  o.hashed_features = true;
  auto check = [&](const CsrMatrix& m, size_t first_row) {
    ASSERT_NE(m.col_keys, nullptr);
    EXPECT_EQ(m.cols, static_cast<int64_t>(m.col_keys->size()));
    for (int64_t r = 0; r < m.rows; ++r) {
      std::vector<uint64_t> ids;
      for (int64_t p = m.row_ptr[r]; p < m.row_ptr[r + 1]; ++p) {
        ids.push_back((*m.col_keys)[m.col_idx[p]]);
        if (p > m.row_ptr[r]) {
          EXPECT_LT(m.col_idx[p - 1], m.col_idx[p]);  // rows stay sorted
        }
      }
      EXPECT_EQ(ids, want_ids[first_row + static_cast<size_t>(r)]) << "row " << first_row + r;
    }
  };
  // In memory: the three files' blocks concatenated.
  StatusOr<Dataset> all = ReadFileListShare(dir.path() + "/part*", "data.train_file", o, 0, 1);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_EQ(all->features.rows, 120);
  EXPECT_EQ(all->features.col_keys->size(), 40u + 3u + 40u);
  check(all->features, 0);
  EXPECT_EQ(all->features.values, want_vals);
  // Streamed in blocks of 7 rows through a 64-byte buffer (many pieces per block).
  RowStreamOptions so;
  so.block_rows = 7;
  so.buffer_bytes = 64;
  StatusOr<std::unique_ptr<RowStream>> s = OpenFileListShare(dir.path() + "/part*", "data.train_file", o, 0, 1, so);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_TRUE((*s)->Start().ok());
  Dataset block;
  size_t row = 0;
  for (;;) {
    StatusOr<bool> more = (*s)->Next(&block);
    ASSERT_TRUE(more.ok()) << more.status().ToString();
    if (!*more) break;
    check(block.features, row);
    row += static_cast<size_t>(block.features.rows);
  }
  EXPECT_EQ(row, 120u);
}

// Data on demand's default chunk size over streamed files: bytes per row
// from a file's first bytes, the XMC header left out, gzip decoded.
TEST(EstimateBytesPerRowTest, MeanRowBytesOfTheSampleRoundedUp) {
  testing::ScopedTempDir dir;
  const std::string header = "3 50 9\n";
  WritePlain(dir.path() + "/a.txt", header + "0 1:1\n0 2:2\n0 3:33\n");  // 6 + 6 + 7 bytes
  const auto a = *StatDataFiles({dir.path() + "/a.txt"});
  EXPECT_EQ(*EstimateBytesPerRow(a[0], /*xmc=*/true), 7u);  // ceil(19 / 3)
  EXPECT_EQ(*EstimateBytesPerRow(a[0], /*xmc=*/false), 7u);  // ceil(26 / 4)
  // A sample cut mid-line counts its complete lines only.
  EXPECT_EQ(*EstimateBytesPerRow(a[0], /*xmc=*/true, /*sample_bytes=*/16), 6u);  // header + "0 1:1\n" + "0 2"
  WriteGzip(dir.path() + "/b.gz", header + std::string(99, 'x') + "\n");
  const auto b = *StatDataFiles({dir.path() + "/b.gz"});
  EXPECT_EQ(*EstimateBytesPerRow(b[0], /*xmc=*/true), 100u);
  // No complete data line: the bytes read.
  WritePlain(dir.path() + "/c.txt", "1 2 3");
  EXPECT_EQ(*EstimateBytesPerRow((*StatDataFiles({dir.path() + "/c.txt"}))[0], /*xmc=*/false), 5u);
  DataFile missing{dir.path() + "/none.txt", 10, false};
  EXPECT_EQ(EstimateBytesPerRow(missing, true).status().message(), dir.path() + "/none.txt: no such file");
}

}  // namespace
}  // namespace tether
