// What tells a data file's contents apart, cheaply enough to look again at
// every epoch and at every checkpoint: its size, its modification time and
// an XXH3-64 of its size, its first and its last 64 KiB. A file that is
// replaced, appended to, truncated or edited in place near either end shows
// in one of them (an edit in the middle of a large file that keeps its size
// and time does not: that is the price of not reading the file again).
//
// A running job stamps the files it trains on when it starts, and again at
// each epoch and before each checkpoint; a checkpoint records the stamps,
// and a resume compares them with the files it is given. Any difference is
// an error naming the file and what changed: rows are never trained from a
// file other than the one the job (or the checkpoint's row positions) read.
//
// Pure but for the file reads; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace tether {

struct DataFileStamp {
  std::string path;
  uint64_t bytes = 0;
  int64_t mtime_ns = 0;  // st_mtim, nanoseconds since the epoch
  uint64_t digest = 0;   // XXH3-64 of the size, the first and the last 64 KiB
};

/// Bytes read at each end for the digest.
inline constexpr uint64_t kStampEndBytes = 64u << 10;

/// The stamp of `path` now. Errors: NotFound / IOError naming the path.
StatusOr<DataFileStamp> StampDataFile(const std::string& path);

/// "" when `now` is `then`'s file unchanged; else what changed, naming the
/// file: "data file F changed: size 1000 → 1200 bytes, modified
/// 2026-12-02T07:00:00.000000000Z → ..., content digest ... → ..." (only the
/// parts that differ).
std::string DataFileChange(const DataFileStamp& then, const DataFileStamp& now);

/// Stamps every file of `paths`, then compares each with `then` (same
/// order): OK, or FailedPrecondition with every change, one per line, and
/// `what` ("while the job ran", "since checkpoint C") in the first.
Status CheckDataFilesUnchanged(const std::vector<DataFileStamp>& then, const std::string& what);

}  // namespace tether
