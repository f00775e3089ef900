// Reading data files, plain or gzip: the one place that opens a data file,
// tells gzip by its magic bytes (1f 8b, never by the name) and inflates it,
// with one set of error codes for every reader (text readers in reader.h,
// MNIST IDX in idx_reader.h):
//   NotFound    "PATH: no such file"
//   IOError     "PATH: cannot open: REASON", "PATH: is a directory",
//               "PATH: read failed: REASON"
//   DataLoss    a truncated or corrupt gzip stream, or non-gzip bytes after
//               its end (never handed to a parser as content)
//   InvalidArgument  content that would inflate past the caller's limit, or
//               a file larger than the memory the process may count on
//               (input/read_budget.h: "data file PATH: inflates to more
//               than ...")
//   Internal    zlib could not start or ran out of memory
//
// Pure functions of their inputs (and the file system); thread-safe.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <cstdio>
#include <string_view>

#include "core/memory_fit.h"
#include "core/status.h"

namespace tether {

/// Opens the data file `path` for reading, refusing without waiting
/// anything that is not a regular file (core/regular_file.h): a FIFO is not
/// waited on, /dev/zero is not read until memory runs out. The caller
/// fcloses the result. Errors: NotFound "PATH: no such file"; IOError
/// "PATH: is a FIFO (named pipe), not a regular file" (also a character
/// device, a directory, a socket, a block device), or another open failure.
StatusOr<FILE*> OpenDataFile(const std::string& path);

/// Reads the regular file at `path` whole, as raw bytes (no decompression),
/// into *out, refusing a file larger than `budget` (ResolveReadBudget: bytes
/// 0, the default, is the process's own) before reading it. Errors: as for
/// OpenDataFile; IOError for a failed read; InvalidArgument "data file PATH:
/// is N, more than BUDGET, the memory this process may count on (...); ..."
/// (input/read_budget.h).
Status ReadFileBytes(const std::string& path, std::string* out, const MemoryBudget& budget = {});

/// True when `bytes` start with the gzip magic bytes 1f 8b.
bool IsGzip(std::string_view bytes);

/// Inflates gzip bytes held in memory into *out. Concatenated members (what
/// `cat a.gz b.gz` makes, and what gzread accepts) are read one after
/// another. `name` stands for the file in messages. Errors: DataLoss
/// "NAME: truncated gzip stream (it ends after N bytes)", "NAME: corrupt gzip
/// stream: ZLIB MESSAGE", "NAME: N bytes of non-gzip data after the end of
/// the gzip stream"; InvalidArgument "NAME: inflates to more than
/// MAX_BYTES bytes" when the output would exceed `max_bytes`; Internal.
/// On error *out is empty.
Status Gunzip(const std::string& name, std::string_view raw, std::string* out,
              uint64_t max_bytes = std::numeric_limits<uint64_t>::max());

/// The content of a file's bytes: `raw` itself, or (IsGzip) its inflation
/// into *storage, which then owns the bytes the view points at. Inflation
/// stops as soon as it passes `budget` (ResolveReadBudget: bytes 0, the
/// default, is the process's own), holding at most that much. Errors: those
/// of Gunzip, with the limit's InvalidArgument "data file NAME: inflates to
/// more than BUDGET, the memory this process may count on (SOURCE); ..."
/// (input/read_budget.h).
StatusOr<std::string_view> DecodeInput(const std::string& name, std::string_view raw, std::string* storage,
                                       const MemoryBudget& budget = {});

}  // namespace tether
