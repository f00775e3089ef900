#include "server/chunk_service.h"

#include <glog/logging.h>

#include <iterator>
#include <utility>

namespace tether {
namespace {

std::string Shape(const DataOnDemandChunk& c) {
  return std::to_string(c.train_rows()) + " training rows in chunks of " + std::to_string(c.chunk_rows()) +
         (c.taper() ? " rows tapering toward each epoch's end" : " rows") + ", " + std::to_string(c.epochs()) +
         " epochs, seed " + std::to_string(c.seed());
}

}  // namespace

StatusOr<DataOnDemandChunk> ChunkService::Next(int rank, const DataOnDemandChunk& request, int64_t max_clock) {
  const std::string who = "worker " + std::to_string(rank);
  if (rank < 0) return Status::InvalidArgument("CHUNK_NEXT from negative rank " + std::to_string(rank));
  if (request.train_rows() < 1 || request.chunk_rows() < 1 || request.epochs() < 1)
    return Status::InvalidArgument("CHUNK_NEXT from " + who + ": malformed shape (" + Shape(request) +
                                   "): train_rows, chunk_rows and epochs must be ≥ 1");
  // A resumed job: the checkpoint's dealing state, if its shape agrees.
  if (coordinator_ == nullptr && resume_ != nullptr) TETHER_RETURN_IF_ERROR(StartFromCheckpoint(request, who));
  if (coordinator_ == nullptr) {
    shape_.set_train_rows(request.train_rows());
    shape_.set_chunk_rows(request.chunk_rows());
    shape_.set_epochs(request.epochs());
    shape_.set_seed(request.seed());
    shape_.set_taper(request.taper());
    std::vector<DataChunk> chunks = request.taper() ? MakeTaperedRowChunks(0, request.train_rows(), request.chunk_rows())
                                                    : MakeRowChunks(0, request.train_rows(), request.chunk_rows());
    const size_t n = chunks.size();
    coordinator_ = std::make_unique<ChunkCoordinator>(std::move(chunks), request.epochs(), request.seed(),
                                                      /*shuffle=*/true, /*epoch_barrier=*/true);
    coordinator_->set_deal_largest_first(request.taper());
    LOG(INFO) << log_prefix_ << "data on demand: " << Shape(request) << " (" << n << " chunks per epoch), from "
              << who << "'s first request";
  } else if (request.train_rows() != shape_.train_rows() || request.chunk_rows() != shape_.chunk_rows() ||
             request.epochs() != shape_.epochs() || request.seed() != shape_.seed() ||
             request.taper() != shape_.taper()) {
    return Status::InvalidArgument("data on demand: " + who + " has " + Shape(request) + " but the job has " +
                                   Shape(shape_) +
                                   " (every worker must read the same training set with the same train.chunk_rows, "
                                   "train.chunk_taper, train.epochs and train.seed)");
  }
  DataOnDemandChunk reply;
  if (request.completed_id() != 0) {
    const int64_t before = coordinator_->completed_epochs();
    const Status st = coordinator_->Complete(rank, request.completed_id(), request.completed_rows());
    reply.set_completion_counted(st.ok());
    if (st.ok()) {
      auto it = open_.find(request.completed_id());
      if (it != open_.end()) {
        std::vector<int64_t>& rows = epoch_rows_[rank];
        const size_t e = static_cast<size_t>(it->second.second);
        if (rows.size() <= e) rows.resize(e + 1, 0);
        rows[e] += request.completed_rows();
        open_.erase(it);
      }
      for (int64_t e = before; e < coordinator_->completed_epochs(); ++e) LogEpoch(e);
    } else {
      LOG(WARNING) << log_prefix_ << "data on demand: " << st.message();
    }
  }
  const ChunkCoordinator::Grant g = coordinator_->Next(rank);
  switch (g.kind) {
    case ChunkCoordinator::GrantKind::kChunk:
      reply.set_kind(DataOnDemandChunk::CHUNK);
      reply.set_id(g.id);
      reply.set_epoch(g.epoch);
      reply.set_file(g.chunk.file);
      reply.set_begin(g.chunk.begin);
      reply.set_end(g.chunk.end);
      reply.set_redealt(g.redealt);
      open_[g.id] = {rank, g.epoch};
      ++dealt_;
      if (g.redealt)
        LOG(INFO) << log_prefix_ << "data on demand: rows [" << g.chunk.begin << ", " << g.chunk.end << ") of epoch "
                  << g.epoch + 1 << ", held by a worker that left, dealt again to " << who;
      break;
    case ChunkCoordinator::GrantKind::kWait:
      reply.set_kind(DataOnDemandChunk::WAIT);
      reply.set_max_clock(max_clock);
      break;
    case ChunkCoordinator::GrantKind::kDone:
      reply.set_kind(DataOnDemandChunk::DONE);
      break;
  }
  return reply;
}

int ChunkService::Leave(int rank) {
  if (coordinator_ == nullptr) return 0;
  const int n = coordinator_->Leave(rank);
  for (auto it = open_.begin(); it != open_.end();) it = it->second.first == rank ? open_.erase(it) : std::next(it);
  if (n > 0)
    LOG(WARNING) << log_prefix_ << "data on demand: worker " << rank << " left holding " << n
                 << " chunk(s): they are dealt again (their pushes so far stay applied)";
  return n;
}

void ChunkService::FillStats(ShardStats* stats) const {
  stats->set_chunks_dealt(dealt_);
  stats->set_chunks_redealt(coordinator_ ? static_cast<uint64_t>(coordinator_->redealt_chunks()) : 0);
  stats->set_rows_redealt(coordinator_ ? coordinator_->redealt_units() : 0);
  if (coordinator_ != nullptr)
    for (int64_t e = 0; e < coordinator_->epochs(); ++e) stats->add_chunk_epoch_rows(coordinator_->epoch_rows(e));
}

int64_t ChunkService::WorkerEpochRows(int rank, int64_t e) const {
  auto it = epoch_rows_.find(rank);
  if (it == epoch_rows_.end() || e < 0 || static_cast<size_t>(e) >= it->second.size()) return 0;
  return it->second[static_cast<size_t>(e)];
}

void ChunkService::LogEpoch(int64_t e) const {
  std::string by_worker;
  for (const auto& [rank, rows] : epoch_rows_)
    by_worker += (by_worker.empty() ? "" : ", ") + std::to_string(rank) + ": " +
                 std::to_string(WorkerEpochRows(rank, e));
  LOG(INFO) << log_prefix_ << "data on demand: epoch " << e + 1 << "/" << coordinator_->epochs() << " complete, "
            << coordinator_->epoch_rows(e) << " rows in " << coordinator_->chunks_per_epoch()
            << " chunks; rows by worker " << by_worker << "; re-dealt so far " << coordinator_->redealt_chunks()
            << " chunk(s), " << coordinator_->redealt_units() << " rows";
}

}  // namespace tether
