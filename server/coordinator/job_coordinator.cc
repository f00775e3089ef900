#include "server/coordinator/job_coordinator.h"

#include <glog/logging.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/net/eval_frames.h"
#include "server/coordinator/chunk_service.h"
#include "server/coordinator/adaptive_batches.h"
#include "server/coordinator/checkpoint_clock.h"
#include "server/coordinator/eval_book.h"
#include "server/coordinator/rank_ledger.h"

namespace tether {
namespace {

class LocalCoordinator final : public JobCoordinator {
 public:
  LocalCoordinator(const CoordinatorOptions& o, Outbox* outbox)
      : options_(o),
        outbox_(outbox),
        ranks_(o.initial_workers),
        chunks_(o.log_prefix),
        eval_book_(o.max_workers),
        adaptive_(o.log_prefix) {}

  uint64_t WorkerJoined(int rank, bool rejoined) override {
    if (rejoined) chunks_.Leave(rank);  // the new process holds none of the old one's chunks
    adaptive_.Forget(rank);
    eval_book_.DropWaiters(rank);  // the old process is not there to be answered
    return ranks_.Joined(rank);
  }
  void WorkerFinished(int rank, uint64_t samples, const CheckpointWorker& finished) override {
    adaptive_.Forget(rank);
    ranks_.Finished(rank, samples, finished);
  }
  void WorkerLeft(int rank) override {
    ranks_.Left(rank);
    Lost(rank);
  }
  void WorkerRemoved(int rank) override {
    ranks_.Removed(rank);
    Lost(rank);
  }

  Status Clock(const ClockReport& c, ClockReplyBody* reply) override;
  Status ChunkNext(const std::string& identity, const MessageHeader& h, int64_t max_clock) override;
  Status EvalGather(const std::string& identity, const Message& m) override;
  int Evaluator(int lowest) override {
    // Once the job's evaluator is chosen, it stays: a late joiner at a later
    // release must not evaluate (and overwrite the metrics of) a finished job.
    if (evaluator_ < 0) evaluator_ = lowest;
    return evaluator_;
  }
  uint64_t TotalSamples() const override { return ranks_.TotalSamples(); }

  Status Resumed(int64_t clock, std::optional<ChunkCoordinatorState> chunks) override {
    if (chunks.has_value()) TETHER_RETURN_IF_ERROR(chunks_.Resume(std::move(*chunks)));
    checkpoint_.Resumed(clock);
    return Status::OK();
  }
  bool ChunkState(int64_t clock, ChunkCoordinatorState* state) const override {
    return chunks_.SaveState(clock, state);
  }
  void ManifestEntries(const std::map<int, CheckpointFile>& files,
                       google::protobuf::RepeatedPtrField<CheckpointWorker>* out) const override {
    checkpoint_.Entries(ranks_, files, out);
  }
  void RoundEnded(int64_t clock, bool written, const std::string& dir,
                  const std::map<int, CheckpointFile>& files) override {
    checkpoint_.RoundEnded(clock, written, dir, files);
  }
  void RoundAbandoned(int64_t clock) override { checkpoint_.RoundAbandoned(clock); }

  int FailWaiting(const std::string& why) override;
  bool DataDone() const override { return chunks_.active() && chunks_.coordinator()->done(); }
  void FillStats(ShardStats* stats) const override { chunks_.FillStats(stats); }

  CoordinatorState Snapshot() const override;
  Status Restore(const CoordinatorState& state) override;

 private:
  // `rank` left or was removed: its chunks are dealt again, and rounds
  // that waited on its partial may now be complete.
  void Lost(int rank) {
    adaptive_.Forget(rank);
    chunks_.Leave(rank);
    AnswerEvalWaiters();
  }
  // Answers the EVAL_WAIT requests whose round is now complete.
  void AnswerEvalWaiters();
  // Fails every waiter when no waiting round can complete (below).
  void FailIfNoRoundCanComplete();
  bool Excused(int rank) const { return ranks_.Excused(rank); }

  CoordinatorOptions options_;
  Outbox* outbox_;
  RankLedger ranks_;
  ChunkService chunks_;
  EvalBook eval_book_;
  AdaptiveBatches adaptive_;
  CheckpointClock checkpoint_;
  int evaluator_ = -1;
};

Status LocalCoordinator::Clock(const ClockReport& c, ClockReplyBody* reply) {
  if (c.samples.has_value()) ranks_.Clocked(c.rank, *c.samples);
  if (c.want_checkpoint && checkpoint_.Want(c.latest_clock))
    LOG(INFO) << options_.log_prefix << "worker " << c.rank
              << " asked for a checkpoint: every worker takes it at clock " << checkpoint_.due();
  if (checkpoint_.due() >= 0) reply->set_checkpoint_clock(checkpoint_.due());
  if (c.adaptive != nullptr) {
    TETHER_ASSIGN_OR_RETURN(const int batch, adaptive_.Report(c.rank, *c.adaptive, c.bound_wait_s, c.now));
    reply->set_batch_size(batch);
  }
  return Status::OK();
}

Status LocalCoordinator::ChunkNext(const std::string& identity, const MessageHeader& h, int64_t max_clock) {
  const int rank = h.sender_rank();
  StatusOr<DataOnDemandChunk> out = chunks_.Next(rank, h.chunk_next(), max_clock);
  if (!out.ok()) {
    LOG(ERROR) << options_.log_prefix << out.status().message();
    outbox_->SendError(identity, h, out.status().message());
    return out.status();
  }
  Message reply;
  reply.header.set_type(CHUNK_REPLY);
  reply.header.set_request_id(h.request_id());
  *reply.header.mutable_chunk_reply() = std::move(out).value();
  outbox_->Send(identity, &reply, rank);
  return Status::OK();
}

Status LocalCoordinator::EvalGather(const std::string& identity, const Message& m) {
  const MessageHeader& h = m.header;
  const EvalGatherBody& body = h.eval_gather();
  const int rank = h.sender_rank();
  const std::string who = "worker " + std::to_string(rank);
  std::vector<EvalPartial> mine;
  if (Status st = UnpackEvalPartials(m, who, &mine); !st.ok()) {
    outbox_->SendError(identity, h, st.message());
    return st;
  }
  for (const EvalPartial& p : mine) {
    if (p.rank() != rank) {
      const std::string why = "EVAL_GATHER from " + who + " carries the partial of rank " + std::to_string(p.rank());
      outbox_->SendError(identity, h, why);
      return Status::InvalidArgument(why);
    }
    (void)eval_book_.Put(body.round(), p);  // the host checked the rank (< max_workers)
  }
  const auto excused = [this](int r) { return Excused(r); };
  Message reply;
  reply.header.set_type(EVAL_GATHER_REPLY);
  reply.header.set_request_id(h.request_id());
  EvalGatherReplyBody& answer = *reply.header.mutable_eval_gather_reply();
  answer.set_round(body.round());
  switch (body.want()) {
    case EvalGatherBody::EVAL_WAIT:
      eval_book_.Park(body.round(), {identity, h.request_id(), rank});
      AnswerEvalWaiters();
      return Status::OK();
    case EvalGatherBody::EVAL_POLL: {
      std::vector<EvalPartial> all;
      const bool complete = eval_book_.TakeComplete(body.round(), excused, &all);
      answer.set_complete(complete);
      if (complete) {
        if (Status st = PackEvalPartials(all, &reply); !st.ok()) {
          outbox_->SendError(identity, h, st.message());  // too large to send: not the worker's fault
          return Status::OK();
        }
      }
      break;
    }
    default:
      answer.set_complete(eval_book_.Complete(body.round(), excused));
      break;
  }
  outbox_->Send(identity, &reply, rank);
  return Status::OK();
}

void LocalCoordinator::AnswerEvalWaiters() {
  const auto excused = [this](int r) { return Excused(r); };
  for (const int64_t round : eval_book_.WaitingRounds()) {
    std::vector<EvalPartial> all;
    if (!eval_book_.TakeComplete(round, excused, &all)) continue;
    for (const EvalBook::Waiter& w : eval_book_.TakeWaiters(round)) {
      if (ranks_.Gone(w.rank)) continue;  // left meanwhile: nobody to answer
      Message reply;
      reply.header.set_type(EVAL_GATHER_REPLY);
      reply.header.set_request_id(w.request_id);
      reply.header.mutable_eval_gather_reply()->set_round(round);
      reply.header.mutable_eval_gather_reply()->set_complete(true);
      MessageHeader req;
      req.set_request_id(w.request_id);
      req.set_sender_rank(w.rank);
      if (Status st = PackEvalPartials(all, &reply); !st.ok()) {
        outbox_->SendError(w.identity, req, st.message());
        continue;
      }
      outbox_->Send(w.identity, &reply, w.rank);
    }
  }
  FailIfNoRoundCanComplete();
}

// Every worker that counts waits at a round and none of those rounds is
// complete: a waiting worker sends nothing more, so none ever will be. This
// happens when workers reach different rounds, e.g. a worker restarted by
// hand or resumed from a checkpoint at another epoch than the others (the
// validation rounds are per epoch). The waiters are failed at once, naming
// where each waits, rather than the job hanging until someone kills it.
void LocalCoordinator::FailIfNoRoundCanComplete() {
  const std::map<int, int64_t> waiting = eval_book_.WaitingRanks();
  if (waiting.empty()) return;
  std::string where;
  bool differ = false;
  for (int r = 0; r < ranks_.slots(); ++r) {
    if (Excused(r)) continue;
    const auto it = waiting.find(r);
    if (it == waiting.end()) return;  // r is still working: it may complete a round
    differ = differ || it->second != waiting.begin()->second;
    where += (where.empty() ? "" : ", ") + ("worker " + std::to_string(r) + " at " + EvalBook::RoundName(it->second));
  }
  if (where.empty()) return;
  const std::string why = "no evaluation round can complete: " + where +
                          (differ ? " (workers at different epochs, e.g. one restarted by hand or resumed from a "
                                    "checkpoint taken while the workers' epochs differed)"
                                  : "") +
                          "; the job cannot go on";
  LOG(ERROR) << options_.log_prefix << why;
  FailWaiting(why);
}

int LocalCoordinator::FailWaiting(const std::string& why) {
  int told = 0;
  for (const int64_t round : eval_book_.WaitingRounds()) {
    for (const EvalBook::Waiter& w : eval_book_.TakeWaiters(round)) {
      Message reply;
      reply.header.set_type(ERROR_REPLY);
      reply.header.set_request_id(w.request_id);
      reply.header.mutable_error_reply()->set_error(why);
      outbox_->Send(w.identity, &reply, w.rank);
      ++told;
    }
  }
  return told;
}

CoordinatorState LocalCoordinator::Snapshot() const {
  CoordinatorState s;
  s.set_format_version(kCoordinatorStateFormatVersion);
  ranks_.Snapshot(&s);
  chunks_.Snapshot(s.mutable_dealing());
  eval_book_.Snapshot(s.mutable_eval());
  adaptive_.Snapshot(s.mutable_adaptive());
  checkpoint_.Snapshot(s.mutable_checkpoint());
  s.set_evaluator_rank(evaluator_);
  return s;
}

Status LocalCoordinator::Restore(const CoordinatorState& s) {
  if (s.format_version() != kCoordinatorStateFormatVersion)
    return Status::InvalidArgument("coordinator state of format version " + std::to_string(s.format_version()) +
                                   "; this build reads version " + std::to_string(kCoordinatorStateFormatVersion));
  // Each part is restored into a fresh copy first, so that a part that does
  // not fit leaves this coordinator as it was.
  RankLedger ranks(options_.initial_workers);
  ChunkService chunks(options_.log_prefix);
  EvalBook eval_book(options_.max_workers);
  AdaptiveBatches adaptive(options_.log_prefix);
  CheckpointClock checkpoint;
  TETHER_RETURN_IF_ERROR(ranks.Restore(s));
  TETHER_RETURN_IF_ERROR(chunks.Restore(s.dealing()));
  TETHER_RETURN_IF_ERROR(eval_book.Restore(s.eval()));
  TETHER_RETURN_IF_ERROR(adaptive.Restore(s.adaptive()));
  TETHER_RETURN_IF_ERROR(checkpoint.Restore(s.checkpoint()));
  ranks_ = std::move(ranks);
  chunks_ = std::move(chunks);
  eval_book_ = std::move(eval_book);
  adaptive_ = std::move(adaptive);
  checkpoint_ = std::move(checkpoint);
  evaluator_ = s.evaluator_rank();
  return Status::OK();
}

}  // namespace

std::unique_ptr<JobCoordinator> MakeLocalCoordinator(const CoordinatorOptions& options, Outbox* outbox) {
  return std::make_unique<LocalCoordinator>(options, outbox);
}

}  // namespace tether
