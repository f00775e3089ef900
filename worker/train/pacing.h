// Pacing of a worker's minibatch loop: the straggler simulation's idle time
// (--slowdown) and where an adaptive minibatch ends (train.adaptive_batch).
//
// SlowdownIdler. Why: --slowdown s makes a worker s× slower by idling
// (s − 1) × its own minibatch time after each minibatch. A Bibtex minibatch
// takes a few milliseconds while the idle is asked in whole milliseconds, so
// rounding each idle down lost up to a millisecond per minibatch: a worker
// meant to be 2× slower ran about 1.8× slow at 2.5 ms of work per minibatch. The idler keeps what it
// owes (seconds, a fraction of a millisecond carried to the next minibatch),
// so the idle time over a run is (s − 1) × the work time to within 1 ms.
//
// AdaptiveBatchEnd. Why: a minibatch never crosses a chunk of data on demand
// (or the end of a worker's share), so with adaptive sizes a chunk of 640
// rows and a batch of 100 ends in a 40-row minibatch that pays a whole
// minibatch's pull and push. The last minibatch of a chunk absorbs a tail of
// less than half a batch (while the sum stays within b_max), so a chunk
// costs round(rows / b) minibatches instead of ceil(rows / b).
//
// Not thread-safe: the training thread owns an idler.
#pragma once

#include <cstdint>
#include <functional>

#include "core/status.h"
#include "proto/config.pb.h"

namespace tether {

class SlowdownIdler {
 public:
  /// `slowdown` ≥ 1 (1: never idles).
  explicit SlowdownIdler(double slowdown) : slowdown_(slowdown) {}

  /// A minibatch took `work_seconds` (≥ 0): owes (slowdown − 1) × that and
  /// idles the whole milliseconds owed through `idle(ms)` (ms ≥ 1;
  /// WorkerClient::Idle, which heartbeats); the fraction stays owed.
  /// Errors: idle's.
  Status Idle(double work_seconds, const std::function<Status(int ms)>& idle);

  /// Seconds owed and not yet idled, in [0, 0.001).
  double owed_seconds() const { return owed_; }
  /// Seconds idled so far.
  double idled_seconds() const { return idled_; }

 private:
  double slowdown_;
  double owed_ = 0;
  double idled_ = 0;
};

/// The end (exclusive) of the minibatch that starts at row `begin` of a
/// block of `rows` rows (a chunk, or the worker's share) with batch size
/// `batch` (≥ 1): begin + batch capped at rows; with `adaptive` enabled, the
/// block's end when fewer than batch / 2 rows would be left after it and
/// the minibatch stays within adaptive.b_max() (resolved, ≥ 1).
int64_t AdaptiveBatchEnd(const AdaptiveBatchConfig& adaptive, int64_t rows, int64_t begin, int64_t batch);

}  // namespace tether
