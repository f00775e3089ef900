// BatchController: adaptive minibatch sizes per worker (Adaptive SGD: Ma et
// al., "Adaptive Distributed SGD" arXiv 2110.07029;
// train.adaptive_batch). The job coordinator owns one and feeds it every
// worker's CLOCK (server/coordinator/adaptive_batches.h).
//
// Why: with one worker twice as slow, every finite staleness bound makes the
// fast worker wait for the slow one every clock (docs/CONSISTENCY.md). Giving
// the fast worker larger minibatches and the slow one smaller ones until both
// complete clocks at the same rate turns that wait into work.
//
// The rule. For each worker w the controller keeps its last `window_clocks`
// clocks' rows and busy seconds (the time between two of its CLOCKs less the
// time its pulls waited on the staleness bound, which the shard measures;
// AdaptiveBatches::BusySeconds; a clock in which the worker was idle, such
// as waiting for a data chunk, is not reported), and
// its throughput r_w = Σ rows / Σ busy seconds. Once w has reported
// `warmup_clocks` clocks (its own count, so a worker joining late warms up
// too; those clocks are not measured), at each of its clocks its target is
//     t_w = n · B · r_w / Σ_v r_v        (B = train.minibatch_size)
// over the n workers with a measured throughput, clamped to [b_min, b_max]
// with the clamped workers' excess or shortfall shared among the others in
// proportion to their throughput (water-filling), so Σ_v t_v = n · B while
// the bounds allow: the job's mean batch stays B. Then w moves `smoothing` of
// the way: b_w ← b_w + smoothing · (t_w − b_w), and is told round(b_w). The
// fixed point makes every worker's busy time per clock equal whatever its
// cost model (b_w / r_w = time per clock is the same for all), and the
// smoothing (and the window) keep it from oscillating on noisy timings.
//
// Membership: workers are named by any non-negative rank and counted as they
// report; Remove() takes a finished, departed or dead worker out of n. Nothing
// is sized by a worker count, so a worker joining mid-job simply reports.
//
// Units: rows, seconds, rows per second. Not thread-safe: owned by the job
// coordinator.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>

#include "core/status.h"
#include "proto/coordinator.pb.h"

namespace tether {

struct BatchControllerOptions {
  int minibatch_size = 64;  // B: the job's mean batch
  int b_min = 16;           // 1 ≤ b_min ≤ B ≤ b_max
  int b_max = 256;
  int warmup_clocks = 5;    // ≥ 0
  int window_clocks = 5;    // ≥ 1
  double smoothing = 0.5;   // in (0, 1]
};

/// Errors (InvalidArgument) name the field: "b_min 0 must be ≥ 1".
[[nodiscard]] Status CheckBatchControllerOptions(const BatchControllerOptions& o);

class BatchController {
 public:
  /// `o` must pass CheckBatchControllerOptions (CHECKed).
  explicit BatchController(const BatchControllerOptions& o);

  /// Worker `rank` (≥ 0) completed a clock: it trained `rows` rows in
  /// `busy_seconds` of work (≥ 0; its waits left out).
  /// Returns the minibatch size it trains with from its next clock on, in
  /// [b_min, b_max] (B during its warm-up). A clock with no busy time (0 s:
  /// the first, which has no previous CLOCK to time from) counts its rows
  /// toward the next measured one.
  int Report(int rank, int64_t rows, double busy_seconds);

  /// `rank` no longer takes part (finished, left, or removed for silence);
  /// its throughput leaves the sum. A later Report adds it back, fresh.
  void Remove(int rank);

  /// The size `rank` was last given (B for a rank not known).
  int batch(int rank) const;
  /// Its measured throughput in rows per second over the window (0 while
  /// none: no busy time measured yet).
  double rate(int rank) const;
  /// Workers taking part (reported, not removed).
  int num_workers() const { return static_cast<int>(workers_.size()); }
  const BatchControllerOptions& options() const { return options_; }

  /// Every worker's window, counts and size into state->workers (replaced),
  /// for JobCoordinator::Snapshot; the options are the caller's.
  void Snapshot(AdaptiveBatchState* state) const;
  /// Replaces the workers with state.workers (a Snapshot's, under the same
  /// options). Errors: InvalidArgument naming the rank when a rank is
  /// negative or listed twice, or its window's rows and seconds differ in
  /// length; nothing changes then.
  Status Restore(const AdaptiveBatchState& state);

 private:
  struct Worker {
    std::deque<std::pair<int64_t, double>> window;  // (rows, busy seconds) per clock
    int64_t pending_rows = 0;                       // rows of clocks with no busy time yet
    int64_t clocks = 0;                             // clocks reported
    double batch = 0;                               // smoothed size (not rounded)
  };
  // t_w for every worker with a measured rate (water-filling, above).
  std::map<int, double> Targets() const;

  BatchControllerOptions options_;
  std::map<int, Worker> workers_;
};

}  // namespace tether
