#include "worker/train/stop_control.h"

namespace tether {
namespace {

double SecondsBetween(StopControl::Clock::time_point from, StopControl::Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

}  // namespace

void StopControl::StartTraining(Clock::time_point now) {
  armed_ = options_.checkpointing;
  last_checkpoint_at_ = now;
}

void StopControl::StartGrace(Clock::time_point now) {
  if (grace_started_) return;
  grace_started_ = true;
  grace_since_ = now;
}

bool StopControl::WaitGivesUp(bool stop_requested, Clock::time_point now) {
  if (!stop_requested) return false;
  if (!armed_) return true;
  StartGrace(now);
  return SecondsBetween(grace_since_, now) > options_.grace_seconds;
}

bool StopControl::Notice(bool own, int stopping_shard, Clock::time_point now, bool* first) {
  if (first != nullptr) *first = false;
  if (stop_pending_) return true;
  if (!own && stopping_shard < 0) return false;
  stop_pending_ = true;
  if (!own) stopped_by_shard_ = stopping_shard;
  // The grace of the stop checkpoint starts now, unless a wait saw the
  // stop first.
  StartGrace(now);
  if (first != nullptr) *first = true;
  return true;
}

bool StopControl::WantCheckpoint(Clock::time_point now, bool take) {
  if (!options_.checkpointing || checkpoint_asked_ || stop_checkpointed_) return false;
  const bool want = stop_pending_ || (options_.every_seconds > 0 &&
                                      SecondsBetween(last_checkpoint_at_, now) >= options_.every_seconds);
  if (want && take) checkpoint_asked_ = true;
  return want;
}

bool StopControl::CheckpointDue(int64_t clock, int64_t every_clocks, int64_t due_clock) const {
  return options_.checkpointing && ((every_clocks > 0 && clock % every_clocks == 0) || clock == due_clock);
}

bool StopControl::CheckpointDone(int64_t clock, bool abandoned, Clock::time_point now) {
  // Asked again on the next CLOCK if still wanted (a stop whose round was
  // abandoned, the timer).
  checkpoint_asked_ = false;
  if (abandoned) return false;
  last_checkpoint_at_ = now;
  if (!stop_pending_) return false;
  stop_checkpointed_ = true;
  stop_clock_ = clock;
  return true;
}

bool StopControl::WaitForChunkEnds(Clock::time_point now) const {
  if (!stop_pending_) return false;
  if (!options_.checkpointing || stop_checkpointed_) return true;
  return SecondsBetween(grace_since_, now) > options_.grace_seconds;
}

StopControl::ChunkWaitExit StopControl::chunk_wait_exit() const {
  if (!options_.checkpointing) return ChunkWaitExit::kNoCheckpoints;
  return stop_checkpointed_ ? ChunkWaitExit::kAfterCheckpoint : ChunkWaitExit::kGraceOver;
}

}  // namespace tether
