// tether-bench rendezvous: N processes released at once; S = max(1, N/8)
// publish one endpoint each, the other N - S look all S up, against the
// directory backend (file:DIR) and the store (tcp://, a process of its own),
// beside the same processes doing no rendezvous (the baseline). Prints
// Markdown on stdout.
//
// Ownership: the benchmark owns and reaps every process it forks and
// removes its directory.
// Thread-safety: forks; call from a process's one thread, before any
// ZeroMQ context exists (a context must not cross a fork).
#pragma once

#include <string>

namespace tether {

struct RendezvousBenchOptions {
  std::string procs = "2,16,64";  // process counts N to measure
  int reps = 5;                   // repetitions per (backend, N); the median is reported
  std::string dir;                // parent of the file backend's directory; "" = $TMPDIR or /tmp
};

/// Runs the benchmark; returns 0, 1 (a directory, the store or a process
/// failed; said on stderr) or 2 (a count below 2, reps below 1).
int RunRendezvousBench(const RendezvousBenchOptions& options);

}  // namespace tether
