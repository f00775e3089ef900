// The signal state a process tether-launch starts begins with: an empty
// signal mask and every signal at its default action, whatever the launcher
// blocked or ignored for itself. The launcher reads SIGTERM and its other
// stop signals through a signalfd, so it blocks them; a restarted job's
// launcher starts its processes with those signals still blocked, and a
// child that inherited the mask would never take the SIGTERM that tears
// the job down. Dispositions set to SIG_IGN survive exec too (SIGPIPE,
// SIGXFSZ: cli/signals.h); each binary installs its own again.
//
// Thread-safety: ResetSignalsBeforeExec runs in a forked child between fork
// and exec: async-signal-safe calls only (sigaction, sigprocmask).
#pragma once

namespace tether {

/// Sets every catchable signal to SIG_DFL, but SIGHUP when it is ignored and
/// `keep_sighup_ignored` (a launcher under nohup passes nohup on to its
/// processes, as cli/signals.h promises), then empties the signal mask.
/// Dispositions come first, so a signal that arrives in between takes its
/// default action, never a handler of the launcher's. Async-signal-safe.
void ResetSignalsBeforeExec(bool keep_sighup_ignored);

/// Whether SIGHUP is ignored in this process now (inherited from nohup).
bool SighupIgnored();

}  // namespace tether
