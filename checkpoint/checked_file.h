// The checked file I/O every checkpoint file goes through: writes that keep
// a file's size and XXH3-64 as they append, reads that check both against
// the file's manifest entry and name the file in every error. Internal to
// checkpoint/ (checkpoint.cc, chunk_state.cc, shard_file.cc); the format of
// each file is said in the header of the code that writes it.
//
// Thread-safety: each object is used by one thread; different objects are
// independent.
#pragma once

#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>

#include <unistd.h>

#include "checkpoint/checkpoint.h"
#include "core/env.h"
#include "core/regular_file.h"
#include "core/status.h"
#include "proto/checkpoint.pb.h"

namespace tether {
namespace checkpoint_internal {

// Reads and writes go in pieces of this size (the rows of a shard file are
// read this many bytes at a time).
inline constexpr size_t kChunkBytes = size_t{8} << 20;

// XXH3-64 of `n` bytes at `p`.
uint64_t ChecksumOf(const void* p, size_t n);

// XXH3-64 (xxHash) over a stream: a checksum at memory speed (tens of GB/s
// with SSE2/AVX2), so checking a checkpoint costs little beside its I/O;
// zlib's CRC-32 ran at a fraction of the disk's write speed.
class Checksum {
 public:
  Checksum() : state_(XXH3_createState()) { XXH3_64bits_reset(state_); }
  ~Checksum() { XXH3_freeState(state_); }
  Checksum(const Checksum&) = delete;
  Checksum& operator=(const Checksum&) = delete;
  void Update(const void* p, size_t n) { XXH3_64bits_update(state_, p, n); }
  uint64_t Digest() const { return XXH3_64bits_digest(state_); }

 private:
  XXH3_state_t* state_;
};

// Appends through a WritableFile in large pieces, keeping size and CRC.
class CheckedWriter {
 public:
  explicit CheckedWriter(WritableFile* f) : f_(f) {}
  Status Append(const void* p, size_t n) {
    const char* c = static_cast<const char*>(p);
    while (n > 0) {
      const size_t step = std::min(n, kChunkBytes);
      TETHER_RETURN_IF_ERROR(f_->Append(std::string_view(c, step)));
      sum_.Update(c, step);
      bytes_ += step;
      c += step;
      n -= step;
    }
    return Status::OK();
  }
  uint64_t bytes() const { return bytes_; }
  uint64_t checksum() const { return sum_.Digest(); }

 private:
  WritableFile* f_;
  uint64_t bytes_ = 0;
  Checksum sum_;
};

// Reads a file in order, keeping size and CRC; errors name the file.
class CheckedReader {
 public:
  // `expected`: the file's manifest entry (name, bytes, xxh3); it must
  // outlive the reader.
  CheckedReader(std::string path, const CheckpointFile& expected) : path_(std::move(path)), expected_(expected) {}
  ~CheckedReader() {
    if (f_ != nullptr) std::fclose(f_);
  }
  CheckedReader(const CheckedReader&) = delete;
  CheckedReader& operator=(const CheckedReader&) = delete;
  // The file opens without blocking, is a regular file and its size on
  // disk is the manifest's: a FIFO or a device in its place (refused
  // naming what it is, InvalidArgument), or a truncated or replaced file,
  // is refused before a byte of it is read. Call once, before Read.
  Status Open() {
    StatusOr<RegularFile> file = OpenRegularFile(path_, "");
    if (file.status().code() == Status::Code::kNotFound)
      return Status::NotFound(path_ + ": cannot open: " + std::strerror(ENOENT));
    if (!file.ok()) return file.status();
    if (file->bytes != expected_.bytes()) {
      ::close(file->fd);
      return SizeMismatch(file->bytes);
    }
    f_ = ::fdopen(file->fd, "rb");
    if (f_ == nullptr) {
      const int err = errno;
      ::close(file->fd);
      return Status::IOError(path_ + ": cannot open: " + std::strerror(err));
    }
    return Status::OK();
  }
  Status Read(void* p, size_t n, const char* what) {
    const size_t got = std::fread(p, 1, n, f_);
    if (got != n)
      return Status::DataLoss(path_ + ": truncated: the file ends inside " + what + " (at byte " +
                              std::to_string(bytes_ + got) + ", " + std::to_string(bytes_ + n) +
                              " expected); the manifest says the file has " + std::to_string(expected_.bytes()) +
                              " bytes");
    sum_.Update(p, n);
    bytes_ += n;
    return Status::OK();
  }
  // Reads to the end (the checksum covers the whole file), at most one
  // piece past the manifest's size: a file that grows without end (written
  // to while it is read) is never read whole.
  Status Finish() {
    char buf[4096];
    size_t n;
    while (bytes_ <= expected_.bytes() && (n = std::fread(buf, 1, sizeof(buf), f_)) > 0) {
      sum_.Update(buf, n);
      bytes_ += n;
    }
    if (std::ferror(f_)) return Status::IOError(path_ + ": read error");
    return Status::OK();
  }
  // After Finish: the file against its manifest entry.
  Status Check() const {
    if (bytes_ != expected_.bytes()) return SizeMismatch(bytes_);
    if (sum_.Digest() != expected_.xxh3())
      return Status::DataLoss(path_ + ": checksum mismatch: XXH3-64 " + ChecksumHex(sum_.Digest()) + ", the manifest says " +
                              ChecksumHex(expected_.xxh3()) + " (the file is corrupt)");
    return Status::OK();
  }
  const std::string& path() const { return path_; }

 private:
  Status SizeMismatch(uint64_t on_disk) const {
    return Status::DataLoss(path_ + ": " + std::to_string(on_disk) + " bytes on disk, but the manifest says " +
                            std::to_string(expected_.bytes()) + " (a truncated or replaced file)");
  }

  std::string path_;
  const CheckpointFile& expected_;
  FILE* f_ = nullptr;
  uint64_t bytes_ = 0;
  Checksum sum_;
};

// The manifest's entry named `name`, or nullptr.
const CheckpointFile* FindFile(const CheckpointManifest& m, const std::string& name);

// Writes `bytes` to `path` atomically (AtomicFile); when `written` is not
// null it gets `name`, the size and the checksum. Errors: IOError.
Status WriteSmallFile(FileSystem* fs, const std::string& path, const std::string& bytes, CheckpointFile* written,
                      const std::string& name);

}  // namespace checkpoint_internal
}  // namespace tether
