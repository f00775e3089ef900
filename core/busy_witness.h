// Tells a long piece of work that one thread of this process does on
// purpose (a shard's loop building a joining replica's state,
// server/replica_link.h) from a stall of the whole process (SIGSTOP, a
// paused VM, a starved host), by a thread that watches meanwhile.
//
// Why: a shard's loop judges its own liveness from the gaps between its
// turns (server/replica_link.h "Stepping down", ServerShard's own-stall
// check): past half of cluster.liveness_timeout_ms it must assume its
// replica may have claimed the shard. A loop that spends that long on work
// of its own ran throughout, and so did its ZeroMQ I/O threads, which
// answer the peers' heartbeats: nobody could take it for stopped. Its gap
// is no stall, and judging it one holds every reply, logs a stall that did
// not happen and, when a replica is slow to answer the mark, steps a live
// primary down (a needless failover). While the work runs, a witness
// thread wakes every `tick` and records the longest gap between its own
// wake-ups (GapMeter): a process that was stopped or starved shows that
// gap on the witness as well, so the work's time is forgiven only when the
// witness ran throughout.
//
// Cost: one thread for the work's duration, waking every `tick` (default
// 10 ms). Ownership: BusyWitness owns its thread, joined by Finish() or the
// destructor. Thread-safety: construct, Finish and destroy on one thread;
// GapMeter is not thread-safe (one owner).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

namespace tether {

/// The longest gap between consecutive time points of a watch.
class GapMeter {
 public:
  using Clock = std::chrono::steady_clock;
  /// The watch starts at `start`.
  explicit GapMeter(Clock::time_point start) : last_(start) {}
  /// One more time point (not before the last one).
  void Mark(Clock::time_point now);
  /// The longest gap between two marks (or the start and the first mark).
  std::chrono::milliseconds longest() const { return longest_; }

 private:
  Clock::time_point last_;
  std::chrono::milliseconds longest_{0};
};

class BusyWitness {
 public:
  using Clock = std::chrono::steady_clock;
  /// Starts the witness thread; the work starts now. `tick` > 0.
  explicit BusyWitness(std::chrono::milliseconds tick = std::chrono::milliseconds(10));
  ~BusyWitness();
  BusyWitness(const BusyWitness&) = delete;
  BusyWitness& operator=(const BusyWitness&) = delete;

  struct Verdict {
    std::chrono::milliseconds busy{0};         // from the start to Finish()
    std::chrono::milliseconds longest_gap{0};  // the witness's longest gap, Finish() included
    /// True when the witness never went `stall` without running: the
    /// process ran throughout the work (its time is no stall of its own).
    bool RanThroughout(std::chrono::milliseconds stall) const { return longest_gap <= stall; }
  };
  /// Ends the watch (joins the thread). Call once; later calls return the
  /// same verdict.
  Verdict Finish();

 private:
  void Watch();

  const std::chrono::milliseconds tick_;
  const Clock::time_point start_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool done_ = false;      // guarded by mu_
  GapMeter meter_;         // the witness thread's until joined
  bool finished_ = false;  // the owner's
  Verdict verdict_;
  std::thread thread_;
};

}  // namespace tether
