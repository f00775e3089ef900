// Which of each worker's numbered updates a replicated shard has applied
// (replication/update_window.h numbers them), so that an update sent again
// after a failover is applied once: part of the shard's replicated state,
// changed only by applying the shard's log (replication/replication_log.h),
// so every member of the chain has the same one.
//
// A worker applies its updates to a shard in order: the next one must be
// the last applied + 1; an older number is a resend (kDuplicate); a larger
// one means an update was lost in between (kGap: the sender is at fault).
// A worker process that starts again under its rank numbers from 1 again:
// its HELLO, applied as an update of the shard, calls Restart(rank).
//
// Memory: two integers per rank. Not thread-safe: the shard's event loop.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tether {

class UpdateDedup {
 public:
  enum class Verdict { kNew, kDuplicate, kGap };

  /// Whether `rank`'s update number `seq` (≥ 1) is the next one to apply.
  Verdict Check(int rank, uint64_t seq) const;
  /// `rank`'s update `seq` was applied as log entry `log_seq`. Requires
  /// Check(rank, seq) == kNew.
  void Applied(int rank, uint64_t seq, uint64_t log_seq);
  /// `rank` numbers its updates from 1 again (a new worker process).
  void Restart(int rank);
  /// `rank`'s last applied update number (0: none).
  uint64_t last(int rank) const { return Has(rank) ? last_[rank] : 0; }
  /// The log entry that applied `rank`'s last update (0: none): once the
  /// shard's commit point passes it, every update of `rank` up to last()
  /// is committed.
  uint64_t last_log_seq(int rank) const { return Has(rank) ? log_seq_[rank] : 0; }

  bool operator==(const UpdateDedup& o) const { return last_ == o.last_ && log_seq_ == o.log_seq_; }

 private:
  bool Has(int rank) const { return rank >= 0 && static_cast<size_t>(rank) < last_.size(); }
  std::vector<uint64_t> last_;
  std::vector<uint64_t> log_seq_;
};

}  // namespace tether
