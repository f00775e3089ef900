// The file operations that durable state (checkpoints) goes through, behind
// an interface, in the manner of leveldb's Env: production code uses
// FileSystem::Default() (AtomicFile: temporary name, fsync, rename, fsync of
// the directory); tests inject FaultInjectingFileSystem to kill a writer
// after exactly N bytes, at chosen points rather than by timing.
//
// Ownership: Default() is a process-wide singleton, never freed. A
// WritableFile is owned by its caller. Thread-safety: Default() and its
// files are as thread-safe as the POSIX calls beneath (distinct files from
// distinct threads are fine); FaultInjectingFileSystem is not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "core/status.h"

namespace tether {

/// A file that appears under its final name only once Commit() succeeded.
class WritableFile {
 public:
  virtual ~WritableFile() = default;
  /// Appends bytes (unbuffered: batch small pieces). Errors: IOError naming
  /// the file.
  virtual Status Append(std::string_view bytes) = 0;
  /// Makes the file durable and visible under its name (fsync, rename,
  /// fsync of the directory). Errors: IOError naming the file.
  virtual Status Commit() = 0;
};

class FileSystem {
 public:
  virtual ~FileSystem() = default;
  /// A new file to become `path` on Commit (core/file_util.h AtomicFile).
  virtual StatusOr<std::unique_ptr<WritableFile>> NewAtomicFile(const std::string& path) = 0;
  /// mkdir -p. Errors: IOError naming the directory.
  virtual Status CreateDirs(const std::string& path) = 0;
  /// rm -r (no error when absent). Errors: IOError naming what was left.
  virtual Status RemoveAll(const std::string& path) = 0;

  /// The real file system.
  static FileSystem* Default();
};

/// Passes everything to `base` until `budget` bytes have been appended over
/// all files; the Append that crosses the budget writes the bytes that fit
/// and then the file system is dead: that call and every later call fail
/// with IOError "injected fault after N bytes", and no file is committed,
/// removed or cleaned up (temporary files stay, as after a SIGKILL).
class FaultInjectingFileSystem : public FileSystem {
 public:
  FaultInjectingFileSystem(FileSystem* base, uint64_t budget) : base_(base), budget_(budget) {}
  StatusOr<std::unique_ptr<WritableFile>> NewAtomicFile(const std::string& path) override;
  Status CreateDirs(const std::string& path) override;
  Status RemoveAll(const std::string& path) override;

  bool dead() const { return dead_; }
  /// Bytes appended so far (all files).
  uint64_t written() const { return written_; }

 private:
  class File;
  Status Dead() const;
  FileSystem* base_;
  uint64_t budget_;
  uint64_t written_ = 0;
  bool dead_ = false;
};

}  // namespace tether
