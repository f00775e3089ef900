#include "replication/commit_waiters.h"

#include <glog/logging.h>

namespace tether {

void CommitWaiters::Hold(uint64_t seq, uint64_t id) {
  CHECK(held_.empty() || held_.back().first <= seq) << "held at log position " << seq << " after "
                                                    << held_.back().first;
  held_.emplace_back(seq, id);
}

std::vector<uint64_t> CommitWaiters::Release(uint64_t commit) {
  std::vector<uint64_t> out;
  while (!held_.empty() && held_.front().first <= commit) {
    out.push_back(held_.front().second);
    held_.pop_front();
  }
  return out;
}

std::vector<uint64_t> CommitWaiters::DropAll() {
  std::vector<uint64_t> out;
  for (const auto& h : held_) out.push_back(h.second);
  held_.clear();
  return out;
}

}  // namespace tether
