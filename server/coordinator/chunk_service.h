// ChunkService: data on demand on the wire (train.data_on_demand). The job
// coordinator owns one (server/coordinator/job_coordinator.h); it turns each
// CHUNK_NEXT (worker → shard 0) into calls on a ChunkCoordinator
// (server/coordinator/chunk_coordinator.h: the protocol, with its
// exactly-once proof by property tests) and builds the CHUNK_REPLY body.
// The coordinator calls Leave when a worker says BYE, is declared gone
// (cluster.worker_timeout_ms) or rejoins with a new HELLO, so the chunks it
// held are dealt again.
//
// The coordinator is created by the first CHUNK_NEXT from the job's shape
// that request carries (train_rows, chunk_rows, epochs, seed): the workers
// read the training set, the server does not, so no server flag has to
// repeat the data's size. A later request of another shape is refused,
// naming both. Chunks are rows [begin, end) of the whole training set, or
// for streamed files (data.streaming: the request carries the files' sizes
// and gzip flags and chunk_bytes) byte ranges [begin, end) of one file
// (MakeByteChunks; a gzip file whole), completed with the rows the worker
// read of them; the files' count and sizes are part of the shape. Chunks
// are dealt in an order drawn from (seed, epoch), with an epoch barrier: no chunk of
// epoch e + 1 is dealt before every chunk of epoch e is completed (so the
// evaluation after an epoch sees all of it, and a worker learns that an
// epoch is over from a chunk of the next one or DONE).
//
// Workers are any non-negative rank; nothing is sized by a worker count.
// Not thread-safe: the job coordinator owns it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/status.h"
#include "proto/coordinator.pb.h"
#include "proto/checkpoint.pb.h"
#include "proto/stats.pb.h"
#include "proto/wire.pb.h"
#include "server/coordinator/chunk_coordinator.h"

namespace tether {

class ChunkService {
 public:
  /// `log_prefix` starts every log line ("[server 0] ").
  explicit ChunkService(std::string log_prefix = "") : log_prefix_(std::move(log_prefix)) {}

  /// Answers CHUNK_NEXT `request` of worker `rank` (≥ 0): counts the
  /// completion it carries (completed_id ≠ 0), then deals the next chunk,
  /// WAIT or DONE. `max_clock`: the largest clock of the workers counting on
  /// this shard, returned with WAIT (DataOnDemandChunk.max_clock).
  /// Errors (nothing is dealt or counted): InvalidArgument for a shape that
  /// is malformed (train_rows, chunk_rows or epochs < 1; streamed: an empty
  /// file, chunk_bytes < 1, sizes and gzip flags of different counts) or
  /// differs from the job's (the first request's), naming both. A completion the coordinator
  /// refuses (the worker no longer holds the chunk) is no error: the reply
  /// says completion_counted false, and it is logged.
  StatusOr<DataOnDemandChunk> Next(int rank, const DataOnDemandChunk& request, int64_t max_clock);

  /// Worker `rank` left, was declared gone, or rejoined afresh: the chunks
  /// it held go back to their epoch's pool. Returns how many. A no-op
  /// before the first request.
  int Leave(int rank);

  /// Whether a request has created the coordinator (data on demand in use).
  bool active() const { return coordinator_ != nullptr; }
  /// Sets chunks_dealt, chunks_redealt, rows_redealt and chunk_epoch_rows
  /// of `stats` (zeros and no epochs when inactive). Streamed: rows_redealt
  /// counts the rows of re-dealt chunks as they are completed.
  void FillStats(ShardStats* stats) const;
  /// Rows completed by worker `rank` in epoch `e` (0 when none).
  int64_t WorkerEpochRows(int rank, int64_t e) const;
  /// The coordinator, or null before the first request.
  const ChunkCoordinator* coordinator() const { return coordinator_.get(); }

  // ---- Checkpoints (checkpoint/chunk_state.h; defined in server/coordinator/chunk_checkpoint.cc).
  /// The dealing state now, with the job's shape and `clock`; false (and
  /// `*state` untouched) before the first request.
  bool SaveState(int64_t clock, ChunkCoordinatorState* state) const;
  /// A resumed job: the first request creates the coordinator from `state`
  /// (a checkpoint's), after checking that its shape agrees (DiffChunkShape:
  /// train_rows, chunk_rows, seed); a request of another shape is refused
  /// with InvalidArgument naming the field and nothing is created, so the
  /// next request is checked again. Errors: FailedPrecondition once a
  /// request has created the coordinator.
  Status Resume(ChunkCoordinatorState state);

  // ---- Copies (JobCoordinator::Snapshot / Restore).
  /// Everything, exactly (ChunkDealingState: the shape, the coordinator's
  /// dealing, the counts, a checkpoint's state not yet applied).
  void Snapshot(ChunkDealingState* state) const;
  /// Replaces everything with `state` (a Snapshot's). Errors:
  /// InvalidArgument naming the field when it does not fit its shape's
  /// chunk list (ChunkCoordinator::Restore) or the shape is malformed;
  /// nothing changes then.
  Status Restore(const ChunkDealingState& state);

 private:
  // The log line of an epoch just completed: its rows by worker and the
  // re-dealt counts so far.
  void LogEpoch(int64_t e) const;
  // The completion `request` carries (completed_id ≠ 0): whether it counted
  // (false, logged: `rank` no longer holds the chunk).
  bool CountCompletion(int rank, const DataOnDemandChunk& request);
  // Deals `rank` (named `who` in the logs) its next chunk, WAIT (with
  // `max_clock`) or DONE into `reply`.
  void Deal(int rank, const std::string& who, int64_t max_clock, DataOnDemandChunk* reply);

  std::string log_prefix_;
  DataOnDemandChunk shape_;  // the job's shape (train_rows, chunk_rows, epochs, seed)
  std::unique_ptr<ChunkCoordinator> coordinator_;
  uint64_t dealt_ = 0;
  // Chunks dealt and not yet completed: id → (holder, epoch), for the
  // per-epoch per-worker counts; a left worker's entries go with Leave.
  std::map<uint64_t, std::pair<int, int64_t>> open_;
  std::map<int, std::vector<int64_t>> epoch_rows_;  // rank → rows completed per epoch
  // Streamed: the open chunks that were re-dealt, and the rows counted at
  // the completion of re-dealt chunks (ShardStats.rows_redealt).
  std::set<uint64_t> redealt_open_;
  uint64_t redealt_rows_ = 0;
  // Resume: the checkpoint's state, applied by the first request.
  std::unique_ptr<ChunkCoordinatorState> resume_;
  // Creates the coordinator from resume_ for `request` (its shape checked).
  Status StartFromCheckpoint(const DataOnDemandChunk& request, const std::string& who);
};

}  // namespace tether
