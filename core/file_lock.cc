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

Status InUse(const std::string& path, int fd, const std::string& what, const std::string& fix) {
  return Status::FailedPrecondition(what + ": in use by a live job (" + lock_file::HolderOf(fd) + ", holding " +
                                    path + "): " + fix + " (a lock of a process that died is released with it)");
}

}  // namespace

namespace lock_file {

std::string HolderOf(int fd) {
  char buf[256] = {};
  const ssize_t n = ::pread(fd, buf, sizeof(buf) - 1, 0);
  std::string text = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text.empty() ? "a process that has not written its name yet" : text;
}

int Open(const std::string& path, int flags) {
  return ::open(path.c_str(), flags | O_CLOEXEC | O_NONBLOCK | O_NOCTTY, 0644);
}

Status CheckRegular(const std::string& path, int fd, const std::string& name) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return Status::IOError(path + ": cannot stat " + name + ": " + std::strerror(err));
  }
  if (S_ISREG(st.st_mode)) return Status::OK();
  ::close(fd);
  return Status::InvalidArgument(path + ": is " + FileKindOf(st.st_mode) + ", not a regular file");
}

int TryLock(int fd, int op) {
  while (::flock(fd, op | LOCK_NB) != 0) {
    if (errno == EINTR) continue;
    return errno == EWOULDBLOCK ? 0 : -1;
  }
  return 1;
}

void WriteHolder(int fd, const std::string& path) {
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) std::strcpy(host, "?");
  const std::string me = "pid " + std::to_string(::getpid()) + " on host " + host + "\n";
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, me.data(), me.size(), 0) != static_cast<ssize_t>(me.size()))
    LOG(WARNING) << path << ": cannot write this process's name into the lock file: " << std::strerror(errno);
}

}  // namespace lock_file

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
  const int fd = lock_file::Open(path, O_RDWR | O_CREAT);
  if (fd < 0) return Status::IOError(path + ": cannot open the lock file: " + std::strerror(errno));
  TETHER_RETURN_IF_ERROR(lock_file::CheckRegular(path, fd, "the lock file"));
  const int got = lock_file::TryLock(fd, LOCK_EX);
  if (got != 1) {
    const int e = errno;
    Status st = got == 0 ? InUse(path, fd, what, fix) : Status::IOError(path + ": flock: " + std::strerror(e));
    ::close(fd);
    return st;
  }
  lock_file::WriteHolder(fd, path);
  return FileLock(fd, path);
}

Status FileLock::Probe(const std::string& path, const std::string& what, const std::string& fix) {
  const int fd = lock_file::Open(path, O_RDONLY);
  if (fd < 0) return Status::OK();  // no lock file: no process has held it
  TETHER_RETURN_IF_ERROR(lock_file::CheckRegular(path, fd, "the lock file"));
  Status st = lock_file::TryLock(fd, LOCK_EX) == 0 ? InUse(path, fd, what, fix) : Status::OK();
  ::close(fd);
  return st;
}

}  // namespace tether
