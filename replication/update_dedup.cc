#include "replication/update_dedup.h"

#include <glog/logging.h>

namespace tether {

UpdateDedup::Verdict UpdateDedup::Check(int rank, uint64_t seq) const {
  const uint64_t last_applied = last(rank);
  if (seq <= last_applied) return Verdict::kDuplicate;
  return seq == last_applied + 1 ? Verdict::kNew : Verdict::kGap;
}

void UpdateDedup::Applied(int rank, uint64_t seq, uint64_t log_seq) {
  CHECK(rank >= 0 && Check(rank, seq) == Verdict::kNew)
      << "rank " << rank << " update " << seq << " applied out of order (last " << last(rank) << ")";
  if (static_cast<size_t>(rank) >= last_.size()) {
    last_.resize(rank + 1, 0);
    log_seq_.resize(rank + 1, 0);
  }
  last_[rank] = seq;
  log_seq_[rank] = log_seq;
}

void UpdateDedup::Restart(int rank) {
  if (!Has(rank)) return;
  last_[rank] = 0;
  log_seq_[rank] = 0;
}

}  // namespace tether
