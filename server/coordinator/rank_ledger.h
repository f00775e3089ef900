// RankLedger: the job coordinator's record of the job's ranks, kept from
// the events the hosting shard forwards (a HELLO admitted, a BARRIER, a
// BYE, a removal for silence). The coordinator learns membership only
// from these, never by reading a shard's own bookkeeping, so that it can
// run apart from the shard (CoordinatorState.ranks holds the record).
//
// Who is what:
//   - a member: one of the initial ranks [0, cluster.num_workers) (joined
//     or still expected), or a rank that joined later; a joiner's slot never
//     taken is not a member (it holds no checkpoint entry);
//   - excused from evaluation: a rank that left (BYE) or was removed, or
//     any rank beyond the initial ones (the test set is split over those);
//   - gone: left or removed, until it joins again (a fresh record).
//
// Rows trained (the job's total_samples): each rank's record holds the rows
// its process reported, exact at its BARRIER and, before that, as of its
// latest CLOCK. A rank that left or was removed keeps its count; a new
// process taking a rank inherits the old one's count and counts on (the
// worker is told it in HELLO_REPLY.rejoin_samples). Rows of a minibatch
// whose CLOCK never reached shard 0 are not counted: a process restarted
// in its place trains them again.
//
// Not thread-safe: owned by the job coordinator.
#pragma once

#include <cstdint>
#include <map>

#include "core/status.h"
#include "proto/coordinator.pb.h"
#include "proto/checkpoint.pb.h"

namespace tether {

class RankLedger {
 public:
  struct Record {
    bool joined = false, left = false, removed = false, finished = false;
    uint64_t samples = 0;            // rows trained: its BARRIER's, or its latest CLOCK's
    CheckpointWorker finished_entry;  // its BARRIER's `finished`
  };

  /// `initial_workers`: cluster.num_workers (≥ 0).
  explicit RankLedger(int initial_workers) : initial_workers_(initial_workers) {}

  /// `rank` (≥ 0) was admitted by a HELLO: a fresh record, joined (a rank
  /// that rejoins forgets its earlier barrier, BYE or removal, and keeps
  /// its rows trained). Returns those rows (0 for a first join).
  uint64_t Joined(int rank);
  /// `rank`'s CLOCK said it has trained `samples` rows so far (ignored once
  /// it reached the barrier, whose count is exact).
  void Clocked(int rank, uint64_t samples);
  /// `rank` reached the barrier having trained `samples` rows; `entry` is
  /// its BARRIER's `finished` (final_loss, diverged).
  void Finished(int rank, uint64_t samples, const CheckpointWorker& entry);
  /// `rank` said BYE / was removed for silence.
  void Left(int rank);
  void Removed(int rank);

  bool Member(int rank) const;
  bool Excused(int rank) const;
  bool Gone(int rank) const;
  /// The rows trained over every member, those that left or were removed
  /// included.
  uint64_t TotalSamples() const;
  /// `rank`'s record (a default one for a rank never heard of).
  const Record& record(int rank) const;
  /// One past the highest rank that can be a member: max(initial ranks,
  /// highest rank heard of + 1).
  int slots() const;
  int initial_workers() const { return initial_workers_; }

  void Snapshot(CoordinatorState* state) const;  // fills state->ranks
  /// Replaces the records with state.ranks. Errors: InvalidArgument for a
  /// negative rank or one listed twice; nothing changes then.
  Status Restore(const CoordinatorState& state);

 private:
  int initial_workers_;
  std::map<int, Record> records_;
};

}  // namespace tether
