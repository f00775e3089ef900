// Which process a failed job failed on, and the launcher's exit code for it
// (tether-launch, launch/launcher.h). When a process fails, others end
// with it: a worker that refuses its data tells the servers (ABORT), which
// end at once, exit 1, often before the worker itself is reaped; the
// launcher's teardown then stops the rest. The cause to name, and the exit
// code, come from every process that ended, in this order of precedence:
//   1. a refusal no restart cures (launch/unrestartable.h: exit 2 or 6),
//      whenever it ended, also during the teardown: the job exits its code
//      and --max_restarts never restarts it;
//   2. a process killed by a signal (a server that was SIGKILLed: the
//      processes that lost it fail after it);
//   3. a worker stopped by SIGSTOP, still running (the servers removed it
//      for silence, and the job failed without it);
//   4. a worker that failed by itself (its ABORT ended the servers, whose
//      exits came first);
//   5. else the first to fail.
// Processes that ended during the teardown (stopped by the launcher) count
// for rule 1 only.
//
// Ownership: values in, values out. Thread-safety: re-entrant.
#pragma once

#include <string>
#include <vector>

namespace tether {

/// One process of a failed job, in the order the launcher reaped them.
struct EndedProcess {
  std::string name;      // "worker 1 (pid 4712)"
  std::string role;      // "worker", "server" or "replacement"
  int wait_status = 0;   // waitpid's; ignored when `stopped`
  bool stopped = false;  // still running, stopped (state T): it never ended
  bool in_teardown = false;  // ended after the launcher began stopping the job
};

struct FailureCause {
  int cause = -1;    // index into the processes judged; -1 when none failed
  int job_exit = 1;  // tether-launch's exit code: 1, or an unrestartable code (2, 6)
  std::string why;   // for an unrestartable cause, the ERROR line that says so (UnrestartableExit), else ""
};

/// The cause among `ended` (above). `ended` may be empty: then cause -1, exit 1.
FailureCause JudgeFailure(const std::vector<EndedProcess>& ended);

}  // namespace tether
