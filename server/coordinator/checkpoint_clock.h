// CheckpointClock: the job coordinator's part of checkpoints. Every shard
// writes its own part of a checkpoint (server/checkpoint_round.h); the
// coordinator
//   - picks the clock of a checkpoint a worker asks for (rank 0's
//     checkpoint.every_seconds, or a graceful stop: a CLOCK with
//     want_checkpoint), and
//   - lists the manifest's rank entries: each rank TRAINING (its state file
//     in this round), FINISHED (at the barrier: its rows and final loss),
//     LEFT (its state file at the last checkpoint it took part in, which
//     worker 0 copies in) or GONE.
//
// Why the picked clock is two past the largest clock any counting worker
// reported: a worker waits for the answer to its previous CLOCK before it
// works at a new clock (WorkerClient::Clock), so one that reported clock L
// can work at L + 1 unaware, but not at L + 2 without this answer: every
// worker learns the clock before it gets there, whatever the staleness
// bound. It is also past the last checkpoint's clock.
//
// Not thread-safe: owned by the job coordinator.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "core/status.h"
#include "proto/coordinator.pb.h"
#include "proto/checkpoint.pb.h"
#include "server/coordinator/rank_ledger.h"

namespace tether {

class CheckpointClock {
 public:
  /// A want_checkpoint: when no checkpoint is due, the due clock becomes
  /// max(latest + 2, last() + 1), `latest` being the largest clock any
  /// counting worker has reported. Returns whether it was picked now.
  bool Want(int64_t latest);
  /// The clock every worker takes the requested checkpoint at, or −1.
  int64_t due() const { return due_; }
  /// The latest checkpoint's clock (written, failed or resumed from), or −1.
  int64_t last() const { return last_; }

  /// The job resumed from the checkpoint at `clock`.
  void Resumed(int64_t clock) { last_ = clock; }
  /// The manifest's entries (one per member rank of `ranks`, in rank order)
  /// for a round in which `files` (rank → its state file) were written.
  void Entries(const RankLedger& ranks, const std::map<int, CheckpointFile>& files,
               google::protobuf::RepeatedPtrField<CheckpointWorker>* out) const;
  /// The round at `clock` ended: `written` into `dir` with the ranks'
  /// `files` (those ranks' last state is now there, and so is the state of
  /// ranks that left: worker 0 copies it in), or its write failed.
  void RoundEnded(int64_t clock, bool written, const std::string& dir, const std::map<int, CheckpointFile>& files);
  /// The round at `clock` was abandoned (no MANIFEST): a request it
  /// answered may be made again.
  void RoundAbandoned(int64_t clock);

  void Snapshot(CheckpointClockState* state) const;
  /// Errors: InvalidArgument for a negative rank or one listed twice;
  /// nothing changes then.
  Status Restore(const CheckpointClockState& state);

 private:
  int64_t due_ = -1;
  int64_t last_ = -1;
  // Each rank's state file at the last checkpoint it took part in, and
  // that checkpoint's directory.
  std::map<int, std::pair<std::string, CheckpointFile>> last_state_;
};

}  // namespace tether
