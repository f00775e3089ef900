#include "input/file_input.h"

#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "core/regular_file.h"
#include "input/read_budget.h"

namespace tether {
namespace {

// The first buffer: small files need no second allocation.
constexpr size_t kMinReadBytes = size_t{64} << 10;

}  // namespace

StatusOr<FILE*> OpenDataFile(const std::string& path) {
  StatusOr<RegularFile> file = OpenRegularFile(path, "");
  // A FIFO, a device or a directory is an error in the data, as a missing
  // file is: IOError, the code data errors have (docs/ERRORS.md).
  if (!file.ok() && file.status().code() == Status::Code::kInvalidArgument)
    return Status::IOError(file.status().message());
  if (!file.ok()) return file.status();
  FILE* f = ::fdopen(file->fd, "rb");
  if (f == nullptr) {
    const int err = errno;
    ::close(file->fd);
    return Status::IOError(path + ": cannot open: " + std::strerror(err));
  }
  return f;
}

Status ReadFileBytes(const std::string& path, std::string* out, const MemoryBudget& budget) {
  out->clear();
  TETHER_ASSIGN_OR_RETURN(FILE* f, OpenDataFile(path));
  std::unique_ptr<FILE, int (*)(FILE*)> closer(f, &std::fclose);
  struct stat st {};
  if (fstat(fileno(f), &st) != 0) return Status::IOError(path + ": cannot stat: " + std::strerror(errno));
  const MemoryBudget bound = ResolveReadBudget(budget);
  const uint64_t limit = ReadLimitBytes(bound);
  auto too_large = [&](uint64_t bytes) {
    out->clear();
    return DataFileTooLarge(path, "is " + FormatBytes(bytes) + ", more than", bound);
  };
  if (static_cast<uint64_t>(st.st_size) > limit) return too_large(static_cast<uint64_t>(st.st_size));
  // st_size + 1 lets one fread reach EOF; the loop still copes with a file
  // that grows while it is read.
  out->resize(std::max(kMinReadBytes, static_cast<size_t>(st.st_size) + 1));
  size_t len = 0;
  for (;;) {
    if (len == out->size()) out->resize(out->size() * 2);
    const size_t n = std::fread(&(*out)[len], 1, out->size() - len, f);
    len += n;
    if (len > limit) return too_large(len);  // it grew while read
    if (n == 0) break;
  }
  out->resize(len);
  if (std::ferror(f)) return Status::IOError(path + ": read failed: " + std::strerror(errno));
  return Status::OK();
}

bool IsGzip(std::string_view raw) {
  return raw.size() >= 2 && static_cast<unsigned char>(raw[0]) == 0x1f &&
         static_cast<unsigned char>(raw[1]) == 0x8b;
}

namespace {

// Gunzip, with *over set when the output passed max_bytes (then the
// InvalidArgument), so that callers can name the limit their own way.
Status GunzipUpTo(const std::string& name, std::string_view raw, std::string* out, uint64_t max_bytes, bool* over) {
  *over = false;
  out->clear();
  z_stream zs{};
  // 16 + MAX_WBITS: gzip wrapper only (not raw deflate, not zlib).
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) {
    return Status::Internal(name + ": cannot initialise zlib");
  }
  std::unique_ptr<z_stream, int (*)(z_stream*)> ender(&zs, &inflateEnd);
  // Text compresses about 4-10x; start there and double.
  out->resize(static_cast<size_t>(std::min<uint64_t>(max_bytes, std::max(kMinReadBytes, raw.size() * 4))));
  size_t in_pos = 0, len = 0;
  constexpr size_t kChunk = size_t{1} << 30;  // avail_in/out are 32-bit
  for (;;) {
    if (len == out->size()) {
      if (len >= max_bytes) {
        out->clear();
        *over = true;
        return Status::InvalidArgument(name + ": inflates to more than " + std::to_string(max_bytes) + " bytes");
      }
      out->resize(static_cast<size_t>(std::min<uint64_t>(max_bytes, uint64_t{out->size()} * 2)));
    }
    const size_t in_n = std::min(raw.size() - in_pos, kChunk);
    const size_t out_n = std::min(out->size() - len, kChunk);
    zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(raw.data() + in_pos));
    zs.avail_in = static_cast<uInt>(in_n);
    zs.next_out = reinterpret_cast<Bytef*>(&(*out)[len]);
    zs.avail_out = static_cast<uInt>(out_n);
    const int rc = inflate(&zs, Z_NO_FLUSH);
    in_pos += in_n - zs.avail_in;
    len += out_n - zs.avail_out;
    if (rc == Z_STREAM_END) {
      if (in_pos == raw.size()) break;
      if (!IsGzip(raw.substr(in_pos))) {
        out->clear();
        return Status::DataLoss(name + ": " + std::to_string(raw.size() - in_pos) +
                                " bytes of non-gzip data after the end of the gzip stream");
      }
      inflateReset(&zs);
      continue;
    }
    if (rc == Z_OK || (rc == Z_BUF_ERROR && zs.avail_out == 0)) continue;  // grow, go on
    out->clear();
    if (rc == Z_BUF_ERROR) {
      return Status::DataLoss(name + ": truncated gzip stream (it ends after " +
                              std::to_string(raw.size()) + " bytes)");
    }
    if (rc == Z_MEM_ERROR) return Status::Internal(name + ": out of memory inflating gzip");
    return Status::DataLoss(name + ": corrupt gzip stream" +
                            (zs.msg != nullptr ? std::string(": ") + zs.msg : std::string()));
  }
  out->resize(len);
  return Status::OK();
}

}  // namespace

Status Gunzip(const std::string& name, std::string_view raw, std::string* out, uint64_t max_bytes) {
  bool over = false;
  return GunzipUpTo(name, raw, out, max_bytes, &over);
}

StatusOr<std::string_view> DecodeInput(const std::string& name, std::string_view raw, std::string* storage,
                                       const MemoryBudget& budget) {
  if (!IsGzip(raw)) return raw;
  const MemoryBudget bound = ResolveReadBudget(budget);
  bool over = false;
  const Status inflated = GunzipUpTo(name, raw, storage, ReadLimitBytes(bound), &over);
  if (over) return DataFileTooLarge(name, "inflates to more than", bound);
  TETHER_RETURN_IF_ERROR(inflated);
  return std::string_view(*storage);
}

}  // namespace tether
