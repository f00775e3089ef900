// --metrics_sd_file: the Prometheus file_sd target file that names one
// process's /metrics endpoint, written once it serves and withdrawn when
// the process ends (docs/METRICS.md).
//
// It follows the output policy of core/output_target.h: a missing path or
// a regular file is written by temporary file and rename; a symbolic link
// is followed and its final target written, never the link; a directory,
// a socket, a block device, a character device or a FIFO is refused
// (Prometheus reads the file back, so a stream is no place for it); one of
// the run's inputs is refused.
//
// At the end the target is withdrawn: a regular file given as the path is
// removed; through a link, the link's target is replaced by an empty target
// list "[]" and the link kept. Prometheus keeps a file's last targets while
// it cannot read it, so a dangling link would keep the gone process
// scraped, and removing the link would remove what the user made.
//
// Ownership: none. Thread-safety: pure functions of the file system.
#pragma once

#include <string>
#include <vector>

#include "core/output_target.h"
#include "core/status.h"

namespace tether {

/// The start-up check of `path`: the policy above, its folder writable
/// (core/output_path.h CheckWritableFile), and none of `inputs`. Errors:
/// InvalidArgument "flag --metrics_sd_file=PATH: WHY".
[[nodiscard]] Status CheckSdFile(const std::string& path, const std::vector<NamedInput>& inputs);

/// Writes `contents` (the file_sd JSON) to `path` under the policy above,
/// atomically. Errors: CheckSdFile's; IOError naming the path.
[[nodiscard]] Status WriteSdFile(const std::string& path, const std::string& contents);

/// Withdraws the target written at `path` as described above; nothing
/// there: nothing done. Errors: InvalidArgument when something other than
/// a regular file or a link to one is there now (left as it is); IOError
/// when the removal or the write fails.
[[nodiscard]] Status WithdrawSdFile(const std::string& path);

}  // namespace tether
