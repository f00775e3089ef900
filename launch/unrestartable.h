// Which failures of a launched process no restart cures, and the job's exit
// code for them: a process that refused its configuration at start (exit
// 2) and a worker that refused its data (kExitBadInput: a line it cannot
// parse, a corrupt gzip stream, a data file that changed under the job or
// since the checkpoint it resumes). tether-launch exits with that code, never
// 1, so --max_restarts (restarts.h, which restarts exit 1 only) leaves the
// job failed, and says why.
//
// Ownership: values in, values out. Thread-safety: re-entrant.
#pragma once

#include <optional>
#include <string>

namespace tether {

struct Unrestartable {
  int job_exit = 1;  // tether-launch's exit code
  std::string why;   // the launcher's ERROR line, without "[launch] "
};

/// For process `name` ("worker 0") that ended with `wait_status` (waitpid's):
/// its Unrestartable, or nullopt when it failed some other way (the job
/// exits 1, which --max_restarts restarts).
std::optional<Unrestartable> UnrestartableExit(const std::string& name, int wait_status);

}  // namespace tether
