#include "worker/client/job_session.h"

#include <glog/logging.h>

#include "core/net/eval_frames.h"

namespace tether {

JobSession::JobSession(WorkerClient* client)
    : client_(client), channel_(client->channel()), num_shards_(client->channel().num_shards()) {
  client_->set_control_replies(
      [this](uint64_t tag, const Status& verdict, Message* reply) { return OnReply(tag, verdict, reply); });
}

JobSession::~JobSession() { client_->set_control_replies(nullptr); }

void JobSession::Send(int shard, Message* m, const RequestHandle& request, MessageType expect) {
  // A failed send is recorded on the request (its Wait returns it).
  (void)channel_.Send(shard, m, &request, expect, WorkerClient::kControlTag | static_cast<uint64_t>(shard));
}

Status JobSession::OnReply(uint64_t tag, const Status& verdict, Message* reply) {
  if (!verdict.ok()) return verdict;
  const size_t shard = static_cast<size_t>(tag);
  const MessageHeader& h = reply->header;
  // Indexed by shard only within what the call sized: a late reply of a
  // call given up (a wait that timed out) never writes out of bounds.
  switch (h.type()) {
    case STATS_REPLY:
      if (shard < server_stats_.size()) server_stats_[shard] = h.stats_reply().shard_stats();
      return Status::OK();
    case EVAL_GATHER_REPLY:
      eval_complete_ = h.eval_gather_reply().complete();
      return UnpackEvalPartials(*reply, "server " + channel_.server(static_cast<int>(shard)), &eval_partials_);
    case CHUNK_REPLY:
      chunk_reply_ = h.chunk_reply();
      return Status::OK();
    case BARRIER_REPLY:
      if (shard == 0) {
        barrier_total_ = h.barrier_reply().total_samples();
        barrier_clock_ = h.barrier_reply().max_clock();
        if (h.barrier_reply().has_evaluator_rank()) evaluator_rank_ = h.barrier_reply().evaluator_rank();
      }
      return Status::OK();
    case CHECKPOINT_REPLY:
      OnCheckpointReply(shard, h.checkpoint_reply());
      return Status::OK();
    case MODEL_CUT_REPLY:
      kept_epoch_ = h.model_cut_reply().kept_epoch();
      return Status::OK();
    default:  // BYE_REPLY
      return Status::OK();
  }
}

void JobSession::OnCheckpointReply(size_t shard, const CheckpointReplyBody& h) {
  if (h.abandoned()) {
    checkpoint_reply_.abandoned = true;
    if (checkpoint_reply_.abandoned_why.empty()) checkpoint_reply_.abandoned_why = h.abandoned_why();
  }
  if (h.files_size() > 0 && shard < checkpoint_reply_.shard_files.size()) checkpoint_reply_.shard_files[shard] = h.files(0);
  for (int i = 1; i < h.files_size(); ++i) checkpoint_reply_.extra_files.push_back(h.files(i));
  if (shard == 0) checkpoint_reply_.workers.assign(h.workers().begin(), h.workers().end());
}

StatusOr<CheckpointReply> JobSession::Checkpoint(const std::string& dir, bool final,
                                                 const CheckpointFile* state_file) {
  TETHER_RETURN_IF_ERROR(client_->WaitAll());
  checkpoint_reply_ = CheckpointReply();
  checkpoint_reply_.shard_files.resize(num_shards_);
  RequestHandle ckpt = channel_.NewRequest(/*sticky=*/false);
  for (int s = 0; s < num_shards_; ++s) {
    Message m;
    m.header.set_type(CHECKPOINT);
    CheckpointBody& body = *m.header.mutable_checkpoint();
    body.set_dir(dir);
    body.set_clock(final ? final_checkpoint_clock() : channel_.clock());
    body.set_is_final(final);
    if (state_file != nullptr) *body.mutable_state_file() = *state_file;
    Send(s, &m, ckpt, CHECKPOINT_REPLY);
  }
  TETHER_RETURN_IF_ERROR(ckpt.Wait());
  TETHER_RETURN_IF_ERROR(channel_.sticky_error());
  client_->CheckpointTaken();
  return checkpoint_reply_;
}

StatusOr<uint64_t> JobSession::Barrier(uint64_t samples, const WorkerStats& stats, bool data_done,
                                       const CheckpointWorker& finished) {
  TETHER_RETURN_IF_ERROR(client_->WaitAll());
  barrier_total_ = 0;
  RequestHandle barrier = channel_.NewRequest(/*sticky=*/false);
  for (int s = 0; s < num_shards_; ++s) {
    Message m;
    m.header.set_type(BARRIER);
    BarrierBody& body = *m.header.mutable_barrier();
    body.set_samples(samples);
    *body.mutable_worker_stats() = stats;
    *body.mutable_finished() = finished;
    if (data_done) body.set_data_done(true);
    Send(s, &m, barrier, BARRIER_REPLY);
  }
  TETHER_RETURN_IF_ERROR(barrier.Wait());
  TETHER_RETURN_IF_ERROR(channel_.sticky_error());
  client_->ClearCache();  // every push is applied: the final reads see the trained model
  return barrier_total_;
}

StatusOr<bool> JobSession::EvalGather(int64_t round, const EvalPartial* mine, EvalGatherBody::EvalWant want,
                                      std::vector<EvalPartial>* all) {
  TETHER_RETURN_IF_ERROR(channel_.sticky_error());
  eval_partials_.clear();
  eval_complete_ = false;
  Message m;
  m.header.set_type(EVAL_GATHER);
  m.header.mutable_eval_gather()->set_round(round);
  m.header.mutable_eval_gather()->set_want(want);
  std::vector<EvalPartial> out;
  if (mine != nullptr) out.push_back(*mine);
  TETHER_RETURN_IF_ERROR(PackEvalPartials(out, &m));
  RequestHandle gather = channel_.NewRequest(/*sticky=*/false);
  Send(0, &m, gather, EVAL_GATHER_REPLY);
  TETHER_RETURN_IF_ERROR(gather.Wait());
  if (all != nullptr) *all = std::move(eval_partials_);
  eval_partials_.clear();
  return eval_complete_;
}

StatusOr<int> JobSession::ModelCut(int epoch, bool restore) {
  TETHER_RETURN_IF_ERROR(client_->WaitAll());
  kept_epoch_ = 0;
  RequestHandle cut = channel_.NewRequest(/*sticky=*/false);
  for (int s = 0; s < num_shards_; ++s) {
    Message m;
    m.header.set_type(MODEL_CUT);
    m.header.mutable_model_cut()->set_epoch(epoch);
    if (restore) m.header.mutable_model_cut()->set_restore(true);
    Send(s, &m, cut, MODEL_CUT_REPLY);
  }
  TETHER_RETURN_IF_ERROR(cut.Wait());
  TETHER_RETURN_IF_ERROR(channel_.sticky_error());
  if (restore) client_->ClearCache();  // the reads that follow see the kept model
  return kept_epoch_;
}

StatusOr<DataOnDemandChunk> JobSession::ChunkNext(const DataOnDemandChunk& request) {
  TETHER_RETURN_IF_ERROR(channel_.sticky_error());
  chunk_reply_.Clear();
  Message m;
  m.header.set_type(CHUNK_NEXT);
  *m.header.mutable_chunk_next() = request;
  RequestHandle next = channel_.NewRequest(/*sticky=*/false);
  Send(0, &m, next, CHUNK_REPLY);
  TETHER_RETURN_IF_ERROR(next.Wait());
  return chunk_reply_;
}

StatusOr<std::vector<ShardStats>> JobSession::FetchServerStats() {
  TETHER_RETURN_IF_ERROR(client_->WaitAll());
  server_stats_.assign(num_shards_, ShardStats());
  RequestHandle stats = channel_.NewRequest(/*sticky=*/false);
  for (int s = 0; s < num_shards_; ++s) {
    Message m;
    m.header.set_type(STATS);
    Send(s, &m, stats, STATS_REPLY);
  }
  TETHER_RETURN_IF_ERROR(stats.Wait());
  return server_stats_;
}

Status JobSession::Bye() {
  TETHER_RETURN_IF_ERROR(client_->WaitAll());
  bye_sent_ = true;
  RequestHandle bye = channel_.NewRequest(/*sticky=*/false);
  for (int s = 0; s < num_shards_; ++s) {
    Message m;
    m.header.set_type(BYE);
    Send(s, &m, bye, BYE_REPLY);
  }
  Status st = bye.Wait();
  if (st.ok()) st = channel_.sticky_error();
  // The worker's half of "updates sent == updates applied" (the servers log theirs).
  const ClientStats& cs = client_->stats();
  LOG(INFO) << channel_.log_prefix() << "leaving: " << cs.updates_sent << " updates sent, " << cs.updates_failed
            << " lost, " << cs.send_waits << " sends waited on back-pressure, " << cs.failovers
            << " failover(s) followed";
  const FramePool::Stats pool = channel_.frame_pool().stats();
  VLOG(1) << channel_.log_prefix() << "request frames: " << pool.takes << " pooled, " << pool.reuses
            << " reused, " << pool.maps << " mapped, " << pool.unmaps << " unmapped, " << pool.idle_bytes / 1e6
            << " MB idle";
  return st;
}

Status JobSession::Leave(int timeout_ms) {
  client_->BeginLeaving(timeout_ms);
  RequestHandle bye = channel_.NewRequest(/*sticky=*/false);
  std::string down;
  for (int s = 0; s < num_shards_; ++s) {
    if (!channel_.shard_up(s)) {
      down += (down.empty() ? "" : ", ") + std::to_string(s) + " (" + channel_.server(s) + ")";
      continue;
    }
    Message m;
    m.header.set_type(BYE);
    Send(s, &m, bye, BYE_REPLY);
  }
  Status st = bye.Wait(timeout_ms);
  const ClientStats& cs = client_->stats();
  LOG(INFO) << channel_.log_prefix() << "leaving early: " << cs.updates_sent << " updates sent, "
            << cs.updates_failed << " lost" << (st.ok() ? ", every reachable shard said goodbye" : "");
  if (st.ok() && !down.empty())
    st = Status::Unavailable(channel_.log_prefix() + "no goodbye to server shard(s) " + down + ": connection down");
  return st;
}

void JobSession::Abort(const std::string& why, int timeout_ms) {
  client_->BeginLeaving(timeout_ms);
  const ClientOptions& o = client_->options();
  const int sent = channel_.SendAbort(why, timeout_ms, o.job_id, o.generation);
  LOG(WARNING) << channel_.log_prefix() << "told " << sent << " of " << num_shards_
               << " server shard(s) that the job failed (ABORT)";
}

}  // namespace tether
