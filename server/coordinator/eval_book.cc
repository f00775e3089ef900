#include "server/coordinator/eval_book.h"

#include <algorithm>
#include <iterator>

namespace tether {

bool EvalBook::Put(int64_t round, const EvalPartial& p) {
  if (p.rank() < 0 || p.rank() >= num_workers_) return false;
  partials_[round][p.rank()] = p;
  return true;
}

bool EvalBook::Complete(int64_t round, const std::function<bool(int)>& excused) const {
  const auto it = partials_.find(round);
  for (int r = 0; r < num_workers_; ++r) {
    const bool have = it != partials_.end() && it->second.count(r) > 0;
    if (!have && !excused(r)) return false;
  }
  return true;
}

bool EvalBook::TakeComplete(int64_t round, const std::function<bool(int)>& excused, std::vector<EvalPartial>* out) {
  out->clear();
  if (!Complete(round, excused)) return false;
  const auto it = partials_.find(round);
  if (it == partials_.end()) return true;
  // std::map: rank order, whatever order the partials arrived in.
  if (round == kSetupEvalRound) {
    for (const auto& [rank, p] : it->second) out->push_back(p);
    return true;
  }
  for (auto& [rank, p] : it->second) out->push_back(std::move(p));
  partials_.erase(it);
  return true;
}

std::vector<int64_t> EvalBook::WaitingRounds() const {
  std::vector<int64_t> rounds;
  for (const auto& [round, w] : waiters_)
    if (!w.empty()) rounds.push_back(round);
  return rounds;
}

std::map<int, int64_t> EvalBook::WaitingRanks() const {
  std::map<int, int64_t> ranks;
  for (const auto& [round, list] : waiters_)
    for (const Waiter& w : list) ranks.emplace(w.rank, round);  // rounds ascend: the first is the lowest
  return ranks;
}

void EvalBook::DropWaiters(int rank) {
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    auto& list = it->second;
    list.erase(std::remove_if(list.begin(), list.end(), [rank](const Waiter& w) { return w.rank == rank; }),
               list.end());
    it = list.empty() ? waiters_.erase(it) : std::next(it);
  }
}

std::string EvalBook::RoundName(int64_t round) {
  if (round == kSetupEvalRound) return "the start";
  if (round == kFinalEvalRound) return "the final evaluation";
  if (round >= kValidationEvalRound) return "the validation after epoch " + std::to_string(round - kValidationEvalRound);
  return "the evaluation after epoch " + std::to_string(round);
}

std::vector<EvalBook::Waiter> EvalBook::TakeWaiters(int64_t round) {
  std::vector<Waiter> w;
  const auto it = waiters_.find(round);
  if (it == waiters_.end()) return w;
  w = std::move(it->second);
  waiters_.erase(it);
  return w;
}

void EvalBook::Snapshot(EvalBookState* state) const {
  state->Clear();
  for (const auto& [round, by_rank] : partials_) {
    EvalBookState::Round* r = state->add_rounds();
    r->set_round(round);
    for (const auto& [rank, p] : by_rank) *r->add_partials() = p;
  }
  for (const auto& [round, list] : waiters_) {
    for (const Waiter& w : list) {
      EvalBookState::Waiter* o = state->add_waiters();
      o->set_round(round);
      o->set_identity(w.identity);
      o->set_request_id(w.request_id);
      o->set_rank(w.rank);
    }
  }
}

Status EvalBook::Restore(const EvalBookState& state) {
  std::map<int64_t, std::map<int, EvalPartial>> partials;
  for (const EvalBookState::Round& r : state.rounds()) {
    std::map<int, EvalPartial>& by_rank = partials[r.round()];
    for (const EvalPartial& p : r.partials()) {
      if (p.rank() < 0 || p.rank() >= num_workers_ || !by_rank.emplace(p.rank(), p).second)
        return Status::InvalidArgument("evaluation round " + std::to_string(r.round()) + ": the partial of rank " +
                                       std::to_string(p.rank()) + " is outside [0, " + std::to_string(num_workers_) +
                                       ") or listed twice");
    }
  }
  std::map<int64_t, std::vector<Waiter>> waiters;
  for (const EvalBookState::Waiter& w : state.waiters())
    waiters[w.round()].push_back({w.identity(), w.request_id(), w.rank()});
  partials_ = std::move(partials);
  waiters_ = std::move(waiters);
  return Status::OK();
}

}  // namespace tether
