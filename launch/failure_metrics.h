// tether-launch --metrics_out: the failure of a job, recorded in its
// metrics JSON.
//
// The evaluating worker writes the metrics JSON when the job reaches its
// end, with "failure" where it knows the job failed (workers that left
// before the end, the servers' answer to its goodbye). A job can also fail
// where no worker writes (a server process killed while training: the
// launcher stops every worker), or after the evaluator wrote its file (a
// server that fails at its own end, a worker's --model_out). The launcher,
// which sees every process end, then records the job's failure: into the
// evaluator's file when there is one (its own "failure" is kept, being the
// closer reason), else as a file of its own holding only "failure" and
// "exit_code" (docs/ERRORS.md, "Exit codes").
//
// The write follows the output policy of core/output_target.h: a link's
// target is written, never the link; a character device or FIFO is left
// alone (what went through it cannot be read back, and a FIFO's open would
// wait for a reader); a file that is no Tether metrics JSON is never
// replaced.
//
// Ownership: none. Thread-safety: a pure function of the file system.
#pragma once

#include <string>

#include "core/status.h"

namespace tether {

/// What RecordJobFailure did.
enum class FailureRecord {
  kAdded,    // "failure" and "exit_code" added to the evaluator's metrics JSON
  kKept,     // the evaluator's file carries a "failure" already: "exit_code" added
  kWritten,  // no metrics JSON there: a file of its own, {"failure", "exit_code"}
  kSkipped,  // a character device or FIFO: nothing written
};

/// Records in the metrics JSON at `path` (flag --metrics_out) that the job
/// failed: `failure` says why (the process, how it ended, what it held),
/// `exit_code` is tether-launch's. Written atomically (core/file_util.h).
/// Errors: InvalidArgument when `path` holds a file that is no Tether
/// metrics JSON (launch/old_metrics.h IsMetricsJson; left as it is) or is
/// a directory, socket or block device; IOError when the write fails.
[[nodiscard]] StatusOr<FailureRecord> RecordJobFailure(const std::string& path, const std::string& failure,
                                                       int exit_code);

}  // namespace tether
