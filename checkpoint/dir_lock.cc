#include "checkpoint/dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

#include <glog/logging.h>

#include "checkpoint/checkpoint.h"
#include "core/file_lock.h"

namespace tether {
namespace {

std::string LockPath(const std::string& dir) { return CheckpointJoinPath(dir, kCheckpointLockName); }

Status InUse(const std::string& dir, int fd, CheckpointDirLock::Mode mode) {
  return Status::FailedPrecondition(
      "checkpoint folder " + dir + " is in use by a live job (" + lock_file::HolderOf(fd) + ", holding " +
      LockPath(dir) + "): " +
      (mode == CheckpointDirLock::Mode::kWrite
           ? "a job that writes checkpoints needs the folder to itself; give it its own --checkpoint_dir"
           : "a resume reads a folder no live job writes; wait for that job to end, or resume from a copy") +
      " (a lock of a process that died is released with it)");
}

// The name is read from the file, and a lock on anything but a regular
// file (a FIFO, a device, a directory) keeps no job out.
Status CheckLockFile(const std::string& path, int fd) {
  return lock_file::CheckRegular(path, fd, "the checkpoint folder's lock file");
}

int TryLock(int fd, CheckpointDirLock::Mode mode) {
  return lock_file::TryLock(fd, mode == CheckpointDirLock::Mode::kWrite ? LOCK_EX : LOCK_SH);
}

}  // namespace

CheckpointDirLock::CheckpointDirLock(CheckpointDirLock&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), dir_(std::move(other.dir_)) {}

CheckpointDirLock& CheckpointDirLock::operator=(CheckpointDirLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    dir_ = std::move(other.dir_);
  }
  return *this;
}

CheckpointDirLock::~CheckpointDirLock() {
  if (fd_ >= 0) close(fd_);  // closing the last descriptor of the open file releases the lock
}

StatusOr<CheckpointDirLock> CheckpointDirLock::Acquire(const std::string& dir, Mode mode) {
  std::error_code ec;
  if (mode == Mode::kWrite) std::filesystem::create_directories(dir, ec);
  if (ec) return Status::IOError("checkpoint folder " + dir + ": cannot be created: " + ec.message());
  const std::string path = LockPath(dir);
  // O_CLOEXEC: a process this one starts must not inherit (and so keep) the lock.
  int fd = lock_file::Open(path, O_RDWR | O_CREAT);
  if (fd < 0 && mode == Mode::kRead && (errno == EACCES || errno == EROFS || errno == EPERM)) {
    // A folder this process may only read (a read-only copy of
    // checkpoints): it locks the LOCK file a writer left, if any; without
    // one, no job of this user writes there, and there is nothing to hold.
    fd = lock_file::Open(path, O_RDONLY);
    if (fd < 0) return CheckpointDirLock();
  }
  if (fd < 0) return Status::IOError(path + ": cannot open the checkpoint folder's lock file: " + std::strerror(errno));
  TETHER_RETURN_IF_ERROR(CheckLockFile(path, fd));
  const int got = TryLock(fd, mode);
  if (got != 1) {
    const int e = errno;
    Status st = got == 0 ? InUse(dir, fd, mode) : Status::IOError(path + ": flock: " + std::strerror(e));
    close(fd);
    return st;
  }
  if (mode == Mode::kRead && fcntl(fd, F_GETFL) >= 0 && (fcntl(fd, F_GETFL) & O_ACCMODE) == O_RDONLY)
    return CheckpointDirLock(fd, dir);  // held, but not ours to name
  lock_file::WriteHolder(fd, path);
  return CheckpointDirLock(fd, dir);
}

Status CheckpointDirLock::Probe(const std::string& dir, Mode mode) {
  const std::string path = LockPath(dir);
  const int fd = lock_file::Open(path, O_RDONLY);
  if (fd < 0) return Status::OK();  // no lock file: no job has held the folder
  TETHER_RETURN_IF_ERROR(CheckLockFile(path, fd));
  const int got = TryLock(fd, mode);
  Status st = got == 0 ? InUse(dir, fd, mode) : Status::OK();
  close(fd);
  return st;
}

std::string CheckpointDirLock::LiveWriter(const std::string& dir) {
  const std::string path = LockPath(dir);
  const int fd = lock_file::Open(path, O_RDONLY);
  if (fd < 0) return "";
  if (!CheckLockFile(path, fd).ok()) return "";  // closed by the check; no lock on it keeps a job out
  // A shared lock is refused only while some open file holds it exclusively: a writer.
  const std::string holder = TryLock(fd, Mode::kRead) == 0 ? lock_file::HolderOf(fd) : "";
  close(fd);
  return holder;
}

std::string ResumeFolder(const std::string& resume_from) {
  std::error_code ec;
  if (!std::filesystem::exists(CheckpointJoinPath(resume_from, kManifestName), ec)) return resume_from;
  std::filesystem::path p = std::filesystem::path(resume_from).lexically_normal();
  if (!p.has_filename()) p = p.parent_path();  // "ck/ckpt-x/" names ckpt-x
  std::string parent = p.parent_path().string();
  while (parent.size() > 1 && parent.back() == '/') parent.pop_back();
  return parent.empty() ? "." : parent;
}

}  // namespace tether
