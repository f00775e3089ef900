// tether-launch --metrics_out: the file an earlier run left there.
//
// The launcher removes an earlier run's metrics JSON before the job starts,
// so that a job that fails without writing one does not leave the old file
// to pass for its metrics (docs/METRICS.md). Only a regular file that is a
// Tether metrics JSON (a JSON object with "train_seconds" and
// "samples_per_second", or the launcher's record of a failed job: exactly
// "failure" and "exit_code", launch/failure_metrics.h) is removed; anything else at that path is refused
// at start and never removed. A link is followed: its target is the file
// checked and removed, the link stays (the job writes its target). A
// character device or FIFO (/dev/null, a pipe) is written through and left
// as it is (core/output_target.h).
//
// Ownership: none. Thread-safety: pure functions of the file system.
#pragma once

#include <string>

#include "core/status.h"

namespace tether {

/// True when `path` holds a Tether metrics JSON.
bool IsMetricsJson(const std::string& path);

/// The start-up check of `path` (flag `source`): writable under the output
/// policy (a character device or FIFO is written through), and an existing
/// regular file there is an earlier run's metrics JSON. Errors:
/// InvalidArgument "SOURCE=PATH: ..." naming what is there.
[[nodiscard]] Status CheckMetricsOutReplaceable(const std::string& path, const std::string& source);

/// Removes the earlier run's metrics JSON at `path` (the link's target when
/// a link), logging it; nothing there, or a device or FIFO: nothing done.
/// Errors: as CheckMetricsOutReplaceable (nothing removed); IOError when the
/// removal fails.
[[nodiscard]] Status RemoveOldMetrics(const std::string& path, const std::string& source);

}  // namespace tether
