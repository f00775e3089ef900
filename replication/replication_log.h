// One member's log of a replicated shard: the updates it applied, in the
// primary's order, and how far they are committed.
//
// Each shard is a replicated state machine: its inputs are the updates the
// primary accepts (a worker's push, its clock, a coordinator decision),
// numbered by the primary in the order it applies them (seq 1, 2, ...).
// The primary forwards them to its successor, which applies them in the
// same order and forwards them on, down to the tail (chain replication, van
// Renesse and Schneider, OSDI 2004). An update is committed once the tail
// has applied it; the tail acknowledges to its predecessor, and each member
// passes its commit point up the chain. So each member's log is a prefix of
// its predecessor's, and every member holds every committed update: when
// the primary goes, the replica next in the chain has the longest log of
// those left and claims the shard (replication/chain_view.h) with nothing
// committed lost.
//
// The caller owns the state machine and the transport: Append (primary) and
// Receive (the others) say when to apply an entry; TakeForward gives what to
// send to the successor; OnAck takes the successor's acknowledgement and
// AckValue is this member's own for its predecessor. What is shown to a
// worker (a push acknowledged, a pull answered) must wait until commit()
// has passed the seq it depends on (replication/commit_waiters.h): then no
// worker ever sees an update a later primary does not have.
//
// A new view (Adopt) restarts forwarding with every entry kept: the new
// successor has at least the commit point (or, for a learner just
// appended, what it acknowledged), and ignores what it already has
// (Receipt::kDuplicate). Entries are kept until committed, sent and (at
// the tail) acknowledged by the learner, so a new successor can always be
// served; the learner of a view is first
// given the tail's state (the caller copies it at applied(), then calls
// StartLearnerAt) and then follows the tail's updates.
//
// Memory: the entries not yet committed or not yet sent (retained()); each
// is its payload. Not thread-safe: one shard member's event loop owns it.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "replication/chain_view.h"

namespace tether {

struct LogEntry {
  uint64_t seq = 0;     // 1, 2, ... in the primary's order
  std::string payload;  // the update as the caller encodes it
};

class ReplicationLog {
 public:
  enum class Role { kOut, kPrimary, kReplica, kLearner };
  enum class Receipt {
    kApply,      // appended: apply it now, then forward (TakeForward)
    kDuplicate,  // already applied (a resend after a view change): ignore
    kGap,        // an entry is missing before it: a fault of the sender
    kStale,      // sent under an older view: answer with view()
    kNotMine,    // not from this member's predecessor in the current view
  };

  /// `self`: this process's slot. Starts out of every view (kOut).
  explicit ReplicationLog(int self) : self_(self) {}

  int self() const { return self_; }
  const ChainView& view() const { return view_; }
  Role role() const;
  /// The successor to forward to (-1: none, or a learner not yet given the
  /// tail's state).
  int successor() const;

  /// Takes `view` when it is newer than the current one (Newer); false
  /// otherwise. As a member, forwarding restarts after commit(); as the
  /// tail, commit() becomes applied(). A view without this process makes
  /// the role kOut: the caller drops its state and whatever waits on
  /// commits (it can come back only as a learner, ResetTo).
  bool Adopt(const ChainView& view);

  /// Primary only: numbers `payload` applied() + 1 and keeps it; the caller
  /// applies it at once. Returns its seq.
  uint64_t Append(std::string payload);

  /// An entry `from` forwarded under its view `sender` (the view the
  /// message carries; the caller adopts it first when it is newer).
  Receipt Receive(int from, const ChainView& sender, const LogEntry& entry);
  /// The entries not yet sent to successor(), in order, marked sent.
  std::vector<LogEntry> TakeForward();
  /// The entries kept after `seq`, in order (a primary that sends to each
  /// replica itself keeps where each one is; entries above commit() are
  /// always kept).
  std::vector<LogEntry> EntriesAfter(uint64_t seq) const;

  /// `from` acknowledged `committed` under its view `sender`: from the
  /// successor, commit() advances to it (never past applied()); from the
  /// learner (at the tail), its progress is recorded (learner_applied()).
  /// False when the acknowledgement is stale or not from the successor.
  bool OnAck(int from, const ChainView& sender, uint64_t committed);
  /// What this member acknowledges to its predecessor: its commit point
  /// (the learner: applied()).
  uint64_t AckValue() const;

  /// Learner: the caller installed the tail's state as of `seq`; the log
  /// continues from seq + 1.
  void ResetTo(uint64_t seq);
  /// Tail: the learner was sent the state as of applied(); forwarding to
  /// it starts after that.
  void StartLearnerAt(uint64_t seq);
  /// Tail: the learner's last acknowledged seq (the seq of its copy
  /// before it acknowledged; acknowledgements below the copy's seq, sent
  /// before the learner installed it, are ignored).
  uint64_t learner_applied() const { return learner_applied_; }
  /// Tail: whether the learner has applied everything this tail had (or
  /// all but catch_up_lag entries). Once true, the learner counts for
  /// commits (the tail's commit point is the least of its own and the
  /// learner's), so that a learner appended to the chain holds every
  /// committed entry.
  bool LearnerCaughtUp() const { return learner_counts_; }
  /// Tail: a learner acknowledging all but `entries` of this tail's counts
  /// as caught up (default 0: everything). Under a steady stream of
  /// updates a learner's acknowledgement trails the tail by a round trip,
  /// so an exact match may never come; from then on commits wait for the
  /// learner, which is at most this many entries behind.
  void set_catch_up_lag(uint64_t entries) { catch_up_lag_ = entries; }

  uint64_t applied() const { return applied_; }
  uint64_t commit() const { return commit_; }
  /// Entries kept (not yet both committed and sent).
  size_t retained() const { return entries_.size(); }

 private:
  bool IsTail() const { return view_.tail() == self_; }
  // The same view: generation and primary (two claims of one generation
  // differ in their primary).
  bool Same(const ChainView& v) const { return v.generation == view_.generation && v.primary() == view_.primary(); }
  void Trim();
  // The tail's commit point: what it applied (and its learner, once that
  // caught up).
  void TailCommit();

  int self_;
  ChainView view_;
  uint64_t applied_ = 0;
  uint64_t commit_ = 0;
  uint64_t sent_ = 0;  // last seq sent to the successor
  bool learner_ready_ = false;
  bool learner_counts_ = false;  // the learner caught up once
  bool awaiting_state_ = false;  // learner: the tail's state not yet installed
  uint64_t learner_applied_ = 0;
  uint64_t learner_copy_ = 0;  // the seq of the copy the learner was sent
  uint64_t catch_up_lag_ = 0;
  std::deque<LogEntry> entries_;  // seq ascending, contiguous, ending at applied_
};

}  // namespace tether
