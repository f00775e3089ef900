#include "replication/replication_log.h"

#include <algorithm>
#include <utility>

#include <glog/logging.h>

namespace tether {

ReplicationLog::Role ReplicationLog::role() const {
  if (view_.learner == self_ && self_ >= 0) return Role::kLearner;
  if (!view_.Contains(self_)) return Role::kOut;
  return view_.primary() == self_ ? Role::kPrimary : Role::kReplica;
}

int ReplicationLog::successor() const {
  const Role r = role();
  if (r == Role::kOut || r == Role::kLearner) return -1;
  const int s = view_.Successor(self_);
  if (s >= 0 && s == view_.learner && !learner_ready_) return -1;
  return s;
}

bool ReplicationLog::Adopt(const ChainView& view) {
  if (!Newer(view, view_)) return false;
  const bool was_learner = role() == Role::kLearner;
  // Forwarding restarts with every entry kept: the new successor may lack
  // any entry not both committed and acknowledged by the learner this
  // member fed (an appended learner), and drops what it already has.
  const uint64_t restart = entries_.empty() ? applied_ : entries_.front().seq - 1;
  view_ = view;
  learner_ready_ = false;
  learner_counts_ = false;
  learner_applied_ = 0;
  switch (role()) {
    case Role::kOut:
      entries_.clear();
      break;
    case Role::kLearner:
      // Until the tail's state arrives (ResetTo), nothing forwarded fits.
      if (!was_learner) awaiting_state_ = true;
      break;
    case Role::kPrimary:
    case Role::kReplica:
      awaiting_state_ = false;
      TailCommit();
      sent_ = restart;
      break;
  }
  Trim();
  return true;
}

uint64_t ReplicationLog::Append(std::string payload) {
  CHECK(role() == Role::kPrimary) << "process " << self_ << " appends to a shard it is not the primary of ("
                                  << view_.ToString() << ")";
  entries_.push_back(LogEntry{++applied_, std::move(payload)});
  TailCommit();
  Trim();
  return applied_;
}

ReplicationLog::Receipt ReplicationLog::Receive(int from, const ChainView& sender, const LogEntry& entry) {
  if (Newer(view_, sender)) return Receipt::kStale;
  const Role r = role();
  if (!Same(sender) || r == Role::kOut || r == Role::kPrimary) return Receipt::kNotMine;
  if (from != view_.Predecessor(self_)) return Receipt::kNotMine;
  if (awaiting_state_) return Receipt::kGap;
  if (entry.seq <= applied_) return Receipt::kDuplicate;
  if (entry.seq != applied_ + 1) return Receipt::kGap;
  entries_.push_back(entry);
  applied_ = entry.seq;
  if (r == Role::kLearner) commit_ = applied_;
  TailCommit();
  Trim();
  return Receipt::kApply;
}

std::vector<LogEntry> ReplicationLog::TakeForward() {
  std::vector<LogEntry> out;
  if (successor() < 0) return out;
  for (const LogEntry& e : entries_)
    if (e.seq > sent_) out.push_back(e);
  sent_ = applied_;
  Trim();
  return out;
}

std::vector<LogEntry> ReplicationLog::EntriesAfter(uint64_t seq) const {
  std::vector<LogEntry> out;
  if (entries_.empty() || seq >= entries_.back().seq) return out;
  const uint64_t first = entries_.front().seq;
  for (size_t i = seq < first ? 0 : seq - first + 1; i < entries_.size(); ++i) out.push_back(entries_[i]);
  return out;
}

bool ReplicationLog::OnAck(int from, const ChainView& sender, uint64_t committed) {
  if (!Same(sender) || from < 0) return false;
  if (IsTail() && from == view_.learner) {
    // An acknowledgement from before the learner installed its copy says
    // nothing.
    if (!learner_ready_ || committed < learner_copy_) return false;
    learner_applied_ = std::max(learner_applied_, std::min(committed, applied_));
    // Caught up once, the learner counts for commits: everything committed
    // from then on is on it, so once appended it lacks nothing committed.
    if (applied_ - learner_applied_ <= catch_up_lag_) learner_counts_ = true;
    TailCommit();
    Trim();
    return true;
  }
  const Role r = role();
  if (r == Role::kOut || r == Role::kLearner || from != view_.Successor(self_)) return false;
  commit_ = std::max(commit_, std::min(committed, applied_));
  Trim();
  return true;
}

uint64_t ReplicationLog::AckValue() const { return role() == Role::kLearner ? applied_ : commit_; }

void ReplicationLog::TailCommit() {
  if (!IsTail()) return;
  const uint64_t has = learner_counts_ ? std::min(applied_, learner_applied_) : applied_;
  commit_ = std::max(commit_, has);
}

void ReplicationLog::ResetTo(uint64_t seq) {
  CHECK(role() == Role::kLearner) << "process " << self_ << " is not the learner of " << view_.ToString();
  applied_ = commit_ = sent_ = seq;
  entries_.clear();
  awaiting_state_ = false;
}

void ReplicationLog::StartLearnerAt(uint64_t seq) {
  CHECK(IsTail() && view_.learner >= 0) << "process " << self_ << " is not the tail of a view with a learner ("
                                        << view_.ToString() << ")";
  CHECK_EQ(seq, applied_) << "the learner's state must be the tail's as of its last applied update";
  sent_ = seq;
  learner_ready_ = true;
  learner_counts_ = false;
  learner_copy_ = learner_applied_ = seq;
  Trim();
}

void ReplicationLog::Trim() {
  uint64_t floor = successor() < 0 ? commit_ : std::min(commit_, sent_);
  // The tail keeps what its learner has not acknowledged: once appended,
  // the learner is sent it again from there.
  if (IsTail() && learner_ready_) floor = std::min(floor, learner_applied_);
  while (!entries_.empty() && entries_.front().seq <= floor) entries_.pop_front();
}

}  // namespace tether
