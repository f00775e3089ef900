// ChunkCoordinator: data on demand. Deals chunks of training rows to workers
// as they ask, so a fast worker trains on more rows than a slow one, and
// every row is used exactly once per epoch whatever the speeds and whoever
// joins or leaves. The remedy for stragglers of Sandblaster (Dean et al.,
// "Large Scale Distributed Deep Networks", NIPS 2012: small portions handed
// out on demand) and of Adaptive SGD (Ma et al., arXiv 2110.07029: batches
// routed by relative speed).
//
// The protocol, per epoch e (0-based, e < epochs):
//   - the epoch's chunks are dealt in an order drawn from (seed, e) when
//     `shuffle` is on, else in the order given;
//   - Next(w) hands worker w the next undealt chunk of the oldest epoch that
//     has one. A chunk is *held* by w until w completes it or leaves;
//   - Complete(w, id, rows) marks it used: its rows count for w and for the
//     epoch. Only the holder may complete a chunk, and only once: a
//     completion from a worker that no longer holds it (it was declared gone
//     and the chunk re-dealt) is refused and counts nothing, so completed
//     chunks are used exactly once. Pushes made from a re-dealt chunk's rows
//     before its holder died stay applied (at-least-once for updates);
//   - Leave(w) (a graceful leave or a worker declared gone) returns w's held
//     chunks to the front of their epoch's pool; they are counted as
//     re-dealt when handed out again;
//   - with `epoch_barrier`, a worker that finds the current epoch's pool
//     empty while other chunks of it are still held is told to wait (kWait)
//     until they complete; without it, it starts on the next epoch at once
//     (at most one epoch ahead of the oldest incomplete epoch; further ahead
//     it waits too, so evaluation at an epoch's end sees every row of it).
//   - kDone once every chunk of every epoch is completed.
//
// Workers are named by any non-negative rank: nothing is sized by a worker
// count, so a worker that joins mid-job simply asks (elastic membership).
//
// Units: a chunk's [begin, end) are rows of an in-memory set or bytes of a
// streamed file (DataChunk::unit says which); `rows` at completion is what
// the worker read. Not thread-safe: owned by the job coordinator
// (server/coordinator/chunk_service.h).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/status.h"

namespace tether {

class ChunkCoordinatorState;  // proto/checkpoint.proto
class ChunkDealingState;      // proto/coordinator.proto

struct DataChunk {
  enum class Unit { kRows, kBytes };
  Unit unit = Unit::kRows;
  uint32_t file = 0;   // index into the job's training file list
  uint64_t begin = 0;  // first row (kRows) or byte (kBytes), inclusive
  uint64_t end = 0;    // exclusive; end > begin

  bool operator==(const DataChunk& o) const {
    return unit == o.unit && file == o.file && begin == o.begin && end == o.end;
  }
};

/// Splits rows [0, num_rows) of file `file` into ceil(num_rows / chunk_rows)
/// row chunks of chunk_rows rows (the last may be shorter). chunk_rows > 0.
std::vector<DataChunk> MakeRowChunks(uint32_t file, uint64_t num_rows, uint64_t chunk_rows);

/// Splits rows [0, num_rows) of `file` into chunks that taper: from the
/// start, each chunk is a quarter of the rows not yet split, rounded up,
/// capped at chunk_rows and at least max(1, chunk_rows / 8) (or the rest).
/// Dealt largest first (ChunkCoordinator::set_deal_largest_first), the last
/// chunks of an epoch are small, so the workers finish it together: guided
/// self-scheduling (Polychronopoulos & Kuck, IEEE Trans. Computers 1987:
/// chunk = remaining / P) with factoring's divisor 2P for P = 2 (Hummel,
/// Schonberg & Flynn, CACM 1992), which leaves room for a worker half as
/// fast as the other. At most 8 chunks more than MakeRowChunks's
/// ceil(num_rows / chunk_rows) (checked by brute force over sizes up to
/// 4,096). chunk_rows > 0.
std::vector<DataChunk> MakeTaperedRowChunks(uint32_t file, uint64_t num_rows, uint64_t chunk_rows);

/// A streamed training set's chunks (data.streaming): byte ranges
/// [begin, end) of each file in turn (unit kBytes; the file's index in
/// `file_bytes`). A plain file of B bytes is cut into ceil(B / chunk_bytes)
/// ranges of chunk_bytes bytes (the last may be shorter), or with `taper`
/// as MakeTaperedRowChunks cuts rows; a gzip file (`gzip[i]`), which cannot
/// be entered in the middle, is one chunk [0, B). Each row of a file lies
/// in exactly one range (input/row_stream.h: a row belongs to the range
/// holding its first byte). Requires chunk_bytes > 0, every size > 0 and
/// gzip.size() == file_bytes.size() (CHECK).
std::vector<DataChunk> MakeByteChunks(const std::vector<uint64_t>& file_bytes, const std::vector<bool>& gzip,
                                      uint64_t chunk_bytes, bool taper);

class ChunkCoordinator {
 public:
  enum class GrantKind { kChunk, kWait, kDone };
  struct Grant {
    GrantKind kind = GrantKind::kWait;
    uint64_t id = 0;     // with kChunk: the id to complete; unique over the job
    int64_t epoch = 0;   // with kChunk: the epoch it belongs to
    DataChunk chunk;     // with kChunk
    bool redealt = false;  // with kChunk: handed out before to a worker that left
  };

  struct WorkerCounts {
    int64_t chunks_completed = 0;
    int64_t rows_completed = 0;
    int64_t chunks_held = 0;
  };

  /// chunks: one epoch's chunks (non-empty); epochs >= 1. Errors are
  /// programmer errors (CHECK).
  ChunkCoordinator(std::vector<DataChunk> chunks, int64_t epochs, uint64_t seed, bool shuffle,
                   bool epoch_barrier);

  /// Deals each epoch's chunks largest first (ties in the shuffled order),
  /// for MakeTaperedRowChunks. Call before the first Next; off by default.
  void set_deal_largest_first(bool on) { largest_first_ = on; }

  /// What worker `rank` (>= 0) does next. Never fails.
  Grant Next(int rank);
  /// `rank` finished chunk `id`, having read `rows` rows of it (>= 0).
  /// Errors: FailedPrecondition when `rank` does not hold `id` (never dealt,
  /// already completed, or taken back by Leave); nothing is counted then.
  Status Complete(int rank, uint64_t id, int64_t rows);
  /// `rank` left or was declared gone: its held chunks go back to their
  /// epoch's pool, ahead of undealt ones. Returns how many it held.
  int Leave(int rank);

  bool done() const { return completed_epochs_ == epochs_; }
  /// Epochs whose every chunk is completed (they complete in order).
  int64_t completed_epochs() const { return completed_epochs_; }
  int64_t epochs() const { return epochs_; }
  size_t chunks_per_epoch() const { return chunks_.size(); }
  /// Rows completed in epoch e (sum over its chunks' completions).
  int64_t epoch_rows(int64_t e) const { return epoch_rows_.at(static_cast<size_t>(e)); }
  /// Chunks handed out again after their holder left, and those chunks' sizes
  /// in their unit (rows or bytes), over the job.
  int64_t redealt_chunks() const { return redealt_chunks_; }
  uint64_t redealt_units() const { return redealt_units_; }
  /// Per worker (every rank that ever asked).
  const std::map<int, WorkerCounts>& workers() const { return workers_; }

  // ---- Checkpoints (checkpoint/chunk_state.h; defined in server/coordinator/chunk_checkpoint.cc).
  /// Fills the dealing fields of `state` (chunks_per_epoch, epochs, seed,
  /// shuffle, epoch_barrier, completed_epochs, epoch_rows, open, done_ahead,
  /// next_id, redealt counts, workers' counts); the shape fields of the
  /// wire (train_rows, chunk_rows) are the caller's. Chunks held now are
  /// saved as held, not completed.
  void SaveState(ChunkCoordinatorState* state) const;
  /// Continues from `state` (a SaveState of a coordinator over the same
  /// chunk list and seed) in a coordinator that has dealt nothing yet: the
  /// completed chunks stay completed, the held ones are dealt again first
  /// (and count as re-dealt), the rest are dealt in the epoch's order.
  /// `state.epochs` may differ from this coordinator's: epochs past its own
  /// are dropped. Errors: FailedPrecondition when this coordinator has
  /// dealt a chunk; InvalidArgument naming the field when the state does
  /// not fit (chunks_per_epoch, seed, shuffle, epoch_barrier) or is
  /// malformed (a chunk index out of range or listed twice, an epoch out of
  /// order); the coordinator is unchanged then.
  Status RestoreState(const ChunkCoordinatorState& state);

  // ---- Copies (JobCoordinator::Snapshot / Restore).
  /// The whole dealing state, exactly: each open epoch's order still to
  /// deal and its chunks given back, every held chunk under its grant id
  /// and holder, the counts. Fills those fields of `state` (not shape and
  /// the service's counts).
  void Snapshot(ChunkDealingState* state) const;
  /// Continues exactly from `state` (a Snapshot of a coordinator over the
  /// same chunk list, epochs and seed) in a coordinator that has dealt
  /// nothing: held chunks stay held by their ranks, nothing is dealt again.
  /// Errors: FailedPrecondition when this one has dealt a chunk;
  /// InvalidArgument naming the field when `state` does not fit (an epoch
  /// out of range, a chunk index past the list or listed twice); the
  /// coordinator is unchanged then.
  Status Restore(const ChunkDealingState& state);

 private:
  struct Epoch {
    std::vector<uint32_t> order;     // chunk indices in dealing order
    size_t next = 0;                 // next undealt position in order
    std::vector<uint32_t> returned;  // chunks given back by Leave: dealt first
    size_t completed = 0;
  };
  struct Held {
    int rank;
    int64_t epoch;
    uint32_t chunk;
    bool redealt;
  };

  bool HasUndealt(const Epoch& ep) const { return !ep.returned.empty() || ep.next < ep.order.size(); }
  void EnsureEpoch(int64_t e);

  std::vector<DataChunk> chunks_;
  int64_t epochs_;
  uint64_t seed_;
  bool shuffle_;
  bool barrier_;
  bool largest_first_ = false;
  std::map<int64_t, Epoch> open_;  // epochs begun and not yet completed
  std::vector<int64_t> epoch_rows_;
  std::vector<bool> epoch_done_;
  int64_t completed_epochs_ = 0;
  uint64_t next_id_ = 1;
  std::map<uint64_t, Held> held_;  // by grant id
  std::map<int, WorkerCounts> workers_;
  int64_t redealt_chunks_ = 0;
  uint64_t redealt_units_ = 0;
};

}  // namespace tether
