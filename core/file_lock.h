// One live writer per output: an advisory lock, flock(2) exclusive, on a
// small lock file, held for the writer's life. A second process that would
// write the same output is refused at once, naming the holder (its pid and
// host, which the holder writes into the lock file). The kernel releases
// the lock when the holder dies, however it dies, so a lock file left
// behind never blocks; its text is only a name for messages. The same idea
// as a checkpoint folder's LOCK (checkpoint/dir_lock.h), for outputs that
// are not checkpoints: a metrics folder and each process's file in it.
//
// flock(2) on NFS: see checkpoint/dir_lock.h (with the `nolock` mount
// option the lock is local to each host).
//
// Ownership: a FileLock owns its file descriptor (move-only; the lock is
// released when it is destroyed). The lock file is left in place: removing
// it would let a third process lock a new file of that name while a second
// still holds the old one. Thread-safety: one object is not shared between
// threads; distinct objects are independent (a flock lock belongs to an
// open file, so two objects in one process on one path conflict as two
// processes would).
#pragma once

#include <string>

#include "core/status.h"

namespace tether {

class FileLock {
 public:
  FileLock() = default;
  FileLock(FileLock&& other) noexcept;
  FileLock& operator=(FileLock&& other) noexcept;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  ~FileLock();

  /// Takes the lock on `path` without waiting (LOCK_EX | LOCK_NB), creating
  /// the file (mode 0644 less the umask; its folder must exist) when
  /// missing, and writes "pid P on host H" into it. `what` names the output
  /// for messages ("train.metrics_dir (--metrics_dir)=md"); `fix` says what
  /// to do instead. The descriptor is close-on-exec: a process this one
  /// starts never inherits (and so keeps) the lock.
  /// Errors: FailedPrecondition "WHAT: in use by a live job (pid P on host
  /// H, holding PATH): FIX (a lock of a process that died is released with
  /// it)" when another open file holds it; InvalidArgument "PATH: is a FIFO
  /// (named pipe), not a regular file" (opened without blocking, never
  /// read); IOError naming the path when it cannot be created or opened.
  static StatusOr<FileLock> Acquire(const std::string& path, const std::string& what, const std::string& fix);

  /// Whether Acquire would succeed now, without keeping the lock or
  /// creating anything: OK also when `path` does not exist. Errors:
  /// Acquire's FailedPrecondition and InvalidArgument.
  static Status Probe(const std::string& path, const std::string& what, const std::string& fix);

  bool held() const { return fd_ >= 0; }
  const std::string& path() const { return path_; }

 private:
  FileLock(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  int fd_ = -1;
  std::string path_;
};

/// The pieces FileLock is made of, shared with the other advisory locks
/// (checkpoint/dir_lock.h). Pure functions of a path or a descriptor;
/// thread-safe.
namespace lock_file {

/// open(2) of a lock file with O_NONBLOCK (a FIFO put in its place would
/// hold an open until some process wrote it), close-on-exec. -1 and errno
/// as open's.
int Open(const std::string& path, int flags);

/// OK when `fd` is a regular file; else closes `fd` and returns
/// InvalidArgument "PATH: is a FIFO (named pipe), not a regular file" (a
/// device, a directory, ...), or IOError "PATH: cannot stat NAME: REASON"
/// (`name`: "the lock file", ...).
Status CheckRegular(const std::string& path, int fd, const std::string& name);

/// flock(fd, op | LOCK_NB) (op: LOCK_EX or LOCK_SH), retried on EINTR: 1
/// taken, 0 held by another open file, -1 another error (errno).
int TryLock(int fd, int op);

/// The holder as it wrote itself into the lock file ("pid P on host H"),
/// or a plain phrase when it wrote nothing yet.
std::string HolderOf(int fd);

/// Writes "pid P on host H" into the lock file `fd` (at `path`, for the
/// warning): for messages only, so a failed write is logged and the lock
/// stays as good.
void WriteHolder(int fd, const std::string& path);

}  // namespace lock_file

}  // namespace tether
