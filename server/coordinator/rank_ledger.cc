#include "server/coordinator/rank_ledger.h"

#include <algorithm>
#include <string>

namespace tether {

uint64_t RankLedger::Joined(int rank) {
  Record& r = records_[rank];
  const uint64_t inherited = r.samples;
  r = Record();
  r.joined = true;
  r.samples = inherited;
  return inherited;
}

void RankLedger::Clocked(int rank, uint64_t samples) {
  Record& r = records_[rank];
  if (!r.finished) r.samples = std::max(r.samples, samples);
}

uint64_t RankLedger::TotalSamples() const {
  uint64_t total = 0;
  for (const auto& [rank, r] : records_)
    if (Member(rank)) total += r.samples;
  return total;
}

void RankLedger::Finished(int rank, uint64_t samples, const CheckpointWorker& entry) {
  Record& r = records_[rank];
  r.finished = true;
  r.samples = samples;
  r.finished_entry = entry;
}

void RankLedger::Left(int rank) { records_[rank].left = true; }

void RankLedger::Removed(int rank) { records_[rank].removed = true; }

bool RankLedger::Member(int rank) const { return rank < initial_workers_ || record(rank).joined; }

bool RankLedger::Excused(int rank) const { return rank >= initial_workers_ || Gone(rank); }

bool RankLedger::Gone(int rank) const {
  const Record& r = record(rank);
  return r.left || r.removed;
}

const RankLedger::Record& RankLedger::record(int rank) const {
  static const Record kNone;
  auto it = records_.find(rank);
  return it == records_.end() ? kNone : it->second;
}

int RankLedger::slots() const {
  return records_.empty() ? initial_workers_ : std::max(initial_workers_, records_.rbegin()->first + 1);
}

void RankLedger::Snapshot(CoordinatorState* state) const {
  state->clear_ranks();
  for (const auto& [rank, r] : records_) {
    CoordinatorRank* o = state->add_ranks();
    o->set_rank(rank);
    o->set_joined(r.joined);
    o->set_left(r.left);
    o->set_removed(r.removed);
    o->set_finished(r.finished);
    o->set_samples(r.samples);
    if (r.finished) *o->mutable_finished_entry() = r.finished_entry;
  }
}

Status RankLedger::Restore(const CoordinatorState& state) {
  std::map<int, Record> records;
  for (const CoordinatorRank& o : state.ranks()) {
    auto [it, added] = records.try_emplace(o.rank());
    if (o.rank() < 0 || !added)
      return Status::InvalidArgument("coordinator state: rank " + std::to_string(o.rank()) +
                                     " is negative or listed twice");
    Record& r = it->second;
    r.joined = o.joined();
    r.left = o.left();
    r.removed = o.removed();
    r.finished = o.finished();
    r.samples = o.samples();
    r.finished_entry = o.finished_entry();
  }
  records_ = std::move(records);
  return Status::OK();
}

}  // namespace tether
