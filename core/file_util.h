// Atomic file replacement: a reader of `path` sees either the old file or the
// whole new one, never a torn write, even across a crash or power loss.
//
// The new contents go to a temporary file in the same directory (so the
// rename stays within one file system), which is flushed to disk (fsync)
// before it is renamed over `path`; the directory is then fsynced so the
// rename itself is durable. This is the sequence POSIX needs; rename alone
// can leave an empty file after a crash on ext4/xfs with delayed allocation.
//
// The path is resolved first under core/output_target.h: a symbolic link is
// followed and its target replaced (never the link), a directory, socket or
// block device is refused, and a character device or FIFO is refused or,
// where the caller allows it (StreamOutput::kWriteThrough), opened and
// written directly: such a write is not atomic. A FIFO is opened without
// waiting (O_NONBLOCK): one that no process reads yet is refused at once
// ("is a FIFO with no reader"), so start its reader first.
//
// Ownership: an AtomicFile owns its temporary file and removes it unless
// Commit() succeeded (also when it is destroyed before Commit()).
// Thread-safety: none; one writer per object. Different objects may write
// different paths at once; two writers of one path race only in which
// complete file wins.
#pragma once

#include <string>
#include <string_view>

#include "core/output_target.h"
#include "core/status.h"

namespace tether {

class AtomicFile {
 public:
  /// Creates a temporary file "PATH.tmp.PID.N" next to `path` (mode 0666
  /// less the umask, as for any new file), or next to the final target when
  /// `path` is a symbolic link; opens a character device or FIFO as it is
  /// under StreamOutput::kWriteThrough. Errors: IOError naming the temporary
  /// path (directory missing or not writable), or naming a FIFO that no
  /// process reads ("PATH: is a FIFO with no reader ..."; never waits for
  /// one); InvalidArgument "output=PATH:
  /// is a directory ..." (ResolveOutputTarget).
  static StatusOr<AtomicFile> Create(const std::string& path, StreamOutput streams = StreamOutput::kRefuse);

  AtomicFile(AtomicFile&& other) noexcept;
  AtomicFile& operator=(AtomicFile&&) = delete;
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  /// Removes the temporary file unless Commit() succeeded.
  ~AtomicFile();

  /// Appends `bytes` to the temporary file (unbuffered: callers that write
  /// many small pieces should batch them). Errors: IOError naming the
  /// temporary path (disk full, I/O error).
  Status Append(std::string_view bytes);

  /// fsyncs and closes the temporary file, renames it to `path`, and fsyncs
  /// the directory (a file written through is only closed). After an error the temporary file is removed and `path`
  /// is untouched. Call at most once. Errors: IOError naming the path.
  Status Commit();

  /// The file written: a link's target when a link was given.
  const std::string& path() const { return path_; }
  /// Keeps the temporary file when this object is destroyed uncommitted,
  /// as a killed process would (fault-injection tests, core/env.h).
  void LeaveTemporary() { leave_temporary_ = true; }

 private:
  AtomicFile(std::string path, std::string tmp_path, int fd);

  std::string path_, tmp_path_;  // tmp_path_ empty: written through
  int fd_ = -1;
  bool committed_ = false;
  bool leave_temporary_ = false;
};

/// Replaces `path` with `contents` through an AtomicFile (`streams` as for
/// AtomicFile::Create). Errors: IOError naming the path; InvalidArgument for
/// a path that is no regular file (ResolveOutputTarget).
Status WriteFileAtomically(const std::string& path, std::string_view contents,
                           StreamOutput streams = StreamOutput::kRefuse);

}  // namespace tether
