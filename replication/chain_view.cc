#include "replication/chain_view.h"

#include <algorithm>
#include <sstream>

#include <glog/logging.h>

namespace tether {
namespace {

bool In(const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }

}  // namespace

bool ChainView::Contains(int process) const { return In(members, process); }

int ChainView::Successor(int process) const {
  const auto it = std::find(members.begin(), members.end(), process);
  if (it == members.end()) return -1;
  if (it + 1 != members.end()) return *(it + 1);
  return learner;
}

int ChainView::Predecessor(int process) const {
  if (process == learner && process >= 0) return tail();
  const auto it = std::find(members.begin(), members.end(), process);
  if (it == members.end() || it == members.begin()) return -1;
  return *(it - 1);
}

std::string ChainView::ToString() const {
  std::ostringstream out;
  out << "generation " << generation << ": ";
  for (size_t i = 0; i < members.size(); ++i) out << (i ? " → " : "") << members[i];
  if (members.empty()) out << "(no members)";
  if (learner >= 0) out << " (learner " << learner << ")";
  return out.str();
}

bool Newer(const ChainView& a, const ChainView& b) {
  if (a.generation != b.generation) return a.generation > b.generation;
  return a.primary() > b.primary();
}

ChainView InitialChain(int shard, int processes, int replicas) {
  CHECK(processes > 0 && replicas >= 0 && replicas < processes && shard >= 0 && shard < processes)
      << "InitialChain(" << shard << ", " << processes << ", " << replicas << ")";
  ChainView v;
  v.generation = 1;
  for (int i = 0; i <= replicas; ++i) v.members.push_back((shard + i) % processes);
  return v;
}

ChainView Without(const ChainView& view, const std::vector<int>& gone) {
  ChainView next;
  next.generation = view.generation + 1;
  for (int m : view.members)
    if (!In(gone, m)) next.members.push_back(m);
  next.learner = In(gone, view.learner) ? -1 : view.learner;
  if (next.members.empty()) next.learner = -1;
  return next;
}

ChainView WithLearner(const ChainView& view, int process) {
  CHECK(!view.Contains(process)) << "process " << process << " is already in " << view.ToString();
  ChainView next = view;
  next.generation = view.generation + 1;
  next.learner = process;
  return next;
}

ChainView WithLearnerAppended(const ChainView& view) {
  CHECK_GE(view.learner, 0) << view.ToString() << " has no learner";
  ChainView next = view;
  next.generation = view.generation + 1;
  next.members.push_back(view.learner);
  next.learner = -1;
  return next;
}

int Claimant(const ChainView& view, const std::vector<int>& gone) {
  for (int m : view.members)
    if (!In(gone, m)) return m;
  return -1;
}

}  // namespace tether
