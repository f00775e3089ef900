// Tells a stall of this whole process (SIGSTOP or Ctrl-Z, a paused VM, a
// swap storm) from the gaps between the turns of an event loop.
//
// Why: a peer's verdict about this process follows from its silence. When a
// worker stopped past cluster.liveness_timeout_ms is continued, its shards
// have already dropped its connections (their ZMTP heartbeats went
// unanswered), and the requests it had in flight are lost. That is not the
// shards' fault, and a shard that also removed the worker for silence
// (cluster.worker_timeout_ms) says so once the connection is back
// (REMOVED). The worker's RequestChannel asks this class whether the drop
// followed its own stall, and if so waits a bounded time for that answer
// before it names the cause (worker/client/request_channel.cc).
//
// A gap is the time between two turns beyond what the loop asked to block
// for. A loop that computes between turns (a long minibatch) shows a gap
// too: a verdict of "stalled" is therefore only ever used to wait a little
// longer and to word a message, never to fail.
//
// Bound: O(1) state. Thread-safety: none; one event loop owns an instance.
#pragma once

#include <chrono>
#include <cstdint>

namespace tether {

class StallWatch {
 public:
  using Clock = std::chrono::steady_clock;

  /// `threshold_ms` > 0: a gap past it is a stall (callers pass half the
  /// peers' liveness timeout). `memory_ms`: how long a stall is remembered
  /// after the loop runs again (its consequences, such as a dropped
  /// connection, are seen a few turns later). threshold_ms <= 0 turns the
  /// watch off (Stalled() is always false).
  StallWatch(int64_t threshold_ms, int64_t memory_ms) : threshold_ms_(threshold_ms), memory_ms_(memory_ms) {}

  /// One turn of the loop ended at `now`, after it asked to block for
  /// `blocked_ms` (a poll's timeout; 0 for none).
  void Turn(Clock::time_point now, int64_t blocked_ms);

  /// True while a stall ended within memory_ms before `now`.
  bool Stalled(Clock::time_point now) const;

  /// The length of the last stall in ms (0 for none).
  int64_t last_stall_ms() const { return last_stall_ms_; }

 private:
  int64_t threshold_ms_;
  int64_t memory_ms_;
  bool started_ = false;
  Clock::time_point last_turn_{};
  Clock::time_point stall_ended_{};
  int64_t last_stall_ms_ = 0;
};

}  // namespace tether
