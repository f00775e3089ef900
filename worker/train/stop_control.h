// StopControl: when a training worker stops, and whether it takes a stop
// checkpoint first — the state machine of a stop request (this worker's own
// signal, or a server shard told to stop) against the job's checkpoints.
//
//   no stop ──Notice──▶ stop pending ──(no checkpoint.dir)──▶ leave at once
//                            │
//                            ├─ its next CLOCK asks shard 0 for a checkpoint
//                            │  clock (WantCheckpoint, once per request)
//                            ├─ the checkpoint at that clock is taken
//                            │  (CheckpointDone, not abandoned) ──▶ leave
//                            ├─ the round was abandoned ──▶ ask again
//                            └─ the grace (kStopCheckpointGraceS) runs out
//                               while waiting ──▶ leave without one
//
// Rank 0's checkpoint.every_seconds timer asks for checkpoint clocks the
// same way (WantCheckpoint). Before training starts (HELLO, the resume
// handshake, the evaluation set-up) there is nothing to checkpoint: a stop
// ends the client's waits at once (WaitGivesUp); from StartTraining on,
// with checkpoints on, the waits go on for the grace, so the worker can
// reach the stop's checkpoint clock.
//
// Pure: every time is passed in (steady clock), nothing is logged or sent;
// the training run (worker/train/training_run.h) acts on the answers.
// Ownership: plain value. Thread-safety: not thread-safe; the training
// thread owns it (the client's stop callback runs on that thread too).
#pragma once

#include <chrono>
#include <cstdint>

namespace tether {

/// With checkpoints on, how long a stopped worker may still wait for the
/// others to reach the stop's checkpoint clock and for the shards' writes,
/// in seconds.
constexpr double kStopCheckpointGraceS = 60;

class StopControl {
 public:
  using Clock = std::chrono::steady_clock;

  struct Options {
    bool checkpointing = false;   // checkpoint.dir is set
    /// Rank 0's checkpoint.every_seconds (≤ 0, and on every other rank:
    /// no timer).
    double every_seconds = 0;
    double grace_seconds = kStopCheckpointGraceS;
  };

  explicit StopControl(const Options& options) : options_(options) {}

  /// Training starts at `now`: with checkpoints on, a stop from here on
  /// leads to a checkpoint, which the waits are given the grace to reach;
  /// rank 0's timer counts from here.
  void StartTraining(Clock::time_point now);

  /// The client's verdict on a wait (ClientOptions::stop_requested), given
  /// whether a stop is requested now: true gives the wait up. Before
  /// StartTraining (or without checkpoints), at once; after it, once the
  /// grace that began when the stop was first seen is over.
  bool WaitGivesUp(bool stop_requested, Clock::time_point now);

  /// Looks for a stop: `own` (this worker's stop request) or
  /// `stopping_shard` ≥ 0 (a server told to stop). Returns whether a stop
  /// is pending; `*first` (may be null) says this call noticed it.
  bool Notice(bool own, int stopping_shard, Clock::time_point now, bool* first = nullptr);
  bool stop_pending() const { return stop_pending_; }
  /// The shard whose stop was noticed, or −1 (this worker's own, or none).
  int stopped_by_shard() const { return stopped_by_shard_; }
  bool checkpointing() const { return options_.checkpointing; }

  /// A pending stop without checkpoints: leave now, between minibatches.
  bool LeavesAtOnce() const { return stop_pending_ && !options_.checkpointing; }

  /// Whether the next CLOCK asks shard 0 for a checkpoint clock (a pending
  /// stop, or rank 0's timer due). `take`: that CLOCK goes out now, so the
  /// request is marked asked (once per request, until a checkpoint is done).
  bool WantCheckpoint(Clock::time_point now, bool take);

  /// Whether a checkpoint is taken at `clock` (just completed):
  /// checkpointing and a multiple of `every_clocks` (> 0), or the clock
  /// shard 0 picked (`due_clock`, −1: none).
  bool CheckpointDue(int64_t clock, int64_t every_clocks, int64_t due_clock) const;

  /// A checkpoint round at `clock` ended at `now`; `abandoned`: shard 0
  /// gave it up (no MANIFEST). Returns true when it was the stop's
  /// checkpoint: the worker leaves now.
  bool CheckpointDone(int64_t clock, bool abandoned, Clock::time_point now);
  /// The clock of the stop's checkpoint once taken, else −1.
  int64_t stop_clock() const { return stop_clock_; }

  /// Waiting for a chunk (data on demand) with a stop pending: whether the
  /// wait ends now — without checkpoints at once; with them once the stop's
  /// checkpoint is taken or the grace is over.
  bool WaitForChunkEnds(Clock::time_point now) const;

  /// How a worker whose wait for a chunk a stop ended leaves.
  enum class ChunkWaitExit {
    kNoCheckpoints,     // no checkpoint.dir: leaves without one
    kAfterCheckpoint,   // after the stop checkpoint (stop_clock())
    kGraceOver,         // the stop checkpoint was not reached within the grace
  };
  ChunkWaitExit chunk_wait_exit() const;

 private:
  void StartGrace(Clock::time_point now);

  Options options_;
  bool armed_ = false;            // StartTraining with checkpoints on
  bool grace_started_ = false;    // the stop was first seen (by a wait or Notice)
  Clock::time_point grace_since_;
  Clock::time_point last_checkpoint_at_;
  bool stop_pending_ = false;
  int stopped_by_shard_ = -1;
  bool checkpoint_asked_ = false;
  bool stop_checkpointed_ = false;
  int64_t stop_clock_ = -1;
};

}  // namespace tether
