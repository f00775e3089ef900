// Residual files (checkpoint/residual_file.h): written and read back
// exactly; a truncated, corrupt, replaced or damaged file is refused naming
// the file; residuals of a table the job does not have, of another width or
// kind, or with keys past num_keys are refused naming the table.
#include "checkpoint/residual_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "checkpoint/checked_file.h"
#include "checkpoint/checkpoint.h"

namespace tether {
namespace {

class ResidualFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/residual_file_test_" + std::to_string(::getpid());
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  static std::vector<ResidualTable> Sample() {
    ResidualTable rows;
    rows.table = "w";
    rows.dim = 3;
    rows.keys = {9, 2, 5};  // least recently pushed first
    rows.values = {0.5f, -0.25f, 1e-3f, 0, 0, 0, -7.0f, 3.0e-8f, 0.125f};
    rows.evicted = 4;
    rows.evicted_l1 = 1.5;
    ResidualTable dense;
    dense.table = "b";
    dense.dense = true;
    dense.values = {1.0f, -2.0f};
    return {rows, dense};
  }
  static std::vector<TableSpec> Specs() {
    TableSpec w;
    w.set_name("w");
    w.set_kind(TableSpec::ROW);
    w.set_dim(3);
    w.set_num_keys(10);
    TableSpec b;
    b.set_name("b");
    b.set_kind(TableSpec::DENSE);
    b.set_size(2);
    return {w, b};
  }
  std::string Path() const { return dir_ + "/" + ResidualFileName(0); }
  // Writes Sample() and returns its record.
  CheckpointFile Write() {
    CheckpointFile f;
    const Status st = WriteResidualFile(FileSystem::Default(), dir_, 0, Sample(), &f);
    EXPECT_TRUE(st.ok()) << st.message();
    return f;
  }
  // Rewrites the file as `bytes` and returns the record a state would hold
  // for it (so only the format checks can refuse it).
  CheckpointFile Replace(const std::string& bytes) {
    std::ofstream(Path(), std::ios::binary | std::ios::trunc) << bytes;
    CheckpointFile f;
    f.set_name(ResidualFileName(0));
    f.set_bytes(bytes.size());
    f.set_xxh3(checkpoint_internal::ChecksumOf(bytes.data(), bytes.size()));
    return f;
  }
  std::string Bytes() const {
    std::ifstream in(Path(), std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  std::string dir_;
};

TEST_F(ResidualFileTest, RoundTripIsExact) {
  const CheckpointFile f = Write();
  EXPECT_EQ(f.name(), "worker-0.residuals");
  // 16 header bytes; "w": 4 + 1 + 1 + 4 + 8 + 8 + 8, 3 keys, 9 floats;
  // "b": 4 + 1 + 1 + 4 + 8 + 8 + 8, 2 floats.
  EXPECT_EQ(f.bytes(), 16u + (34 + 24 + 36) + (34 + 8));
  auto back = ReadResidualFile(dir_, f);
  ASSERT_TRUE(back.ok()) << back.status().message();
  const std::vector<ResidualTable> want = Sample();
  ASSERT_EQ(back->size(), 2u);
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ((*back)[i].table, want[i].table);
    EXPECT_EQ((*back)[i].dense, want[i].dense);
    EXPECT_EQ((*back)[i].dim, want[i].dim);
    EXPECT_EQ((*back)[i].keys, want[i].keys);
    EXPECT_EQ((*back)[i].values, want[i].values);
    EXPECT_EQ((*back)[i].evicted, want[i].evicted);
    EXPECT_EQ((*back)[i].evicted_l1, want[i].evicted_l1);
  }
  EXPECT_EQ(DiffResidualTables(*back, Specs(), Path()), "");
}

TEST_F(ResidualFileTest, TruncatedFileIsRefusedNamingIt) {
  const CheckpointFile f = Write();
  std::filesystem::resize_file(Path(), f.bytes() - 5);
  auto r = ReadResidualFile(dir_, f);
  ASSERT_EQ(r.status().code(), Status::Code::kDataLoss);
  EXPECT_EQ(r.status().message(), Path() + ": " + std::to_string(f.bytes() - 5) +
                                      " bytes on disk, but the worker's state file says " + std::to_string(f.bytes()) +
                                      " (a truncated or replaced file)");
}

TEST_F(ResidualFileTest, CorruptFileIsRefusedNamingIt) {
  const CheckpointFile f = Write();
  {
    std::fstream io(Path(), std::ios::in | std::ios::out | std::ios::binary);
    io.seekp(static_cast<std::streamoff>(f.bytes() - 3));
    io.put('\x7f');
  }
  auto r = ReadResidualFile(dir_, f);
  ASSERT_EQ(r.status().code(), Status::Code::kDataLoss);
  EXPECT_EQ(r.status().message().rfind(Path() + ": checksum mismatch: XXH3-64 ", 0), 0u) << r.status().message();
  EXPECT_NE(r.status().message().find("(the file is corrupt)"), std::string::npos);
  std::filesystem::remove(Path());
  auto missing = ReadResidualFile(dir_, f);
  EXPECT_EQ(missing.status().code(), Status::Code::kNotFound);
  EXPECT_EQ(missing.status().message(), Path() + ": missing, but the worker's state file lists it");
}

// A FIFO that no process writes (a blocking open() would never return) or a
// link to /dev/zero (never ends) in place of the residual file a state
// lists: refused at once, naming it and what it is.
TEST_F(ResidualFileTest, AFifoOrADeviceInPlaceOfTheFileIsRefusedAtOnce) {
  const CheckpointFile f = Write();
  std::filesystem::remove(Path());
  ASSERT_EQ(::mkfifo(Path().c_str(), 0600), 0);
  const auto start = std::chrono::steady_clock::now();
  auto r = ReadResidualFile(dir_, f);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(r.status().message(), Path() + ": is a FIFO (named pipe), not a regular file");
  std::filesystem::remove(Path());
  ASSERT_EQ(::symlink("/dev/zero", Path().c_str()), 0);
  r = ReadResidualFile(dir_, f);
  EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(r.status().message(), Path() + ": is a character device, not a regular file");
}

TEST_F(ResidualFileTest, DamagedContentsAreRefusedEvenWithAMatchingRecord) {
  Write();
  const std::string good = Bytes();
  // Another file under the name.
  auto foreign = ReadResidualFile(dir_, Replace("TTHRCKPT" + good.substr(8)));
  EXPECT_EQ(foreign.status().message(), Path() + ": not a residual file (no TTHRRESD header)");
  // Another format version.
  std::string v2 = good;
  v2[8] = 2;
  EXPECT_EQ(ReadResidualFile(dir_, Replace(v2)).status().message(),
            Path() + ": format version 2; this build reads version 1");
  // Cut inside the first table's values: its count claims more than is left.
  auto cut = ReadResidualFile(dir_, Replace(good.substr(0, 16 + 34 + 24 + 20)));
  EXPECT_EQ(cut.status().code(), Status::Code::kDataLoss);
  EXPECT_EQ(cut.status().message().rfind(Path() + ": table 'w': 3 rows of 20 bytes, but ", 0), 0u)
      << cut.status().message();
  // Bytes after the last table.
  EXPECT_EQ(ReadResidualFile(dir_, Replace(good + "xy")).status().message(),
            Path() + ": 2 bytes after the last of its 2 tables");
  // A count near 2^64 is refused before anything is allocated.
  std::string huge = good;
  const uint64_t big = ~uint64_t{0} / 2;
  std::memcpy(&huge[16 + 4 + 1 + 1 + 4], &big, sizeof(big));
  auto h = ReadResidualFile(dir_, Replace(huge));
  EXPECT_EQ(h.status().code(), Status::Code::kDataLoss);
  EXPECT_NE(h.status().message().find("table 'w': " + std::to_string(big) + " rows"), std::string::npos)
      << h.status().message();
}

TEST_F(ResidualFileTest, ResidualsThatDoNotFitTheJobAreRefused) {
  std::vector<ResidualTable> r = Sample();
  std::vector<TableSpec> specs = Specs();
  specs[0].set_name("w1");
  EXPECT_EQ(DiffResidualTables(r, specs, "F"),
            "F: residuals of table 'w', which the job does not have (its tables: w1, b)");
  specs = Specs();
  specs[0].set_dim(4);
  EXPECT_EQ(DiffResidualTables(r, specs, "F"), "F: residuals of table 'w': rows of 3 floats, but the table's dim is 4");
  specs = Specs();
  specs[1].set_size(3);
  EXPECT_EQ(DiffResidualTables(r, specs, "F"), "F: residuals of table 'b': 2 floats, but the table has 3");
  specs = Specs();
  specs[0].set_num_keys(6);
  EXPECT_EQ(DiffResidualTables(r, specs, "F"), "F: residuals of table 'w': key 9 is past the table's num_keys 6");
  specs = Specs();
  specs[1].set_kind(TableSpec::ROW);
  specs[1].set_dim(2);
  EXPECT_EQ(DiffResidualTables(r, specs, "F"),
            "F: residuals of table 'b': a dense table's, but the job's table is a row table");
}

// A resume's line says what it restored and what it skipped, and why: a
// table pushed in fp32 now keeps none of its rows.
TEST_F(ResidualFileTest, TheRestoreLineCountsOnlyWhatWasRestored) {
  const std::vector<ResidualTable> r = Sample();
  std::vector<TableSpec> specs = Specs();
  specs[0].set_push_wire(BF16);
  specs[1].set_push_wire(BF16);
  EXPECT_EQ(DescribeResidualRestore("F", r, {}, specs), "error-feedback residuals restored from F: 2 table(s), 3 row(s)");
  specs[0].set_push_wire(FP32);
  EXPECT_EQ(DescribeResidualRestore("F", r, {"w"}, specs),
            "error-feedback residuals restored from F: 1 table(s), 0 row(s); not restored: table w (3 rows: pushed in "
            "fp32 now)");
  specs[1].set_push_wire(FP32);
  EXPECT_EQ(DescribeResidualRestore("F", r, {"w", "b"}, specs),
            "error-feedback residuals in F not restored: table w (3 rows: pushed in fp32 now), table b (dense: "
            "pushed in fp32 now)");
  specs[0].set_push_wire(FP16);
  EXPECT_EQ(DescribeResidualRestore("F", {r[0]}, {"w"}, specs),
            "error-feedback residuals in F not restored: table w (3 rows: error feedback off)");
}

TEST_F(ResidualFileTest, InconsistentTablesAreNotWritten) {
  std::vector<ResidualTable> r = Sample();
  r[0].values.pop_back();
  EXPECT_EQ(WriteResidualFile(FileSystem::Default(), dir_, 0, r, nullptr).code(), Status::Code::kInvalidArgument);
  EXPECT_FALSE(std::filesystem::exists(Path()));
}

// A worker that left: its state is copied into each later checkpoint, and
// the residual file it names with it.
TEST_F(ResidualFileTest, CopyWorkerFilesBringsTheResidualFile) {
  WorkerState state;
  state.set_rank(0);
  state.set_clock(12);
  *state.mutable_residual_file() = Write();
  CheckpointFile state_file;
  ASSERT_TRUE(WriteWorkerState(FileSystem::Default(), dir_, state, &state_file).ok());
  const std::string to = dir_ + "/later";
  const Status st = CopyWorkerFiles(FileSystem::Default(), dir_, to, state_file);
  ASSERT_TRUE(st.ok()) << st.message();
  auto back = ReadResidualFile(to, state.residual_file());
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ((*back)[0].keys, Sample()[0].keys);
  EXPECT_TRUE(std::filesystem::exists(to + "/worker-0.state"));
  // A corrupt residual file is not copied on.
  std::filesystem::remove_all(to);
  std::filesystem::resize_file(Path(), state.residual_file().bytes() - 1);
  EXPECT_EQ(CopyWorkerFiles(FileSystem::Default(), dir_, to, state_file).code(), Status::Code::kDataLoss);
  EXPECT_FALSE(std::filesystem::exists(to + "/worker-0.state"));
}

}  // namespace
}  // namespace tether
