// tether-launch --max_restarts: when a run of the job fails (exit 1: a
// process died or failed), run it again from the latest complete checkpoint
// under checkpoint.dir, or from its start when it failed before its first
// checkpoint, as the next cluster.generation, within what is left of
// --timeout_s. Success, bad flags, a process that refused its
// configuration (exit 2), a worker that refused its input data (exit 6,
// unrestartable.h), a timeout, a stop signal or a diverged loss are never
// restarted, nor a job that failed after its final checkpoint.
//
// Ownership: takes the options by value (each run's forwarded flags and
// timeout are its own).
// Thread-safety: call from one thread (it runs the launcher's event loop).
#pragma once

#include <cstdint>
#include <string>

#include "launch/launcher.h"

namespace tether {

struct RestartPolicy {
  int max_restarts = 0;        // ≥ 0; 0: run once
  std::string checkpoint_dir;  // where the job writes its checkpoints
  uint64_t generation = 0;     // cluster.generation of the first run
  std::string resume_from;     // the first run resumes from this ("" = afresh)
};

/// Whether `dir` (checkpoint.dir) holds no complete checkpoint yet: it is
/// missing, or no folder in it has a MANIFEST. A job that fails then
/// is restarted from its start (policy.resume_from, or afresh).
bool NoCheckpointYet(const std::string& dir);

/// Runs `options` (RunLaunch), restarting per `policy`; returns the exit
/// code of the last run, or 124 when no time was left to restart. Prints
/// "tether-launch: job finished after N restart(s) from checkpoints" on
/// stdout when a restarted job succeeded; each restart is logged (WARNING)
/// and announced on stderr with its checkpoint, clock and the training
/// redone.
int RunWithRestarts(LaunchOptions options, const RestartPolicy& policy);

}  // namespace tether
