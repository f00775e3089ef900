// One live job per checkpoint folder. The process that writes a job's
// checkpoints (worker 0: it writes the MANIFEST and prunes old checkpoints;
// the servers write where its CHECKPOINT says) holds an advisory lock,
// flock(2) on the file LOCK in the folder, for the job's life: exclusive on
// checkpoint.dir, shared on the folder it resumes from when that is
// another, so two jobs may resume from one folder while neither writes it.
// A second job whose worker 0 would write to, or resume from, a folder a
// live job holds is refused at once, naming the folder and the holder (its
// pid and host, which the holder writes into LOCK). The kernel releases the
// lock when the holder dies, however it dies, so a LOCK file left behind
// never blocks; its text is only a name for messages.
//
// flock(2) on NFS: Linux clients since 2.6.12 take it as a whole-file POSIX
// lock, which the server sees from every client (NFSv4, or NFSv3 with the
// lock manager); with the `nolock` mount option it is local to each host
// and does not keep jobs on two hosts apart. docs/CHECKPOINTS.md says so.
//
// Ownership: a CheckpointDirLock owns its file descriptor (move-only; the
// lock is released when it is destroyed). Thread-safety: one object is not
// shared between threads; distinct objects are independent (flock locks
// belong to an open file, so two objects in one process on one folder
// conflict as two processes would).
#pragma once

#include <string>

#include "core/status.h"

namespace tether {

/// The lock file's name in a checkpoint folder.
inline constexpr char kCheckpointLockName[] = "LOCK";

class CheckpointDirLock {
 public:
  enum class Mode {
    kWrite,  // exclusive: the job writes and prunes checkpoints here
    kRead,   // shared: the job resumes from a checkpoint here
  };

  CheckpointDirLock() = default;
  CheckpointDirLock(CheckpointDirLock&& other) noexcept;
  CheckpointDirLock& operator=(CheckpointDirLock&& other) noexcept;
  CheckpointDirLock(const CheckpointDirLock&) = delete;
  CheckpointDirLock& operator=(const CheckpointDirLock&) = delete;
  ~CheckpointDirLock();

  /// Takes the lock on folder `dir` without waiting (LOCK_NB), creating
  /// `dir` (kWrite) and its LOCK file when missing, and writes "pid P on
  /// host H" into it. kRead on a folder this process may not write takes
  /// the LOCK file that is there, or holds nothing (held() false) when
  /// there is none. Errors: FailedPrecondition "checkpoint folder DIR is
  /// in use by a live job (pid P on host H): ..." when another open file
  /// holds a conflicting lock; InvalidArgument "DIR/LOCK: is a FIFO (named
  /// pipe), not a regular file" (a device, a directory: opened without
  /// blocking, never read); IOError naming the path for a folder or file
  /// that cannot be created or opened.
  static StatusOr<CheckpointDirLock> Acquire(const std::string& dir, Mode mode);

  /// Whether Acquire(dir, mode) would succeed now, without keeping the lock
  /// (the launcher's check before it starts any process): OK, also for a
  /// folder or LOCK file that does not exist (nothing is created); else
  /// Acquire's FailedPrecondition or InvalidArgument.
  static Status Probe(const std::string& dir, Mode mode);

  /// The live job that writes (and prunes) folder `dir`, as it named
  /// itself in the LOCK file ("pid P on host H"), or "" when no process
  /// holds the folder for writing (no LOCK file, or one nobody holds
  /// exclusively). Creates nothing; takes no lock it keeps.
  static std::string LiveWriter(const std::string& dir);

  bool held() const { return fd_ >= 0; }
  const std::string& dir() const { return dir_; }

 private:
  CheckpointDirLock(int fd, std::string dir) : fd_(fd), dir_(std::move(dir)) {}
  int fd_ = -1;
  std::string dir_;
};

/// The folder a resume reads from: `resume_from` itself when it is a folder
/// of checkpoints, else its parent (resume_from names one checkpoint).
std::string ResumeFolder(const std::string& resume_from);

}  // namespace tether
