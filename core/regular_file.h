// Reading a file named by a user or a peer without ever blocking on it and
// without reading more than a bound.
//
// A path given on the command line, in a config or by a peer (a rendezvous
// entry) may name anything: a FIFO with no writer, whose open() waits
// forever and cannot be interrupted by a stop request; a character device
// such as /dev/zero that never ends; or a huge file. Every such read goes
// through OpenRegularFile / ReadRegularFile: the path is opened with
// O_NONBLOCK (a FIFO's open returns at once), fstat'ed, and anything that is
// not a regular file is refused by name before a byte is read. The check is
// made on the descriptor that is then read, so the file cannot be swapped in
// between.
//
// Ownership: OpenRegularFile hands the caller a descriptor to close.
// Thread-safety: safe from any thread (no shared state).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "core/status.h"

namespace tether {

/// What is at `mode`, in words ("a FIFO (named pipe)", "a character
/// device", "a directory", ...), for messages.
std::string FileKindOf(mode_t mode);

/// A descriptor of a regular file opened for reading, blocking reads
/// restored, and its size when it was opened.
struct RegularFile {
  int fd = -1;
  uint64_t bytes = 0;
};

/// Opens `path` for reading without blocking. `what` names the file in
/// messages ("config file", "flagfile"; empty: the path alone). Errors, each naming the path:
/// NotFound "WHAT PATH: no such file"; InvalidArgument "WHAT PATH: is a FIFO
/// (named pipe), not a regular file" (also a character device, a directory,
/// a socket, a block device); IOError for any other failure (permission).
[[nodiscard]] StatusOr<RegularFile> OpenRegularFile(const std::string& path, const std::string& what);

/// The whole of the regular file `path`, at most `max_bytes` of it: a
/// larger file (also one that grows past the bound while it is read) is
/// refused with InvalidArgument "WHAT PATH: is N bytes, more than the
/// MAX-byte limit for a WHAT". Other errors as for OpenRegularFile.
[[nodiscard]] StatusOr<std::string> ReadRegularFile(const std::string& path, uint64_t max_bytes,
                                                    const std::string& what);

/// Reads the descriptor of `file` (from OpenRegularFile) from its start to
/// its end, at most `max_bytes`, and closes it whatever the outcome: for a
/// reader that checks `file.bytes` against its own bound first (a size a
/// manifest lists, a memory budget) with its own message. `path` and `what`
/// name the file in errors, as ReadRegularFile's: InvalidArgument "WHAT
/// PATH: is N bytes, more than the MAX-byte limit ..." when `file.bytes` is
/// past the bound, "... is more than MAX bytes, ..." when the file grew
/// past it while it was read; IOError for a failed read.
[[nodiscard]] StatusOr<std::string> ReadOpenedFile(const RegularFile& file, uint64_t max_bytes,
                                                   const std::string& path, const std::string& what);

/// OK when `path` is a regular file that can be opened for reading (the
/// descriptor is closed again): for readers that open the file themselves
/// afterwards. Errors as for OpenRegularFile.
[[nodiscard]] Status CheckRegularFile(const std::string& path, const std::string& what);

}  // namespace tether
