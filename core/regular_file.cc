#include "core/regular_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace tether {
namespace {

// "WHAT PATH", or "PATH" when `what` is empty.
std::string Named(const std::string& path, const std::string& what) {
  return what.empty() ? path : what + " " + path;
}

Status OpenError(const std::string& path, const std::string& what, const std::string& step, int err) {
  if (err == ENOENT) return Status::NotFound(Named(path, what) + ": no such file");
  if (err == ENOTDIR) return Status::NotFound(Named(path, what) + ": a folder on the way is not a directory");
  return Status::IOError(Named(path, what) + ": cannot " + step + ": " + std::strerror(err));
}

Status TooLarge(const std::string& path, const std::string& what, const std::string& size, uint64_t max_bytes) {
  return Status::InvalidArgument(Named(path, what) + ": is " + size + ", more than the " +
                                 std::to_string(max_bytes) + "-byte limit" + (what.empty() ? "" : " for a " + what));
}

}  // namespace

std::string FileKindOf(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISBLK(mode)) return "a block device";
  return "not a regular file";
}

StatusOr<RegularFile> OpenRegularFile(const std::string& path, const std::string& what) {
  // O_NONBLOCK: opening a FIFO returns at once instead of waiting for a
  // writer; the FIFO is then refused below like any other non-regular file.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return OpenError(path, what, "open it", errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return OpenError(path, what, "stat it", err);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::InvalidArgument(Named(path, what) + ": is " + FileKindOf(st.st_mode) + ", not a regular file");
  }
  // Reads of a regular file never block on O_NONBLOCK, but a caller that
  // hands the descriptor on should get an ordinary one.
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
    const int err = errno;
    ::close(fd);
    return OpenError(path, what, "clear O_NONBLOCK on it", err);
  }
  return RegularFile{fd, static_cast<uint64_t>(st.st_size)};
}

StatusOr<std::string> ReadOpenedFile(const RegularFile& file, uint64_t max_bytes, const std::string& path,
                                     const std::string& what) {
  if (file.bytes > max_bytes) {
    ::close(file.fd);
    return TooLarge(path, what, std::to_string(file.bytes) + " bytes", max_bytes);
  }
  // Read one byte past the bound: a file that grew since fstat is refused
  // rather than cut short.
  std::string text(static_cast<size_t>(file.bytes) + 1, '\0');
  size_t got = 0;
  while (true) {
    if (got == text.size()) {
      if (got > max_bytes) break;
      text.resize(std::min<uint64_t>(text.size() * 2, max_bytes + 1));
    }
    const ssize_t n = ::pread(file.fd, &text[got], text.size() - got, static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(file.fd);
      return OpenError(path, what, "read it", err);
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(file.fd);
  if (got > max_bytes) return TooLarge(path, what, "more than " + std::to_string(max_bytes) + " bytes", max_bytes);
  text.resize(got);
  return text;
}

StatusOr<std::string> ReadRegularFile(const std::string& path, uint64_t max_bytes, const std::string& what) {
  TETHER_ASSIGN_OR_RETURN(const RegularFile file, OpenRegularFile(path, what));
  return ReadOpenedFile(file, max_bytes, path, what);
}

Status CheckRegularFile(const std::string& path, const std::string& what) {
  TETHER_ASSIGN_OR_RETURN(const RegularFile file, OpenRegularFile(path, what));
  ::close(file.fd);
  return Status::OK();
}

}  // namespace tether
