#include "core/data_stamp.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <ctime>

namespace tether {
namespace {

std::string Utc(int64_t ns) {
  const time_t s = static_cast<time_t>(ns / 1000000000);
  struct tm tm {};
  gmtime_r(&s, &tm);
  char buf[48];
  std::snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%09" PRId64 "Z", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ns % 1000000000);
  return buf;
}

std::string Hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "%016" PRIx64, v);
  return buf;
}

// Reads up to `n` bytes at `offset` into `out` (appended).
bool ReadAt(int fd, uint64_t offset, uint64_t n, std::string* out) {
  const size_t start = out->size();
  out->resize(start + n);
  uint64_t got = 0;
  while (got < n) {
    const ssize_t r = pread(fd, &(*out)[start + got], n - got, static_cast<off_t>(offset + got));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += static_cast<uint64_t>(r);
  }
  out->resize(start + got);
  return got == n;
}

}  // namespace

StatusOr<DataFileStamp> StampDataFile(const std::string& path) {
  // O_NONBLOCK: opening a FIFO put in a data file's place returns at once
  // (refused below) instead of waiting for a writer; reads of a regular file
  // are not affected by it.
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) return Status::NotFound("data file " + path + ": no such file");
    return Status::IOError("data file " + path + ": cannot open: " + std::strerror(err));
  }
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    close(fd);
    return Status::IOError("data file " + path + ": cannot stat: " + std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return Status::IOError("data file " + path + (S_ISDIR(st.st_mode) ? ": is a directory" : ": is not a regular file") +
                           ", not the file that was read");
  }
  DataFileStamp s;
  s.path = path;
  s.bytes = static_cast<uint64_t>(st.st_size);
  s.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  std::string sample(reinterpret_cast<const char*>(&s.bytes), sizeof(s.bytes));
  const uint64_t head = std::min(s.bytes, kStampEndBytes);
  const uint64_t tail_at = std::max(head, s.bytes > kStampEndBytes ? s.bytes - kStampEndBytes : 0);
  const bool ok = ReadAt(fd, 0, head, &sample) && ReadAt(fd, tail_at, s.bytes - tail_at, &sample);
  close(fd);
  if (!ok) return Status::IOError("data file " + path + ": shorter than its size while it was read (it changed)");
  s.digest = XXH3_64bits(sample.data(), sample.size());
  return s;
}

std::string DataFileChange(const DataFileStamp& then, const DataFileStamp& now) {
  std::string parts;
  const auto add = [&parts](const std::string& p) { parts += (parts.empty() ? "" : ", ") + p; };
  if (then.bytes != now.bytes) add("size " + std::to_string(then.bytes) + " → " + std::to_string(now.bytes) + " bytes");
  if (then.mtime_ns != now.mtime_ns) add("modified " + Utc(then.mtime_ns) + " → " + Utc(now.mtime_ns));
  if (then.digest != now.digest) add("content digest " + Hex(then.digest) + " → " + Hex(now.digest));
  return parts.empty() ? "" : "data file " + then.path + " changed: " + parts;
}

Status CheckDataFilesUnchanged(const std::vector<DataFileStamp>& then, const std::string& what) {
  std::string changes;
  for (const DataFileStamp& t : then) {
    StatusOr<DataFileStamp> now = StampDataFile(t.path);
    const std::string change = now.ok() ? DataFileChange(t, *now) : now.status().message();
    if (!change.empty()) changes += (changes.empty() ? "" : "\n") + change;
  }
  if (changes.empty()) return Status::OK();
  return Status::FailedPrecondition(changes + " (" + what +
                                    "): rows are never trained from a file other than the one read; restore the "
                                    "file, or start a new job from it");
}

}  // namespace tether
