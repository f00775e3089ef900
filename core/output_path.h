// Start-up checks of the paths a run will write (a model file, the metrics
// JSON, JSON-lines metrics, checkpoints), so that a path that cannot be
// written is refused before training, never found after it with the
// trained model lost.
//
// Ownership: none; the functions read their arguments and the file system.
// Thread-safety: safe from any thread (they only stat and statfs).
#pragma once

#include <string>
#include <vector>

#include "core/output_target.h"
#include "core/status.h"

namespace tether {

/// Whether `dir` (or a file or folder to be made there) can be written: the
/// deepest part of its path that exists is a directory this process may
/// write (access W_OK) on a file system that holds files (not /proc, /sys,
/// a cgroup or debug file system, whose "writable" directories take no new
/// files). `source` names the flag or field in messages ("flag
/// --checkpoint_dir"). Errors: InvalidArgument "SOURCE=DIR: WHY" (a file on
/// the way, not writable, a pseudo file system).
[[nodiscard]] Status CheckWritableDir(const std::string& dir, const std::string& source);

/// The same for a file the run writes at `path` when it ends, under the
/// output policy of core/output_target.h: a link is followed and its target
/// checked; a directory, socket or block device is refused, a character
/// device or FIFO too unless `streams` is kWriteThrough (then it passes as
/// it is); otherwise the file's folder passes CheckWritableDir. The folder
/// must exist already unless `create_parents` (the writer makes it).
/// Errors: InvalidArgument "SOURCE=PATH: WHY".
[[nodiscard]] Status CheckWritableFile(const std::string& path, const std::string& source, bool create_parents,
                                       StreamOutput streams = StreamOutput::kRefuse);

/// The JSON-lines files (*.jsonl) of an earlier run in `dir`, sorted by
/// name; empty when `dir` does not exist or holds none.
std::vector<std::string> RunFilesIn(const std::string& dir);

/// Refuses a metrics folder that already holds a run's JSON-lines files:
/// appending a second run would draw both as one broken line. Errors:
/// InvalidArgument "SOURCE=DIR already holds a run (worker-0.jsonl, ...):
/// ..." with the fix.
[[nodiscard]] Status CheckMetricsDirFresh(const std::string& dir, const std::string& source);

}  // namespace tether
