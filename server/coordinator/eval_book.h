// EvalBook: the job coordinator's record of partitioned evaluation
// (EVAL_GATHER; server/coordinator/job_coordinator.h): each
// worker's partial sums per evaluation round, and the requests waiting for a
// round to complete. A round is complete once every rank has sent its
// partial or is excused (it left the job or was removed for silence, never
// joined, or joined beyond the initial ranks; the caller says which). The protocol logic, apart from the event loop, so it
// is tested in one process (eval_book_test.cc).
//
// Rounds: 0 = the job's start (training label counts, test row counts),
// e >= 1 = the evaluation after epoch e, kFinalEvalRound = the final one,
// kValidationEvalRound + e = the validation split after epoch e (every
// worker waits on it: all its waiters are answered at once).
// A round's partials are dropped once they were handed out complete
// (TakeComplete): the reporting worker asks once. Round 0 is kept for the
// job's life (every worker asks for it, and a worker that rejoins after a
// crash asks again).
//
// Memory: the partials of the rounds not yet handed out (a binary
// partial holds its rows' scores, 5 bytes each).
// Thread-safety: none; the job coordinator owns it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/net/eval_frames.h"
#include "core/status.h"
#include "proto/coordinator.pb.h"
#include "proto/wire.pb.h"

namespace tether {

class EvalBook {
 public:
  /// A request waiting for its round (EVAL_WAIT).
  struct Waiter {
    std::string identity;
    uint64_t request_id = 0;
    int rank = 0;
  };

  /// `num_workers`: the ranks a round may hear from, [0, num_workers) —
  /// cluster.max_workers under elastic membership, where the caller's
  /// `excused` says which ranks owe nothing (slots never joined, joiners).
  explicit EvalBook(int num_workers) : num_workers_(num_workers) {}

  /// Stores `p` as rank p.rank()'s partial of `round` (replacing an earlier
  /// one). Returns false (stores nothing) when the rank is outside
  /// [0, num_workers).
  bool Put(int64_t round, const EvalPartial& p);

  /// Whether every rank has a partial for `round` or excused(rank) is true.
  bool Complete(int64_t round, const std::function<bool(int)>& excused) const;

  /// When `round` is complete: its partials in rank order (excused ranks
  /// without one are left out), and the round is forgotten (except
  /// kSetupEvalRound). Otherwise returns false and keeps it.
  bool TakeComplete(int64_t round, const std::function<bool(int)>& excused, std::vector<EvalPartial>* out);

  void Park(int64_t round, Waiter w) { waiters_[round].push_back(std::move(w)); }
  /// The rounds that have waiters, in increasing order.
  std::vector<int64_t> WaitingRounds() const;
  /// Removes and returns `round`'s waiters.
  std::vector<Waiter> TakeWaiters(int64_t round);
  /// Each rank with a waiting request → the lowest round it waits at.
  std::map<int, int64_t> WaitingRanks() const;
  /// Forgets `rank`'s waiting requests (a new process took the rank: the
  /// old one is not there to be answered). Its partials stay.
  void DropWaiters(int rank);
  /// Names a round for messages: "the start", "the evaluation after epoch
  /// 3", "the final evaluation", "the validation after epoch 3".
  static std::string RoundName(int64_t round);

  /// Rounds held (for tests and counters).
  size_t rounds() const { return partials_.size(); }

  /// Everything held (partials and waiters), for JobCoordinator::Snapshot.
  void Snapshot(EvalBookState* state) const;
  /// Replaces what is held with `state` (a Snapshot's). Errors:
  /// InvalidArgument naming the round when a partial's rank is outside
  /// [0, num_workers) or listed twice; nothing changes then.
  Status Restore(const EvalBookState& state);

 private:
  int num_workers_;
  std::map<int64_t, std::map<int, EvalPartial>> partials_;  // round → rank → partial
  std::map<int64_t, std::vector<Waiter>> waiters_;
};

}  // namespace tether
