// The time a training run has left, estimated from how far it got: the
// figure on the progress lines of long runs ("ETA 4m 10s").
//
// The estimate is linear in the work done: elapsed wall time (training,
// evaluation and checkpoints alike, as they recur) times the share of the
// run still to go over the share done. Epochs are assumed equal in rows
// (a worker's share of the data, or its dealt chunks, changes little from
// one epoch to the next); the figure is a guide for a person, not a bound.
//
// Thread-safety: pure functions.
#pragma once

#include <string>

namespace tether {

/// Seconds left of a run of `epochs` epochs that has spent `elapsed_s`
/// seconds on `done_epochs` whole epochs plus `epoch_fraction` (0..1) of
/// the next. Negative when nothing is done yet (no estimate); 0 when the
/// run is through.
double EtaSeconds(double elapsed_s, int done_epochs, double epoch_fraction, int epochs);

/// "45s", "4m 10s", "2h 05m" (seconds rounded up); "?" for a negative
/// estimate.
std::string FormatEta(double seconds);

}  // namespace tether
