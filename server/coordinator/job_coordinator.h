// The job coordinator: the one place that decides for the whole job, where
// a shard decides only for its own keys (the role ps-lite calls the
// scheduler). It owns
//   - data dealing (data on demand: CHUNK_NEXT; server/coordinator/chunk_service.h),
//   - evaluation gathering (EVAL_GATHER; server/coordinator/eval_book.h),
//   - adaptive batch sizes (a CLOCK's report;
//     server/coordinator/adaptive_batches.h),
//   - the checkpoint clock and the manifest's rank entries
//     (server/coordinator/checkpoint_clock.h),
//   - the evaluator rank (the rank that evaluates and reports, fixed by
//     the barrier's first release),
// and learns the job's membership from the events its host forwards
// (server/coordinator/rank_ledger.h), never by reading a shard's state.
//
// Shard 0's process hosts it today (ServerShard makes one when it is
// shard kCoordinatorShard; the other shards have none and refuse
// CHUNK_NEXT and EVAL_GATHER). Nothing here assumes that: requests come in
// as messages, replies go out through an Outbox, and the whole state is
// one message (CoordinatorState, proto/coordinator.proto) that Snapshot()
// copies and Restore() continues from exactly, so that it can be
// checkpointed and copied to another process.
//
// Ownership: the host owns the coordinator; the Outbox outlives it.
// Thread-safety: none; the host calls it from one thread (the shard's
// event loop).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "core/net/message.h"
#include "core/status.h"
#include "proto/coordinator.pb.h"
#include "proto/checkpoint.pb.h"
#include "proto/stats.pb.h"
#include "proto/wire.pb.h"
#include "core/net/outbox.h"

namespace tether {

/// The shard whose process hosts the job coordinator.
inline constexpr int kCoordinatorShard = 0;
/// CoordinatorState.format_version this build writes and reads.
inline constexpr uint32_t kCoordinatorStateFormatVersion = 1;

/// A worker's CLOCK as the coordinator needs it.
struct ClockReport {
  int rank = 0;
  bool want_checkpoint = false;
  const AdaptiveBatchClock* adaptive = nullptr;  // its report, or null
  std::optional<uint64_t> samples;               // the rows it has trained so far (ClockBody.samples)
  // The largest clock of the workers counting at the host (0 when none).
  int64_t latest_clock = 0;
  // Seconds the rank's pulls have waited on the staleness bound at the host.
  double bound_wait_s = 0;
  std::chrono::steady_clock::time_point now;
};

class JobCoordinator {
 public:
  virtual ~JobCoordinator() = default;

  // ---- Membership, as the host's shard admits and loses workers.
  /// A HELLO of `rank` was admitted; `rejoined`: the rank had joined before
  /// (a restarted process: it holds none of the old one's chunks). Returns
  /// the rows the rank's earlier processes trained (0 for a first join):
  /// the new process counts on from there (HELLO_REPLY.rejoin_samples).
  virtual uint64_t WorkerJoined(int rank, bool rejoined) = 0;
  /// `rank` reached the barrier (BARRIER: its samples and `finished`).
  virtual void WorkerFinished(int rank, uint64_t samples, const CheckpointWorker& finished) = 0;
  /// `rank` said BYE / was removed for silence: its chunks are dealt again,
  /// and the evaluation rounds it held back may be answered.
  virtual void WorkerLeft(int rank) = 0;
  virtual void WorkerRemoved(int rank) = 0;

  // ---- Requests. A non-OK Status means the request was refused and
  // answered with an ERROR_REPLY (the host counts a bad message).
  /// A CLOCK's part for the whole job: sets reply->checkpoint_clock (the
  /// due checkpoint, picked now on want_checkpoint) and, with a report,
  /// reply->batch_size. Sends nothing: the host replies (or, on an error,
  /// refuses). Errors: AdaptiveBatches::Report's.
  virtual Status Clock(const ClockReport& report, ClockReplyBody* reply) = 0;
  /// CHUNK_NEXT from `identity`; `max_clock` as ClockReport::latest_clock.
  /// Answers with CHUNK_REPLY. Errors: ChunkService::Next's.
  virtual Status ChunkNext(const std::string& identity, const MessageHeader& request, int64_t max_clock) = 0;
  /// EVAL_GATHER from `identity`: stores its partials and answers as it
  /// asks (ack, poll, or wait for the round). Errors: DataLoss for partials
  /// that do not parse, InvalidArgument for a partial of another rank.
  virtual Status EvalGather(const std::string& identity, const Message& request) = 0;
  /// The barrier is released with `lowest` the lowest rank waiting at it:
  /// the evaluator, which the first release fixes for the job.
  virtual int Evaluator(int lowest) = 0;
  /// The job's rows trained over every rank, those of workers that left,
  /// were removed or were replaced included (RankLedger::TotalSamples).
  virtual uint64_t TotalSamples() const = 0;

  // ---- Checkpoints (the host writes its shard's part, server/checkpoint_round.h).
  /// The job resumed from the checkpoint at `clock`, whose chunks.state is
  /// `chunks` (none for a job with the static split). Errors: those of
  /// ChunkService::Resume.
  virtual Status Resumed(int64_t clock, std::optional<ChunkCoordinatorState> chunks) = 0;
  /// The dealing state to write as chunks.state at `clock`; false when no
  /// chunk was dealt (nothing to write).
  virtual bool ChunkState(int64_t clock, ChunkCoordinatorState* state) const = 0;
  /// The manifest's rank entries of a round in which `files` (rank → its
  /// state file) were written.
  virtual void ManifestEntries(const std::map<int, CheckpointFile>& files,
                               google::protobuf::RepeatedPtrField<CheckpointWorker>* out) const = 0;
  /// The round at `clock` ended, written into `dir` or not (CheckpointClock).
  virtual void RoundEnded(int64_t clock, bool written, const std::string& dir,
                          const std::map<int, CheckpointFile>& files) = 0;
  virtual void RoundAbandoned(int64_t clock) = 0;

  // ---- The job's end.
  /// Every request held waiting (EVAL_WAIT) gets an ERROR_REPLY with `why`
  /// (as it is, no prefix). Returns how many.
  virtual int FailWaiting(const std::string& why) = 0;
  /// Whether data on demand dealt and completed every chunk of every epoch.
  virtual bool DataDone() const = 0;
  /// Sets the data-on-demand counters of `stats` (ChunkService::FillStats).
  virtual void FillStats(ShardStats* stats) const = 0;

  // ---- State.
  virtual CoordinatorState Snapshot() const = 0;
  /// Continues from `state` exactly. Errors: InvalidArgument naming the
  /// part that does not fit (another format version, a malformed part);
  /// the coordinator is unchanged then.
  virtual Status Restore(const CoordinatorState& state) = 0;
};

/// What a coordinator is made with.
struct CoordinatorOptions {
  int initial_workers = 0;  // cluster.num_workers
  int max_workers = 0;      // MaxWorkers(cluster): ranks in [0, max_workers)
  std::string log_prefix;   // starts every log line ("[server 0] ")
};

/// The coordinator whose state lives in this process. `outbox` must outlive it.
std::unique_ptr<JobCoordinator> MakeLocalCoordinator(const CoordinatorOptions& options, Outbox* outbox);

}  // namespace tether
