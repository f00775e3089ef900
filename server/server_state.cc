// ServerShard's whole state, taken and put back (server/shard_state.h): each
// room writes its part of proto/shard_state.proto; the shard adds its own
// fields and the job coordinator's state.
#include <glog/logging.h>

#include <algorithm>

#include "server/server.h"
#include "server/shard_state.h"
#include "server/shard_stats_state.h"

namespace tether {

using SteadyClock = std::chrono::steady_clock;

StatusOr<std::string> ServerShard::EncodeState(uint64_t log_seq, uint64_t generation) const {
  TETHER_ASSIGN_OR_RETURN(const std::vector<std::string> pieces, EncodeStatePieces(log_seq, generation));
  size_t size = 0;
  for (const std::string& p : pieces) size += p.size();
  std::string joined;
  joined.reserve(size);
  for (const std::string& p : pieces) joined += p;
  return joined;
}

StatusOr<std::vector<std::string>> ServerShard::EncodeStatePieces(uint64_t log_seq, uint64_t generation) const {
  const auto now = SteadyClock::now();
  ShardState state;
  state.set_format_version(kShardStateFormatVersion);
  state.set_shard(shard_);
  state.set_log_seq(log_seq);
  state.set_generation(generation);
  state.set_num_shards(num_shards_);
  state.set_job_id(job_id_);
  ShardLoopState* loop = state.mutable_loop();
  loop->set_any_hello(any_hello_);
  loop->set_keep_best_model(keep_best_model_);
  loop->set_checkpoint_before_stop(checkpoint_before_stop_);
  loop->set_job_finished(job_finished_);
  loop->set_aborted(aborted_.ok() ? std::string() : aborted_.message());
  loop->set_initial_workers(initial_workers_);
  std::vector<std::string> admitted(inbox_.admitted_identities().begin(), inbox_.admitted_identities().end());
  std::sort(admitted.begin(), admitted.end());
  for (const std::string& identity : admitted) loop->add_admitted(identity);
  clocks_.SaveState(state.mutable_clocks());
  members_.SaveState(state.mutable_members(), now);
  SaveState(stats_, state.mutable_stats());
  std::vector<std::string> rows;
  kv_.SaveState(state.mutable_kv(), &rows, now);
  if (replies_ != nullptr) replies_->SaveState(state.mutable_replies());
  round_.SaveState(state.mutable_round(), now);
  kept_.SaveState(state.mutable_kept(), kv_.tables());
  if (coordinator_ != nullptr) *state.mutable_coordinator() = coordinator_->Snapshot();
  // Table rows travel outside the message; the rest (the kept model's
  // weights, cached replies) must fit one protobuf message.
  if (const size_t bytes = state.ByteSizeLong(); bytes > static_cast<size_t>(INT32_MAX))
    return Status::ResourceExhausted(log_prefix_ + "shard " + std::to_string(shard_) + "'s state besides its table rows is " +
                                     std::to_string(bytes) + " bytes (the kept best epoch's weights, cached replies), "
                                     "more than one state message holds (2 GiB): a replica cannot join it");
  return EncodeShardStatePieces(state, std::move(rows));
}

Status ServerShard::RestoreState(std::string_view bytes, const std::string& peer) {
  ShardState state;
  std::vector<std::string> rows;
  TETHER_RETURN_IF_ERROR(DecodeShardState(bytes, shard_, peer, &state, &rows));
  const std::string what = log_prefix_ + "shard " + std::to_string(shard_) + "'s state from " + peer + ": ";
  if (state.num_shards() != num_shards_ || state.job_id() != job_id_)
    return Status::DataLoss(what + "it is a shard of job '" + state.job_id() + "' with " +
                            std::to_string(state.num_shards()) + " servers; this process's config is job '" + job_id_ +
                            "' with " + std::to_string(num_shards_) +
                            " (start it with the job's config and flags: cluster.num_servers, the config's name)");
  const ShardLoopState& loop = state.loop();
  if (loop.initial_workers() != initial_workers_)
    return Status::DataLoss(what + "loop.initial_workers=" + std::to_string(loop.initial_workers()) +
                            ", this job's cluster.num_workers is " + std::to_string(initial_workers_));
  if (state.has_coordinator() != (coordinator_ != nullptr))
    return Status::DataLoss(what + (coordinator_ != nullptr ? "lacks" : "has") + " a job coordinator's state");
  const auto now = SteadyClock::now();
  any_hello_ = loop.any_hello();
  keep_best_model_ = loop.keep_best_model();
  checkpoint_before_stop_ = loop.checkpoint_before_stop();
  job_finished_ = loop.job_finished();
  aborted_ = loop.aborted().empty() ? Status::OK() : Status::Unavailable(loop.aborted());
  TETHER_RETURN_IF_ERROR(clocks_.RestoreState(state.clocks()));
  TETHER_RETURN_IF_ERROR(members_.RestoreState(state.members(), now));
  if (loop.admitted_size() > 4 * members_.slots() + 1024)
    return Status::DataLoss(what + std::to_string(loop.admitted_size()) + " admitted connections for " +
                            std::to_string(members_.slots()) + " worker slots");
  for (const std::string& identity : loop.admitted()) inbox_.Admit(identity);
  TETHER_RETURN_IF_ERROR(tether::RestoreState(state.stats(), &stats_));
  TETHER_RETURN_IF_ERROR(kv_.RestoreState(state.kv(), std::move(rows), now));
  if (replies_ != nullptr) TETHER_RETURN_IF_ERROR(replies_->RestoreState(state.replies()));
  TETHER_RETURN_IF_ERROR(round_.RestoreState(state.round(), now));
  TETHER_RETURN_IF_ERROR(kept_.RestoreState(state.kept(), kv_.tables()));
  if (coordinator_ != nullptr) TETHER_RETURN_IF_ERROR(coordinator_->Restore(state.coordinator()));
  last_message_ = now;
  return Status::OK();
}

}  // namespace tether
