#include "core/file_util.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <utility>

#include "core/process_limits.h"

namespace tether {
namespace {

Status ErrnoError(const std::string& what, const std::string& path) {
  const int err = errno;
  // A write past RLIMIT_FSIZE fails with EFBIG (SIGXFSZ is ignored,
  // cli/flag_parser.cc): say which limit, not only "File too large".
  return Status::IOError(path + ": cannot " + what + ": " + std::strerror(err) +
                         (err == EFBIG ? FileSizeLimitNote() : std::string()));
}

// The directory part of `path` ("." for a bare file name), to fsync after the
// rename and to put the temporary file next to the target.
std::string DirName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// Opens a character device or FIFO for writing without waiting. A FIFO's
// blocking open() waits for a reader and no stop request can end that wait,
// so it is opened with O_NONBLOCK: with no reader it fails at once (ENXIO)
// and is refused. O_NONBLOCK is then cleared, so that a write to a full pipe
// waits for the reader as any pipe writer does.
// A descriptor of this process (/dev/stdout on a pipe) is duplicated, not
// reopened: a socket cannot be opened by name, and a pipe whose reader went
// away would fail differently from a write to it.
StatusOr<int> OpenWriteThrough(const OutputTarget& target) {
  const std::string& path = target.path;
  if (target.fd >= 0) {
    const int dup = ::fcntl(target.fd, F_DUPFD_CLOEXEC, 0);
    if (dup < 0) return ErrnoError("duplicate the descriptor", path);
    return dup;
  }
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0 && errno == ENXIO)
    return Status::IOError(path + ": is a FIFO with no reader (opened with O_NONBLOCK, so as not to wait for one): "
                           "start the reader first, or give a regular file");
  if (fd < 0) return ErrnoError("open for writing", path);
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
    Status st = ErrnoError("clear O_NONBLOCK on", path);
    ::close(fd);
    return st;
  }
  return fd;
}

}  // namespace

StatusOr<AtomicFile> AtomicFile::Create(const std::string& path, StreamOutput streams) {
  TETHER_ASSIGN_OR_RETURN(const OutputTarget target, ResolveOutputTarget(path, "output", streams));
  if (target.write_through) {
    TETHER_ASSIGN_OR_RETURN(const int fd, OpenWriteThrough(target));
    return AtomicFile(target.path, "", fd);
  }
  // Not mkstemp: it creates mode 0600, and changing that needs the umask,
  // which cannot be read without a race against other threads. O_EXCL with a
  // name unique to this process and call gives the same safety, and open()
  // applies the umask to 0666 as for any other file.
  static std::atomic<uint64_t> counter{0};
  for (int attempt = 0;; ++attempt) {
    const std::string tmp = target.path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0) return AtomicFile(target.path, tmp, fd);
    if (errno != EEXIST || attempt >= 100) return ErrnoError("create a temporary file", tmp);
  }
}

AtomicFile::AtomicFile(std::string path, std::string tmp_path, int fd)
    : path_(std::move(path)), tmp_path_(std::move(tmp_path)), fd_(fd) {}

AtomicFile::AtomicFile(AtomicFile&& other) noexcept
    : path_(std::move(other.path_)),
      tmp_path_(std::move(other.tmp_path_)),
      fd_(std::exchange(other.fd_, -1)),
      committed_(std::exchange(other.committed_, true)) {}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !leave_temporary_ && !tmp_path_.empty()) ::unlink(tmp_path_.c_str());
}

Status AtomicFile::Append(std::string_view bytes) {
  const std::string& written = tmp_path_.empty() ? path_ : tmp_path_;
  if (fd_ < 0) return Status::IOError(written + ": write after Commit");
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd_, bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError("write", written);
    }
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return Status::OK();
}

Status AtomicFile::Commit() {
  if (fd_ < 0) return Status::IOError(path_ + ": Commit called twice");
  const int fd = std::exchange(fd_, -1);
  if (tmp_path_.empty()) {  // written through: a device or pipe has nothing to fsync or rename
    committed_ = true;
    return ::close(fd) == 0 ? Status::OK() : ErrnoError("close", path_);
  }
  if (::fsync(fd) != 0) {
    Status st = ErrnoError("fsync", tmp_path_);
    ::close(fd);
    return st;
  }
  if (::close(fd) != 0) return ErrnoError("close", tmp_path_);
  if (std::rename(tmp_path_.c_str(), path_.c_str()) != 0) return ErrnoError("rename " + tmp_path_ + " onto", path_);
  committed_ = true;
  // The rename is durable only once the directory entry is on disk.
  const std::string dir = DirName(path_);
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) return ErrnoError("open the directory of", path_);
  const bool synced = ::fsync(dir_fd) == 0;
  Status st = synced ? Status::OK() : ErrnoError("fsync the directory of", path_);
  ::close(dir_fd);
  return st;
}

Status WriteFileAtomically(const std::string& path, std::string_view contents, StreamOutput streams) {
  TETHER_ASSIGN_OR_RETURN(AtomicFile file, AtomicFile::Create(path, streams));
  TETHER_RETURN_IF_ERROR(file.Append(contents));
  return file.Commit();
}

}  // namespace tether
