#include "server/coordinator/checkpoint_clock.h"

#include <algorithm>

namespace tether {

bool CheckpointClock::Want(int64_t latest) {
  if (due_ >= 0) return false;
  due_ = std::max(latest + 2, last_ + 1);
  return true;
}

void CheckpointClock::Entries(const RankLedger& ranks, const std::map<int, CheckpointFile>& files,
                              google::protobuf::RepeatedPtrField<CheckpointWorker>* out) const {
  for (int r = 0; r < ranks.slots(); ++r) {
    if (!ranks.Member(r)) continue;  // a joiner's slot that was never taken
    CheckpointWorker* e = out->Add();
    e->set_rank(r);
    const RankLedger::Record& rec = ranks.record(r);
    if (auto f = files.find(r); f != files.end()) {
      e->set_kind(CheckpointWorker::TRAINING);
      *e->mutable_file() = f->second;
    } else if (rec.finished) {
      *e = rec.finished_entry;
      e->set_rank(r);
      e->set_kind(CheckpointWorker::FINISHED);
      e->set_samples(rec.samples);
    } else if (auto last = last_state_.find(r); last != last_state_.end()) {
      e->set_kind(CheckpointWorker::LEFT);
      *e->mutable_file() = last->second.second;
      e->set_from_dir(last->second.first);
    } else {
      e->set_kind(CheckpointWorker::GONE);
    }
  }
}

void CheckpointClock::RoundEnded(int64_t clock, bool written, const std::string& dir,
                                 const std::map<int, CheckpointFile>& files) {
  if (written) {
    for (auto& [r, last] : last_state_) last.first = dir;
    for (const auto& [r, f] : files) last_state_[r] = {dir, f};
  }
  last_ = std::max(last_, clock);
  RoundAbandoned(clock);
}

void CheckpointClock::RoundAbandoned(int64_t clock) {
  if (due_ >= 0 && due_ <= clock) due_ = -1;
}

void CheckpointClock::Snapshot(CheckpointClockState* state) const {
  state->Clear();
  state->set_due_clock(due_);
  state->set_last_clock(last_);
  for (const auto& [rank, last] : last_state_) {
    CheckpointClockState::LastState* o = state->add_last_state();
    o->set_rank(rank);
    o->set_dir(last.first);
    *o->mutable_file() = last.second;
  }
}

Status CheckpointClock::Restore(const CheckpointClockState& state) {
  std::map<int, std::pair<std::string, CheckpointFile>> last_state;
  for (const CheckpointClockState::LastState& o : state.last_state())
    if (o.rank() < 0 || !last_state.emplace(o.rank(), std::make_pair(o.dir(), o.file())).second)
      return Status::InvalidArgument("checkpoint clock state: rank " + std::to_string(o.rank()) +
                                     " is negative or listed twice");
  due_ = state.due_clock();
  last_ = state.last_clock();
  last_state_ = std::move(last_state);
  return Status::OK();
}

}  // namespace tether
