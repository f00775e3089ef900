// The end of a launched job that ran to completion: the metrics JSON the
// evaluating worker wrote (printed, indented), a diverged loss, and the
// one-line summary on stdout (scripts read it).
//
// Ownership: borrows the summary.
// Thread-safety: no shared state.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace tether {

struct JobSummary {
  std::string metrics_out;            // "" = no metrics file was asked for
  std::vector<std::string> diverged;  // names of the workers that exited kExitDiverged
  int num_servers = 0;
  int num_workers = 0;
  std::chrono::steady_clock::duration wall{};  // the job's wall time
};

/// Prints "metrics (FILE):" and the file's JSON (2-space indent) on stdout,
/// warning when it says "diverged"; then "tether-launch: job finished: ..."
/// or, when a worker's loss diverged, the line saying so. Returns the exit
/// code: 0; 1 when the metrics file is missing or not JSON (logged);
/// kExitDiverged (3) when a worker diverged.
int PrintJobSummary(const JobSummary& summary);

}  // namespace tether
