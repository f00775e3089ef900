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
#include "core/regular_file.h"

namespace tether {
namespace {

std::string LockPath(const std::string& dir) { return CheckpointJoinPath(dir, kCheckpointLockName); }

// The holder as it wrote itself into the lock file, or a plain word when
// it wrote nothing yet (it is between its flock and its write).
std::string HolderOf(int fd) {
  char buf[256] = {};
  const ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
  std::string text = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text.empty() ? "a process that has not written its name yet" : text;
}

Status InUse(const std::string& dir, int fd, CheckpointDirLock::Mode mode) {
  return Status::FailedPrecondition(
      "checkpoint folder " + dir + " is in use by a live job (" + HolderOf(fd) + ", holding " + LockPath(dir) + "): " +
      (mode == CheckpointDirLock::Mode::kWrite
           ? "a job that writes checkpoints needs the folder to itself; give it its own --checkpoint_dir"
           : "a resume reads a folder no live job writes; wait for that job to end, or resume from a copy") +
      " (a lock of a process that died is released with it)");
}

// open(2) of the LOCK file with O_NONBLOCK: a FIFO put there would hold a
// read-only open until some process wrote it. -1 and errno as open's.
int OpenLockFile(const std::string& path, int flags) {
  return open(path.c_str(), flags | O_CLOEXEC | O_NONBLOCK, 0644);
}

// OK when `fd` is a regular file; else closes it and names what is at
// `path` (a FIFO, a device, a directory): the holder's name is read from
// the file, and a lock on anything else keeps no job out.
Status CheckLockFile(const std::string& path, int fd) {
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    close(fd);
    return Status::IOError(path + ": cannot stat the checkpoint folder's lock file: " + std::strerror(err));
  }
  if (S_ISREG(st.st_mode)) return Status::OK();
  close(fd);
  return Status::InvalidArgument(path + ": is " + FileKindOf(st.st_mode) + ", not a regular file");
}

// flock(fd) without waiting: 1 taken, 0 held by another open file, -1 error (errno).
int TryLock(int fd, CheckpointDirLock::Mode mode) {
  const int op = (mode == CheckpointDirLock::Mode::kWrite ? LOCK_EX : LOCK_SH) | LOCK_NB;
  while (flock(fd, op) != 0) {
    if (errno == EINTR) continue;
    return errno == EWOULDBLOCK ? 0 : -1;
  }
  return 1;
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
  int fd = OpenLockFile(path, O_RDWR | O_CREAT);
  if (fd < 0 && mode == Mode::kRead && (errno == EACCES || errno == EROFS || errno == EPERM)) {
    // A folder this process may only read (a read-only copy of
    // checkpoints): it locks the LOCK file a writer left, if any; without
    // one, no job of this user writes there, and there is nothing to hold.
    fd = OpenLockFile(path, O_RDONLY);
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
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) std::strcpy(host, "?");
  const std::string me = "pid " + std::to_string(getpid()) + " on host " + host + "\n";
  // The name is for messages only: a failed write leaves the lock as good.
  if (ftruncate(fd, 0) != 0 || pwrite(fd, me.data(), me.size(), 0) != static_cast<ssize_t>(me.size()))
    LOG(WARNING) << path << ": cannot write this process's name into the lock file: " << std::strerror(errno);
  return CheckpointDirLock(fd, dir);
}

Status CheckpointDirLock::Probe(const std::string& dir, Mode mode) {
  const std::string path = LockPath(dir);
  const int fd = OpenLockFile(path, O_RDONLY);
  if (fd < 0) return Status::OK();  // no lock file: no job has held the folder
  TETHER_RETURN_IF_ERROR(CheckLockFile(path, fd));
  const int got = TryLock(fd, mode);
  Status st = got == 0 ? InUse(dir, fd, mode) : Status::OK();
  close(fd);
  return st;
}

std::string CheckpointDirLock::LiveWriter(const std::string& dir) {
  const std::string path = LockPath(dir);
  const int fd = OpenLockFile(path, O_RDONLY);
  if (fd < 0) return "";
  if (!CheckLockFile(path, fd).ok()) return "";  // closed by the check; no lock on it keeps a job out
  // A shared lock is refused only while some open file holds it exclusively: a writer.
  const std::string holder = TryLock(fd, Mode::kRead) == 0 ? HolderOf(fd) : "";
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
