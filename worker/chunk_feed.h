// ChunkFeed: one worker's side of data on demand (train.data_on_demand;
// issue 13 item 1; shard 0's side is server/chunk_service.h). The worker
// holds the whole training set in memory; per epoch it asks shard 0 for
// chunks (rows [begin, end) of that set) until the epoch is over for it,
// trains each chunk's rows, and completes it with its next request. So a
// fast worker trains on more rows than a slow one, and every row is used
// exactly once per epoch whoever is slow, leaves or rejoins.
//
// An epoch is over for this worker when shard 0 deals a chunk of a later
// epoch (kept for then) or says DONE; shard 0 deals no chunk of epoch e + 1
// before every chunk of e is completed (an epoch barrier), so the
// evaluation after an epoch sees all of it. While every chunk of the epoch
// is dealt but others still train theirs, shard 0 says WAIT: the feed asks
// again after a bounded backoff (2 ms doubling to 50 ms; 2 ms again while
// the fastest worker's clock moves), heartbeating, and meanwhile completes
// empty clocks up to the fastest worker's clock, so a finite staleness bound
// never has the last chunks' holders wait on it for long.
//
// The network is behind ChunkFeedHooks (tests drive a ChunkService
// directly). Not thread-safe: the training thread owns it.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "core/status.h"
#include "proto/tether.pb.h"
#include "sparse/csr.h"

namespace tether {

struct ChunkFeedHooks {
  /// One CHUNK_NEXT round trip to shard 0 (WorkerClient::ChunkNext).
  std::function<StatusOr<DataOnDemandChunk>(const DataOnDemandChunk&)> ask;
  /// Waits `ms` milliseconds, keeping the worker alive (WorkerClient::Idle).
  std::function<Status(int ms)> idle;
  /// This worker's completed clocks, and completing one with no updates
  /// (WorkerClient::clock / Clock).
  std::function<int64_t()> clock;
  std::function<Status()> empty_clock;
  /// Polled while waiting; true ends the wait (stopped()). May be empty.
  std::function<bool()> stop;
};

/// The order in which a worker trains the rows of chunk [begin, end) of
/// `epoch`: a permutation of begin..end−1 drawn from (seed, epoch, begin)
/// with an explicit Fisher–Yates over std::mt19937_64, so every standard
/// library and every worker that trains the chunk (a re-dealt one too)
/// sees the same order. end ≥ begin.
std::vector<int64_t> ChunkRowOrder(uint64_t seed, int64_t epoch, uint64_t begin, uint64_t end);

class ChunkFeed {
 public:
  /// `shape`: train_rows (= features.rows), chunk_rows, epochs and seed of
  /// the job (DataOnDemandChunk's CHUNK_NEXT fields). `features` / `labels`:
  /// the whole training set, not owned, outliving the feed.
  ChunkFeed(DataOnDemandChunk shape, const CsrMatrix* features, const CsrMatrix* labels, ChunkFeedHooks hooks);

  /// Asks for the first chunk and returns the epoch it is of: 0 at the
  /// start of a job, the epoch in progress for a worker that joins or
  /// rejoins mid-job (it skips the epochs already done), `epochs` when the
  /// job's chunks are all done. Call once, before Next. Errors: the hooks'.
  StatusOr<int> FirstEpoch();

  /// Completes the chunk trained since the last call (all its rows), then
  /// the next chunk of `epoch`: fills *x / *y with its rows in
  /// ChunkRowOrder and returns true; false when the epoch is over for this
  /// worker (or stopped()). Errors: the hooks'; Internal when shard 0 deals
  /// a chunk outside the training set or of an epoch already over.
  StatusOr<bool> Next(int epoch, CsrMatrix* x, CsrMatrix* y);

  /// A stop (hooks.stop) ended a wait: leave the job; the chunk in hand is
  /// not completed, and shard 0 deals it again.
  bool stopped() const { return stopped_; }
  /// Rows of this worker's chunks that shard 0 counted, by epoch (index:
  /// the 0-based epoch; skipped epochs 0).
  const std::vector<int64_t>& epoch_rows() const { return epoch_rows_; }
  uint64_t chunks_completed() const { return chunks_completed_; }
  /// Completions shard 0 refused (the chunk was taken back while this
  /// worker was declared gone): trained, not counted.
  uint64_t chunks_refused() const { return chunks_refused_; }
  /// Chunks dealt to this worker that had been dealt to a worker that left.
  uint64_t chunks_redealt() const { return chunks_redealt_; }
  /// Time spent waiting (WAIT replies), in seconds, and the empty clocks
  /// completed meanwhile.
  double wait_seconds() const { return wait_seconds_; }
  int64_t empty_clocks() const { return empty_clocks_; }

 private:
  // Asks (carrying the completion of current_, if any) until shard 0 deals
  // a chunk (next_), says DONE (done_) or a stop ends the wait (stopped_).
  Status Fetch();

  DataOnDemandChunk shape_;
  const CsrMatrix* features_;
  const CsrMatrix* labels_;
  ChunkFeedHooks hooks_;
  std::optional<DataOnDemandChunk> current_;  // trained since the last Next, to complete
  std::optional<DataOnDemandChunk> next_;     // dealt, not begun (a later epoch's)
  bool done_ = false;
  bool stopped_ = false;
  std::vector<int64_t> epoch_rows_;
  uint64_t chunks_completed_ = 0;
  uint64_t chunks_refused_ = 0;
  uint64_t chunks_redealt_ = 0;
  double wait_seconds_ = 0;
  int64_t empty_clocks_ = 0;
};

}  // namespace tether
