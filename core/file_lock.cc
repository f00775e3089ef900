#include "core/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include <glog/logging.h>

#include "core/regular_file.h"

namespace tether {
namespace {

// The holder as it wrote itself into the lock file, or a plain word when
// it wrote nothing yet (it is between its flock and its write).
std::string HolderOf(int fd) {
  char buf[256] = {};
  const ssize_t n = ::pread(fd, buf, sizeof(buf) - 1, 0);
  std::string text = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text.empty() ? "a process that has not written its name yet" : text;
}

Status InUse(const std::string& path, int fd, const std::string& what, const std::string& fix) {
  return Status::FailedPrecondition(what + ": in use by a live job (" + HolderOf(fd) + ", holding " + path + "): " +
                                    fix + " (a lock of a process that died is released with it)");
}

// open(2) with O_NONBLOCK: a FIFO put in the lock file's place would hold
// an open until some process wrote it. -1 and errno as open's.
int OpenLockFile(const std::string& path, int flags) {
  return ::open(path.c_str(), flags | O_CLOEXEC | O_NONBLOCK | O_NOCTTY, 0644);
}

// OK when `fd` is a regular file; else closes it and names what is there.
Status CheckLockFile(const std::string& path, int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return Status::IOError(path + ": cannot stat the lock file: " + std::strerror(err));
  }
  if (S_ISREG(st.st_mode)) return Status::OK();
  ::close(fd);
  return Status::InvalidArgument(path + ": is " + FileKindOf(st.st_mode) + ", not a regular file");
}

// flock(fd) without waiting: 1 taken, 0 held by another open file, -1 error (errno).
int TryLock(int fd) {
  while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EINTR) continue;
    return errno == EWOULDBLOCK ? 0 : -1;
  }
  return 1;
}

}  // namespace

FileLock::FileLock(FileLock&& other) noexcept : fd_(std::exchange(other.fd_, -1)), path_(std::move(other.path_)) {}

FileLock& FileLock::operator=(FileLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
  }
  return *this;
}

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the last descriptor of the open file releases the lock
}

StatusOr<FileLock> FileLock::Acquire(const std::string& path, const std::string& what, const std::string& fix) {
  const int fd = OpenLockFile(path, O_RDWR | O_CREAT);
  if (fd < 0) return Status::IOError(path + ": cannot open the lock file: " + std::strerror(errno));
  TETHER_RETURN_IF_ERROR(CheckLockFile(path, fd));
  const int got = TryLock(fd);
  if (got != 1) {
    const int e = errno;
    Status st = got == 0 ? InUse(path, fd, what, fix) : Status::IOError(path + ": flock: " + std::strerror(e));
    ::close(fd);
    return st;
  }
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) std::strcpy(host, "?");
  const std::string me = "pid " + std::to_string(::getpid()) + " on host " + host + "\n";
  // The name is for messages only: a failed write leaves the lock as good.
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, me.data(), me.size(), 0) != static_cast<ssize_t>(me.size()))
    LOG(WARNING) << path << ": cannot write this process's name into the lock file: " << std::strerror(errno);
  return FileLock(fd, path);
}

Status FileLock::Probe(const std::string& path, const std::string& what, const std::string& fix) {
  const int fd = OpenLockFile(path, O_RDONLY);
  if (fd < 0) return Status::OK();  // no lock file: no process has held it
  TETHER_RETURN_IF_ERROR(CheckLockFile(path, fd));
  Status st = TryLock(fd) == 0 ? InUse(path, fd, what, fix) : Status::OK();
  ::close(fd);
  return st;
}

}  // namespace tether
