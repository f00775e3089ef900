// The memory bound on data reads: a gzip bomb (64 MiB of text lines in
// about 130 KiB of gzip) read under a 16 MiB budget is refused naming the file,
// without inflating it (the child process's peak memory is measured); the
// same file reads in full under a budget it fits; a plain file, text that
// parses into more than it holds, an endless line (RowStream, ARFF) and a
// file-list share held whole are bounded too.
#include "input/read_budget.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "input/arff_reader.h"
#include "input/file_input.h"
#include "input/reader.h"
#include "input/row_stream.h"
#include "tests/testing/temp_dir.h"

namespace tether {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;
const char kFlagSource[] = "consistency.memory_limit_bytes (--memory_limit)";

MemoryBudget Budget(uint64_t bytes, const std::string& source = kFlagSource) { return MemoryBudget{bytes, source}; }

// `bytes` of LIBSVM text: lines "1 1:1 # 000...0\n" of 1 KiB each (the
// comment makes them long), whose gzip at level 9 is about 1/1000 of it.
// `newline` false: one endless line of the same bytes.
std::string WriteBomb(const std::string& path, uint64_t bytes, bool newline = true, const std::string& head = "") {
  std::string line = "1 1:1 # " + std::string(1024 - 9, '0') + "\n";
  if (!newline) line.back() = '0';
  gzFile g = gzopen(path.c_str(), "wb9");
  EXPECT_NE(g, nullptr);
  if (!head.empty()) gzwrite(g, head.data(), static_cast<unsigned>(head.size()));
  for (uint64_t i = 0; i < bytes / line.size(); ++i)
    EXPECT_EQ(gzwrite(g, line.data(), static_cast<unsigned>(line.size())), static_cast<int>(line.size()));
  gzclose(g);
  return path;
}

ReadOptions LibsvmOpts(uint64_t budget) {
  ReadOptions o;
  o.format = DataFormat::kLibsvm;
  o.index_base = 1;
  o.num_features = 1;
  o.memory_budget = Budget(budget);
  return o;
}

std::string Refusal(const std::string& path, const std::string& what, uint64_t budget) {
  return "data file " + path + ": " + what + " " + FormatBytes(budget) +
         ", the memory this process may count on (consistency.memory_limit_bytes (--memory_limit)); give it more "
         "memory (--memory_limit) or split the file (docs/DATA.md)";
}

// A field of /proc/self/status in bytes ("VmRSS", "VmHWM": kB there).
uint64_t StatusBytes(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field + ":", 0) == 0) return std::stoull(line.substr(field.size() + 1)) * 1024;
  return 0;
}

// Runs `read` in a child process and returns how far the child's peak
// resident memory (VmHWM, kept by the kernel as pages are freed) rose above
// its resident memory before the read; *ok says whether `read` returned
// true. The child is bounded by alarm() and always reaped.
template <typename Read>
uint64_t PeakGrowthOf(Read read, bool* ok) {
  int fds[2];
  EXPECT_EQ(::pipe(fds), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::alarm(60);
    ::close(fds[0]);
    const uint64_t before = StatusBytes("VmRSS");
    const bool done = read();
    const uint64_t peak = StatusBytes("VmHWM");
    const uint64_t growth = peak > before ? peak - before : 0;
    const bool sent = ::write(fds[1], &growth, sizeof growth) == static_cast<ssize_t>(sizeof growth);
    ::_exit(done && sent ? 0 : 1);
  }
  ::close(fds[1]);
  EXPECT_GT(pid, 0);
  uint64_t growth = 0;
  const bool got = ::read(fds[0], &growth, sizeof growth) == static_cast<ssize_t>(sizeof growth);
  ::close(fds[0]);
  int status = 0;
  EXPECT_EQ(::waitpid(pid, &status, 0), pid);
  *ok = got && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  return growth;
}

TEST(DataFileTooLarge, NamesTheFileTheBudgetItsSourceAndTheCure) {
  EXPECT_EQ(DataFileTooLarge("/x/train.txt.gz", "inflates to more than", Budget(8160000000)).message(),
            "data file /x/train.txt.gz: inflates to more than 7.6 GiB (8160000000 bytes), the memory this process "
            "may count on (consistency.memory_limit_bytes (--memory_limit)); give it more memory (--memory_limit) "
            "or split the file (docs/DATA.md)");
  // MemAvailable is the machine's: no flag raises it.
  const Status s = DataFileTooLarge("a.txt", "line 3 is longer than", Budget(1024, "MemAvailable in /proc/meminfo"),
                                    "stream it");
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "data file a.txt: line 3 is longer than 1.0 KiB (1024 bytes), the memory this process may count on "
            "(MemAvailable in /proc/meminfo); give it more memory or stream it");
}

TEST(ResolveReadBudget, KeepsAGivenBudgetElseTakesTheProcesss) {
  const MemoryBudget given = ResolveReadBudget(Budget(123));
  EXPECT_EQ(given.bytes, 123u);
  EXPECT_EQ(given.source, kFlagSource);
  EXPECT_EQ(ResolveReadBudget({}).source, MemoryBudgetFor(JobConfig()).source);
  EXPECT_EQ(ReadLimitBytes(MemoryBudget{}), UINT64_MAX);
  EXPECT_EQ(ReadLimitBytes(Budget(5)), 5u);
}

class GzipBomb : public ::testing::Test {
 protected:
  void SetUp() override { bomb_ = WriteBomb(dir_.File("train.txt.gz"), 64 * kMiB); }
  testing::ScopedTempDir dir_;
  std::string bomb_;
};

TEST_F(GzipBomb, IsRefusedUnderASmallBudgetNamingTheFile) {
  std::string raw;
  ASSERT_TRUE(ReadFileBytes(bomb_, &raw).ok());
  EXPECT_LT(raw.size(), 256 * 1024u);  // 64 MiB in about 130 KiB
  const StatusOr<Dataset> read = ReadDataset(bomb_, LibsvmOpts(16 * kMiB));
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), Status::Code::kInvalidArgument);  // bad input: exit 6, no restart
  EXPECT_EQ(read.status().message(), Refusal(bomb_, "inflates to more than", 16 * kMiB));
  // The same bytes given in memory are refused alike.
  EXPECT_EQ(ParseDataset(raw, bomb_, LibsvmOpts(16 * kMiB)).status().message(),
            Refusal(bomb_, "inflates to more than", 16 * kMiB));
}

TEST_F(GzipBomb, RefusalHoldsAboutTheBudgetNotTheInflatedFile) {
  bool refused = false;
  const uint64_t bounded = PeakGrowthOf(
      [this] {
        const StatusOr<Dataset> r = ReadDataset(bomb_, LibsvmOpts(16 * kMiB));
        return !r.ok() && r.status().code() == Status::Code::kInvalidArgument;
      },
      &refused);
  EXPECT_TRUE(refused);
  // About the 16 MiB buffer (17 MiB measured), never the 64 MiB file.
  EXPECT_LT(bounded, 32 * kMiB);
  // The measure sees a full inflation: 64 MiB, and more while it grows.
  bool inflated = false;
  const uint64_t whole = PeakGrowthOf(
      [this] {
        std::string raw, storage;
        if (!ReadFileBytes(bomb_, &raw).ok()) return false;
        const StatusOr<std::string_view> s = DecodeInput(bomb_, raw, &storage, Budget(256 * kMiB));
        return s.ok() && s->size() == 64 * kMiB;
      },
      &inflated);
  EXPECT_TRUE(inflated);
  EXPECT_GE(whole, 64 * kMiB);
}

TEST_F(GzipBomb, ReadsInFullUnderABudgetItFits) {
  const StatusOr<Dataset> read = ReadDataset(bomb_, LibsvmOpts(256 * kMiB));
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(read->rows_read, 65536);
  EXPECT_EQ(read->features.nnz(), 65536);
  EXPECT_EQ(read->features.cols, 1);
  EXPECT_EQ(read->targets, std::vector<float>(65536, 1.0f));
  EXPECT_EQ(read->source_lines.back(), 65536);
}

TEST_F(GzipBomb, StreamsUnderASmallBudgetHoldingOneBufferOfLines) {
  // A stream holds a block, never the file: a file larger than the budget
  // streams in full.
  ReadOptions opts = LibsvmOpts(16 * kMiB);
  StatusOr<std::vector<DataFile>> files = StatDataFiles({bomb_});
  ASSERT_TRUE(files.ok());
  RowStream stream(*files, AssignFilePieces(*files, 0, 1), opts, RowStreamOptions{});
  ASSERT_TRUE(stream.Start().ok());
  Dataset block;
  int64_t rows = 0;
  for (;;) {
    StatusOr<bool> more = stream.Next(&block);
    ASSERT_TRUE(more.ok()) << more.status().ToString();
    if (!*more) break;
    rows += block.features.rows;
  }
  EXPECT_EQ(rows, 65536);
  EXPECT_EQ(stream.peak_buffer_bytes(), 4 * kMiB);
}

TEST(ReadBudget, PlainFileLargerThanTheBudgetIsRefusedUnread) {
  testing::ScopedTempDir dir;
  const std::string path = dir.File("big.txt");
  std::ofstream(path) << std::string(2 * kMiB, '\n');
  std::string raw;
  const Status s = ReadFileBytes(path, &raw, Budget(kMiB));
  EXPECT_EQ(s.message(), Refusal(path, "is 2.0 MiB (2097152 bytes), more than", kMiB));
  EXPECT_TRUE(raw.empty());
  EXPECT_EQ(ReadDataset(path, LibsvmOpts(kMiB)).status().message(), s.message());
}

TEST(ReadBudget, TextThatFitsButParsesIntoMoreIsRefusedBeforeParsing) {
  // 65536 rows of 4 values in 1.1 MiB of text; the parse holds at least 48
  // bytes a row and 8 a value: 5.0 MiB more, past a 4 MiB budget.
  testing::ScopedTempDir dir;
  const std::string path = dir.File("short_rows.txt");
  std::string text;
  for (int i = 0; i < 65536; ++i) text += "1 1:1 2:1 3:1 4:1\n";
  std::ofstream(path) << text;
  ReadOptions opts = LibsvmOpts(4 * kMiB);
  opts.num_features = 4;
  EXPECT_EQ(ReadDataset(path, opts).status().message(),
            Refusal(path,
                    "its 1.1 MiB (1179648 bytes) of text parse into at least 5.0 MiB (5242880 bytes) more (65536 "
                    "rows, 262144 values and labels): together more than",
                    4 * kMiB));
  opts.memory_budget = Budget(7 * kMiB);
  const StatusOr<Dataset> fits = ReadDataset(path, opts);
  ASSERT_TRUE(fits.ok()) << fits.status().ToString();
  EXPECT_EQ(fits->features.nnz(), 262144);
}

TEST(ReadBudget, StreamRefusesALineLongerThanTheBudget) {
  testing::ScopedTempDir dir;
  const std::string path = WriteBomb(dir.File("line.txt.gz"), 64 * kMiB, /*newline=*/false, "1 1:1\n");
  StatusOr<std::vector<DataFile>> files = StatDataFiles({path});
  ASSERT_TRUE(files.ok());
  RowStream stream(*files, AssignFilePieces(*files, 0, 1), LibsvmOpts(16 * kMiB), RowStreamOptions{});
  ASSERT_TRUE(stream.Start().ok());
  Dataset block;
  const StatusOr<bool> more = stream.Next(&block);
  EXPECT_EQ(more.status().message(), Refusal(path, "line 2 is longer than", 16 * kMiB));
  EXPECT_EQ(stream.peak_buffer_bytes(), 16 * kMiB);
}

TEST(ReadBudget, ArffRefusesALineLongerThanTheBudget) {
  testing::ScopedTempDir dir;
  const std::string path = WriteBomb(dir.File("bomb.arff.gz"), 64 * kMiB, /*newline=*/false,
                                     "@relation r\n@attribute a numeric\n@attribute y {0,1}\n@data\n");
  ReadOptions o;
  o.format = DataFormat::kArff;
  o.num_labels = 1;
  o.memory_budget = Budget(16 * kMiB);
  EXPECT_EQ(ReadArffDataset(path, o).status().message(), Refusal(path, "line 5 is longer than", 16 * kMiB));
}

TEST(ReadBudget, FileListShareHeldWholeIsBoundedAcrossItsFiles) {
  testing::ScopedTempDir dir;
  const std::string a = WriteBomb(dir.File("part-1.txt.gz"), 12 * kMiB);
  const std::string b = WriteBomb(dir.File("part-2.txt.gz"), 12 * kMiB);
  const StatusOr<Dataset> read = ReadFileListShare(a + "," + b, "data.train_file", LibsvmOpts(16 * kMiB), 0, 1);
  EXPECT_EQ(read.status().message(),
            "data file " + b + ": the rows read whole from it and the 1 file piece read before it come to more "
            "than 16.0 MiB (16777216 bytes), the memory this process may count on (consistency.memory_limit_bytes "
            "(--memory_limit)); give it more memory (--memory_limit) or stream the files (data.streaming: true; "
            "docs/DATA.md)");
  const StatusOr<Dataset> fits = ReadFileListShare(a + "," + b, "data.train_file", LibsvmOpts(32 * kMiB), 0, 1);
  ASSERT_TRUE(fits.ok()) << fits.status().ToString();
  EXPECT_EQ(fits->features.rows, 2 * 12 * 1024);
}

}  // namespace
}  // namespace tether
