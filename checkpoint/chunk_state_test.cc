// The chunk-state file on its own: written, read back against its manifest
// entry, refused when it does not match. The conversion from the server's
// dealing objects is tested in server/coordinator/chunk_checkpoint_test.cc.
#include "checkpoint/chunk_state.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/testing/temp_dir.h"

namespace tether {
namespace {

TEST(ChunkStateTest, FileRoundTripChecksTheManifestEntry) {
  const std::string dir = ::testing::TempDir() + "/chunk_state_test_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  ChunkCoordinatorState s;
  s.set_format_version(kChunkStateFormatVersion);
  s.set_clock(120);
  s.set_train_rows(4880);
  s.add_epoch_rows(4880);
  CheckpointFile f;
  ASSERT_TRUE(WriteChunkState(FileSystem::Default(), dir, s, &f).ok());
  EXPECT_EQ(f.name(), kChunkStateName);
  CheckpointManifest m;
  m.set_clock(120);
  auto none = ReadChunkState(dir, m);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value()) << "no entry: a checkpoint without data on demand";
  *m.add_files() = f;
  auto back = ReadChunkState(dir, m);
  ASSERT_TRUE(back.ok()) << back.status().message();
  ASSERT_TRUE(back->has_value());
  EXPECT_EQ((*back)->SerializeAsString(), s.SerializeAsString());
  m.set_clock(121);
  EXPECT_EQ(ReadChunkState(dir, m).status().code(), Status::Code::kDataLoss);
  m.set_clock(120);
  {
    std::fstream io(dir + "/" + kChunkStateName, std::ios::in | std::ios::out | std::ios::binary);
    io.seekp(2);
    io.put('\x7f');
  }
  auto corrupt = ReadChunkState(dir, m);
  EXPECT_EQ(corrupt.status().code(), Status::Code::kDataLoss);
  EXPECT_NE(corrupt.status().message().find("checksum mismatch"), std::string::npos) << corrupt.status().message();
  std::filesystem::remove(dir + "/" + kChunkStateName);
  EXPECT_EQ(ReadChunkState(dir, m).status().code(), Status::Code::kNotFound);
  std::filesystem::remove_all(dir);
}

// A FIFO that no process writes (a blocking open() would never return) or a
// link to /dev/zero (never ends) in place of the chunk-state file the
// manifest lists: refused at once, naming it and what it is.
TEST(ChunkStateTest, AFifoOrADeviceInPlaceOfTheFileIsRefusedAtOnce) {
  testing::ScopedTempDir tmp;
  ChunkCoordinatorState s;
  s.set_format_version(kChunkStateFormatVersion);
  s.set_clock(120);
  CheckpointManifest m;
  m.set_clock(120);
  ASSERT_TRUE(WriteChunkState(FileSystem::Default(), tmp.path(), s, m.add_files()).ok());
  const std::string path = tmp.File(kChunkStateName);
  std::filesystem::remove(path);
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  const auto start = std::chrono::steady_clock::now();
  auto r = ReadChunkState(tmp.path(), m);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(r.status().message(), path + ": is a FIFO (named pipe), not a regular file");
  std::filesystem::remove(path);
  ASSERT_EQ(::symlink("/dev/zero", path.c_str()), 0);
  r = ReadChunkState(tmp.path(), m);
  EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(r.status().message(), path + ": is a character device, not a regular file");
}

}  // namespace
}  // namespace tether
