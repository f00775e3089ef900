// JobSession: a worker's control calls to the job — the ones that are not
// the data path (pull, push, clock: WorkerClient, worker/client/client.h). Each is
// a round trip that blocks until answered: taking part in a checkpoint, the
// barrier at the end of training, the evaluation gather, asking for a chunk
// (data on demand), the servers' counters, and leaving (BYE, a prompt BYE
// after a stop, ABORT).
//
// Same sockets, same order: the session sends over its client's request
// channel (WorkerClient::channel), so a control message to a shard arrives
// after every pull, push and CLOCK the worker sent it before (the barrier
// after the last push, a checkpoint after the clock it cuts at). Replies
// come back through the client (its control-reply handler), tagged
// WorkerClient::kControlTag.
//
// Calls that need the data path quiet first (Checkpoint, Barrier,
// FetchServerStats, Bye) wait for every request in flight; Checkpoint and
// Barrier then empty the client's parameter cache, so the reads that
// follow see the cut or the trained model.
//
// Errors: the client's sticky error (a lost push fails the next Barrier or
// Bye), then those of RequestHandle::Wait; each call says its own.
//
// Ownership: borrows the client, which must outlive the session; one
// session per client at a time (it takes the client's control replies
// until destroyed). Thread-safety: not thread-safe; the client's thread.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "core/net/message.h"
#include "core/status.h"
#include "proto/checkpoint.pb.h"
#include "proto/stats.pb.h"
#include "proto/wire.pb.h"
#include "worker/client/client.h"

namespace tether {

/// What a checkpoint's CHECKPOINT_REPLYs carried: every shard's file and
/// (from shard 0) every rank's entry.
struct CheckpointReply {
  std::vector<CheckpointFile> shard_files;  // in shard order
  // Further files a shard wrote into the checkpoint (shard 0's chunks.state
  // with data on demand: checkpoint/chunk_state.h); the manifest lists them.
  std::vector<CheckpointFile> extra_files;
  std::vector<CheckpointWorker> workers;    // one per rank
  // A shard abandoned the round (a worker that had to take part was
  // restarted at or past its clock): nothing of it is usable, no MANIFEST
  // is written, and training goes on. `abandoned_why` says which worker.
  bool abandoned = false;
  std::string abandoned_why;
};

class JobSession {
 public:
  /// Takes `client`'s control replies until destroyed.
  explicit JobSession(WorkerClient* client);
  ~JobSession();
  JobSession(const JobSession&) = delete;
  JobSession& operator=(const JobSession&) = delete;

  /// Takes part in the checkpoint at the client's clock() (or, `final`,
  /// the end-of-job checkpoint that worker 0 takes alone after the barrier,
  /// at final_checkpoint_clock(): the clock its folder names): waits for
  /// every request in flight, sends CHECKPOINT (with `state_file`, this
  /// worker's own file, unless `final`) to every shard, and blocks until
  /// every shard wrote its files, which happens once every worker still
  /// training is at this clock: a consistent cut. Then empties the cache
  /// and forgets a due checkpoint clock it reached. Errors: the sticky
  /// error, a shard's (a write that failed, naming the file), as
  /// RequestHandle::Wait.
  StatusOr<CheckpointReply> Checkpoint(const std::string& dir, bool final, const CheckpointFile* state_file);

  /// Says this worker finished training (it stops counting towards the
  /// servers' min clock) and blocks until every worker has. `samples`: rows
  /// this worker trained on; `stats`: its counters, which every shard keeps
  /// for FetchServerStats. Returns the total samples over all workers.
  /// Then empties the cache: every worker's pushes are applied by now, so
  /// the reads that follow (the final evaluation) see the trained model,
  /// not rows up to s clocks old.
  /// `data_done`: data on demand told this worker DONE (every chunk of every
  /// epoch completed); the shards then do not count a worker that fell
  /// silent and never came back as a failed job (server/coordinator/chunk_service.h).
  /// `finished`: this worker's entry in a checkpoint cut after it finished
  /// (its final_loss, diverged; the shards set rank, kind and samples).
  /// Errors: the sticky error, then as RequestHandle::Wait.
  StatusOr<uint64_t> Barrier(uint64_t samples, const WorkerStats& stats, bool data_done = false,
                             const CheckpointWorker& finished = CheckpointWorker());
  /// After Barrier: the largest clock any worker reached (shard 0's view).
  int64_t barrier_clock() const { return barrier_clock_; }
  /// After Barrier: the clock of the end-of-job checkpoint (its folder's
  /// name, the shards' files and their log lines): barrier_clock() or this
  /// worker's own clock, whichever is larger. A worker that trained fewer
  /// clocks than another (data on demand, a smaller share) is behind it.
  int64_t final_checkpoint_clock() const { return std::max(barrier_clock_, client_->clock()); }
  /// After Barrier: the rank that evaluates at the end and writes the
  /// metrics — the lowest rank at the barrier (rank 0 unless it left;
  /// shard 0's view, elastic membership).
  int evaluator_rank() const { return evaluator_rank_; }

  /// Partitioned evaluation: sends `mine` (this worker's partial sums of
  /// evaluation `round`; null: none, e.g. a second poll) to shard 0
  /// (EVAL_GATHER, server/coordinator/eval_book.h), and gets back, per `want`:
  ///   EVAL_ACK:  nothing (the reply says the partial is stored);
  ///   EVAL_POLL: every worker's partial in rank order if the round is
  ///              complete (returns true), else at once false;
  ///   EVAL_WAIT: blocks until the round is complete (every worker sent its
  ///              partial or left the job), then every partial, true.
  /// `all` (may be null for EVAL_ACK) receives the partials; workers that
  /// left without sending theirs are missing from it. A wait is bounded by
  /// cluster.request_timeout_ms like the barrier's. Errors: the sticky
  /// error, then as RequestHandle::Wait; DataLoss for a malformed reply.
  StatusOr<bool> EvalGather(int64_t round, const EvalPartial* mine, EvalGatherBody::EvalWant want,
                            std::vector<EvalPartial>* all);

  /// The best epoch's model (train.keep_best_model, server/kept_model.h):
  /// waits for every request in flight, sends MODEL_CUT to every shard and
  /// blocks for every answer. Keep (`restore` false): after the validation
  /// round of `epoch` (1-based) found it best, before any push of the next
  /// epoch; the first MODEL_CUT of the epoch to reach a shard takes its
  /// copy. Restore: after Barrier, every worker, before it reads the model;
  /// the first one to reach a shard puts the copy of `epoch` back; then the
  /// cache is emptied. Returns the epoch of the copy the shards hold.
  /// Errors: the sticky error, then as RequestHandle::Wait (a shard's
  /// refusal: no copy, or one of another epoch).
  StatusOr<int> ModelCut(int epoch, bool restore);

  /// Data on demand: sends CHUNK_NEXT with `request` (the job's shape and
  /// the completion of the previous chunk, if any) to shard 0 and returns
  /// its CHUNK_REPLY body (a chunk, WAIT or DONE; server/coordinator/chunk_service.h).
  /// Blocks for the reply, bounded by cluster.request_timeout_ms. Errors:
  /// the sticky error, then as RequestHandle::Wait (a refused shape comes
  /// back as the server's error).
  StatusOr<DataOnDemandChunk> ChunkNext(const DataOnDemandChunk& request);

  /// Asks every shard for its counters (STATS), all shards at once after
  /// every outstanding request: one ShardStats per shard, in shard order,
  /// each with the WorkerStats every worker sent at its Barrier. Errors: the
  /// sticky error, then as RequestHandle::Wait.
  StatusOr<std::vector<ShardStats>> FetchServerStats();

  /// Leaves the job: waits for outstanding requests, then BYE to every
  /// shard. A worker that passed the barrier gets each shard's answer when
  /// that shard's part of the job ends (every worker left or was removed):
  /// the wait lasts until the last worker's BYE (rank 0's, after it merged
  /// the evaluation), heartbeating, bounded by cluster.request_timeout_ms.
  /// Errors: the sticky error, then as RequestHandle::Wait; a shard that
  /// ended the job as failed (a worker removed after this one finished,
  /// with the static split) answers with its reason.
  Status Bye();
  /// True once Bye sent its goodbye: the shards know this worker's part is
  /// done, and a Bye that failed carries the job's outcome (no ABORT then).
  bool bye_sent() const { return bye_sent_; }

  /// Leaves the job promptly (a stop request, or a wait given up): BYE to
  /// every shard whose connection is up, without first waiting for the
  /// requests in flight (a shard handles one worker's messages in order, so
  /// its pushes before the BYE are applied), then waits at most
  /// `timeout_ms` for the BYE_REPLYs, whatever the stop request. Closing the
  /// client afterwards waits at most `timeout_ms` more for unsent messages.
  /// From Leave (and Abort) on, pull replies still arriving are dropped,
  /// never written (WorkerClient::BeginLeaving). Errors: DeadlineExceeded
  /// (a reply did not come), Unavailable (a shard was down: no BYE sent to
  /// it).
  Status Leave(int timeout_ms);

  /// Tells every shard still reachable that this worker failed: ABORT with
  /// `why` (which should name the worker), best effort, no reply awaited;
  /// closing the client waits at most `timeout_ms` for the messages to go.
  /// Each shard then ends its Run() with an error (server/server.h).
  void Abort(const std::string& why, int timeout_ms);

 private:
  // Sends `m` to `shard` as one part of `request`, owed a reply `expect`.
  void Send(int shard, Message* m, const RequestHandle& request, MessageType expect);
  // The client's control-reply handler: `tag` is the shard (kControlTag
  // cleared).
  Status OnReply(uint64_t tag, const Status& verdict, Message* reply);
  // Shard `shard`'s CHECKPOINT_REPLY: its files, abandonment and (shard 0)
  // the ranks' entries, into checkpoint_reply_.
  void OnCheckpointReply(size_t shard, const CheckpointReplyBody& h);

  WorkerClient* client_;
  RequestChannel& channel_;
  int num_shards_;
  CheckpointReply checkpoint_reply_;       // filled by CHECKPOINT_REPLYs
  uint64_t barrier_total_ = 0;             // BARRIER_REPLY's total
  int64_t barrier_clock_ = 0;              // BARRIER_REPLY's clock (shard 0's)
  int evaluator_rank_ = 0;                 // BARRIER_REPLY's evaluator_rank (shard 0's)
  bool bye_sent_ = false;
  std::vector<ShardStats> server_stats_;   // STATS_REPLY per shard
  std::vector<EvalPartial> eval_partials_;  // EVAL_GATHER_REPLY's
  bool eval_complete_ = false;
  DataOnDemandChunk chunk_reply_;          // CHUNK_REPLY's
  int kept_epoch_ = 0;                     // MODEL_CUT_REPLY's (the last shard's)
};

}  // namespace tether
