// Signals a Tether process meets, and what each does. Every signal whose
// default action ends a process, and that a terminal, a scheduler or an
// operator sends, either asks the process to stop like SIGTERM or ends it
// with a line naming the signal; none ends it silently.
//
//   stop signals (StopSignals): SIGTERM, SIGINT, SIGHUP (terminal gone),
//     SIGUSR1, SIGUSR2 (SLURM's --signal, SGE and LSF warnings before a
//     kill), SIGXCPU (the CPU-time limit's warning), SIGPWR (power failing).
//     Binaries with a graceful stop (tether-server, tether-worker,
//     tether-launch, tether-rendezvous) install their handler for all of
//     them with InstallStopSignals: a stop checkpoint where one is
//     configured, then exit 128 + N.
//   SIGPIPE: ignored (a closed output pipe drops lines, never stops a run).
//   SIGXFSZ: ignored, so that a write past the file-size limit fails with
//     EFBIG and its error names the file and the limit (core/file_util.h).
//   every other signal that ends a process by default (SIGQUIT, SIGALRM,
//     SIGVTALRM, SIGPROF, SIGIO, SIGSTKFLT, the real-time ones), and the stop
//     signals in binaries without a graceful stop: one line on stderr,
//     "PROGRAM: ended by SIGNAME (signal N)", then the signal's default
//     action, so the exit status (and a core dump for SIGQUIT) stays the
//     signal's.
// A signal the process inherited as ignored (nohup's SIGHUP) stays ignored,
// and a handler someone else installed before (a profiler's SIGPROF) is
// kept. A signal inherited as blocked is unblocked once its handler is in
// place, so a parent's mask never holds a SIGTERM pending.
//
// Thread-safety: call from main() before threads start. The handlers are
// async-signal-safe (write(2), sigaction, raise).
#pragma once

#include <string>
#include <vector>

namespace tether {

/// The signals handled like SIGTERM (see above).
const std::vector<int>& StopSignals();

/// "SIGUSR1"; "SIGRTMIN+3" for real-time ones; "signal N" when unknown.
std::string SignalName(int sig);

/// Ignores SIGPIPE and SIGXFSZ and installs the "ended by" line for every
/// other terminating signal still at its default action, and unblocks the
/// signals it installed the line for. `program` is the binary's name for
/// the line. ParseFlagsOrDie calls it.
void InstallSignalReports(const std::string& program);

/// Installs `handler` for every stop signal that is not inherited as
/// ignored, with SA_RESTART as std::signal does (poll(2), and so a ZeroMQ
/// poll, still returns EINTR, and the caller looks at its stop flag), and
/// unblocks them in the calling thread. Returns the signals installed.
std::vector<int> InstallStopSignals(void (*handler)(int));

}  // namespace tether
