#include "server/eval_book.h"

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

std::vector<EvalBook::Waiter> EvalBook::TakeWaiters(int64_t round) {
  std::vector<Waiter> w;
  const auto it = waiters_.find(round);
  if (it == waiters_.end()) return w;
  w = std::move(it->second);
  waiters_.erase(it);
  return w;
}

}  // namespace tether
