// What a writer may do with an existing path it is told to write: the one
// policy every output of Tether follows (metrics JSON, predictions, models,
// checkpoint files, port and service-discovery files, generated data).
//
//  - A missing path, or a regular file, is written by temporary file and
//    rename in its folder (core/file_util.h AtomicFile).
//  - A symbolic link is followed (to any depth, relative links against the
//    link's folder) and its final target is written the same way: the link
//    itself is never replaced. A dangling link names the file to create.
//  - A character device or a FIFO (/dev/null, /dev/stdout on a terminal or
//    a pipe, a named pipe) is never replaced: it is written through (opened
//    and written directly) where the output allows it (StreamOutput), and
//    refused otherwise.
//  - /dev/stdout, /dev/stderr, /dev/fd/N and /proc/self/fd/N name this
//    process's open descriptor: a pipe, socket or terminal there is written
//    through that descriptor (a duplicate of it) under kWriteThrough, never
//    looked up as a path; a regular file there is followed to its path and
//    written as any regular file.
//  - A directory, a block device, or a socket not reached through an open
//    descriptor, is refused.
//  - An output that is one of the run's inputs (same device and inode after
//    following links, so a hard link or a link counts) is refused; an input
//    that is a folder (a checkpoint) stands for every file under it.
//
// Ownership: none; the functions read their arguments and the file system.
// Thread-safety: safe from any thread (they only lstat, stat, statfs and
// readlink).
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace tether {

/// Whether an output may be a character device or a FIFO, written through.
enum class StreamOutput {
  kRefuse,        // only a regular file (or a new one) is a valid output
  kWriteThrough,  // a character device or FIFO is opened and written directly
};

/// Where and how an output is written.
struct OutputTarget {
  std::string path;            // the file written: the link's final target when a link was given
  bool write_through = false;  // true: a character device, FIFO or socket, written as it is
  int fd = -1;                 // >= 0: written through a duplicate of this open descriptor of the process
  bool exists = false;         // something is at `path` now
};

/// Resolves `path` for writing under the policy above. `source` names the
/// flag or field in messages ("flag --metrics_out"). Errors:
/// InvalidArgument "SOURCE=PATH: is a directory ..." (also a socket not
/// open in this process, a block device, a character device or FIFO under
/// kRefuse, a link loop, an unreadable link).
[[nodiscard]] StatusOr<OutputTarget> ResolveOutputTarget(const std::string& path, const std::string& source,
                                                         StreamOutput streams);

/// One input of a run, named for messages: {"flag --config", "job.pbtxt"}.
/// A folder ({"flag --checkpoint", "ck"}) stands for every file under it,
/// at any depth.
struct NamedInput {
  std::string source;
  std::string path;
};

/// Refuses an output that is one of `inputs`: the same file (device and
/// inode, links followed), however it is named, or any file under an input
/// that is a folder. Inputs that do not exist and an output that does not
/// exist never match. Errors: InvalidArgument "SOURCE=PATH is the same file
/// as INPUT_SOURCE=INPUT_PATH: ..." (a folder: "... is the same file as
/// FILE, under INPUT_SOURCE=DIR: ...").
[[nodiscard]] Status CheckOutputNotInput(const std::string& path, const std::string& source,
                                         const std::vector<NamedInput>& inputs);

}  // namespace tether
