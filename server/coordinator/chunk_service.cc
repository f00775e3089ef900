#include "server/coordinator/chunk_service.h"

#include <glog/logging.h>

#include <iterator>
#include <utility>

namespace tether {
namespace {

bool Streamed(const DataOnDemandChunk& c) { return c.file_bytes_size() > 0; }

std::string Shape(const DataOnDemandChunk& c) {
  const std::string tail = (c.taper() ? " tapering toward each epoch's end" : "") + std::string(", ") +
                           std::to_string(c.epochs()) + " epochs, seed " + std::to_string(c.seed());
  if (!Streamed(c))
    return std::to_string(c.train_rows()) + " training rows in chunks of " + std::to_string(c.chunk_rows()) +
           " rows" + tail;
  std::string files;
  for (int i = 0; i < c.file_bytes_size(); ++i)
    files += (i > 0 ? ", " : "") + std::to_string(c.file_bytes(i)) +
             (i < c.file_gzip_size() && c.file_gzip(i) ? " (gzip)" : "");
  return std::to_string(c.file_bytes_size()) + " streamed training file(s) of " + files +
         " bytes in chunks of " + std::to_string(c.chunk_bytes()) + " bytes" + tail;
}

// The shape fields of a CHUNK_NEXT (what every worker must agree on).
DataOnDemandChunk ShapeOf(const DataOnDemandChunk& r) {
  DataOnDemandChunk s;
  s.set_train_rows(r.train_rows());
  s.set_chunk_rows(r.chunk_rows());
  s.set_epochs(r.epochs());
  s.set_seed(r.seed());
  s.set_taper(r.taper());
  *s.mutable_file_bytes() = r.file_bytes();
  *s.mutable_file_gzip() = r.file_gzip();
  s.set_chunk_bytes(r.chunk_bytes());
  return s;
}

bool SameShape(const DataOnDemandChunk& a, const DataOnDemandChunk& b) {
  return ShapeOf(a).SerializeAsString() == ShapeOf(b).SerializeAsString();
}

// "" when `r`'s shape can be dealt, else why not.
std::string Malformed(const DataOnDemandChunk& r) {
  if (r.epochs() < 1 || r.chunk_rows() < 1) return "chunk_rows and epochs must be ≥ 1";
  if (!Streamed(r)) return r.train_rows() < 1 ? "train_rows must be ≥ 1" : "";
  if (r.file_gzip_size() != r.file_bytes_size())
    return std::to_string(r.file_bytes_size()) + " file sizes but " + std::to_string(r.file_gzip_size()) +
           " gzip flags";
  if (r.chunk_bytes() < 1) return "chunk_bytes must be ≥ 1";
  if (r.train_rows() != 0) return "train_rows must be 0 for streamed files";
  for (int i = 0; i < r.file_bytes_size(); ++i)
    if (r.file_bytes(i) == 0) return "training file " + std::to_string(i + 1) + " is empty";
  return "";
}

std::vector<DataChunk> MakeChunks(const DataOnDemandChunk& r) {
  if (Streamed(r))
    return MakeByteChunks({r.file_bytes().begin(), r.file_bytes().end()}, {r.file_gzip().begin(), r.file_gzip().end()},
                          r.chunk_bytes(), r.taper());
  return r.taper() ? MakeTaperedRowChunks(0, r.train_rows(), r.chunk_rows())
                   : MakeRowChunks(0, r.train_rows(), r.chunk_rows());
}

}  // namespace

StatusOr<DataOnDemandChunk> ChunkService::Next(int rank, const DataOnDemandChunk& request, int64_t max_clock) {
  const std::string who = "worker " + std::to_string(rank);
  if (rank < 0) return Status::InvalidArgument("CHUNK_NEXT from negative rank " + std::to_string(rank));
  if (const std::string why = Malformed(request); !why.empty())
    return Status::InvalidArgument("CHUNK_NEXT from " + who + ": malformed shape (" + Shape(request) + "): " + why);
  // A resumed job: the checkpoint's dealing state, if its shape agrees.
  if (coordinator_ == nullptr && resume_ != nullptr) TETHER_RETURN_IF_ERROR(StartFromCheckpoint(request, who));
  if (coordinator_ == nullptr) {
    shape_ = ShapeOf(request);
    std::vector<DataChunk> chunks = MakeChunks(request);
    const size_t n = chunks.size();
    coordinator_ = std::make_unique<ChunkCoordinator>(std::move(chunks), request.epochs(), request.seed(),
                                                      /*shuffle=*/true, /*epoch_barrier=*/true);
    coordinator_->set_deal_largest_first(request.taper());
    LOG(INFO) << log_prefix_ << "data on demand: " << Shape(request) << " (" << n << " chunks per epoch), from "
              << who << "'s first request";
  } else if (!SameShape(request, shape_)) {
    return Status::InvalidArgument("data on demand: " + who + " has " + Shape(request) + " but the job has " +
                                   Shape(shape_) +
                                   " (every worker must read the same training set with the same train.chunk_rows, "
                                   "train.chunk_bytes, train.chunk_taper, data.streaming, train.epochs and "
                                   "train.seed)");
  }
  DataOnDemandChunk reply;
  if (request.completed_id() != 0) reply.set_completion_counted(CountCompletion(rank, request));
  Deal(rank, who, max_clock, &reply);
  return reply;
}

bool ChunkService::CountCompletion(int rank, const DataOnDemandChunk& request) {
  const int64_t before = coordinator_->completed_epochs();
  const Status st = coordinator_->Complete(rank, request.completed_id(), request.completed_rows());
  if (!st.ok()) {
    LOG(WARNING) << log_prefix_ << "data on demand: " << st.message();
    return false;
  }
  auto it = open_.find(request.completed_id());
  if (it != open_.end()) {
    std::vector<int64_t>& rows = epoch_rows_[rank];
    const size_t e = static_cast<size_t>(it->second.second);
    if (rows.size() <= e) rows.resize(e + 1, 0);
    rows[e] += request.completed_rows();
    open_.erase(it);
    // Streamed: a re-dealt chunk's rows are known once it is completed.
    if (redealt_open_.erase(request.completed_id()) > 0) redealt_rows_ += static_cast<uint64_t>(request.completed_rows());
  }
  for (int64_t e = before; e < coordinator_->completed_epochs(); ++e) LogEpoch(e);
  return true;
}

void ChunkService::Deal(int rank, const std::string& who, int64_t max_clock, DataOnDemandChunk* reply) {
  const ChunkCoordinator::Grant g = coordinator_->Next(rank);
  switch (g.kind) {
    case ChunkCoordinator::GrantKind::kChunk:
      break;
    case ChunkCoordinator::GrantKind::kWait:
      reply->set_kind(DataOnDemandChunk::WAIT);
      reply->set_max_clock(max_clock);
      return;
    case ChunkCoordinator::GrantKind::kDone:
      reply->set_kind(DataOnDemandChunk::DONE);
      return;
  }
  reply->set_kind(DataOnDemandChunk::CHUNK);
  reply->set_id(g.id);
  reply->set_epoch(g.epoch);
  reply->set_file(g.chunk.file);
  reply->set_begin(g.chunk.begin);
  reply->set_end(g.chunk.end);
  reply->set_redealt(g.redealt);
  open_[g.id] = {rank, g.epoch};
  ++dealt_;
  if (!g.redealt) return;
  if (Streamed(shape_)) redealt_open_.insert(g.id);
  LOG(INFO) << log_prefix_ << "data on demand: " << (Streamed(shape_) ? "bytes [" : "rows [") << g.chunk.begin << ", "
            << g.chunk.end << ")"
            << (Streamed(shape_) ? " of training file " + std::to_string(g.chunk.file + 1) : std::string())
            << " of epoch " << g.epoch + 1 << ", held by a worker that left, dealt again to " << who;
}

int ChunkService::Leave(int rank) {
  if (coordinator_ == nullptr) return 0;
  const int n = coordinator_->Leave(rank);
  for (auto it = open_.begin(); it != open_.end();) it = it->second.first == rank ? open_.erase(it) : std::next(it);
  for (auto it = redealt_open_.begin(); it != redealt_open_.end();)
    it = open_.count(*it) ? std::next(it) : redealt_open_.erase(it);
  if (n > 0)
    LOG(WARNING) << log_prefix_ << "data on demand: worker " << rank << " left holding " << n
                 << " chunk(s): they are dealt again (their pushes so far stay applied)";
  return n;
}

void ChunkService::FillStats(ShardStats* stats) const {
  stats->set_chunks_dealt(dealt_);
  stats->set_chunks_redealt(coordinator_ ? static_cast<uint64_t>(coordinator_->redealt_chunks()) : 0);
  // Streamed chunks are bytes: their rows are those the re-dealt chunks'
  // completions counted.
  stats->set_rows_redealt(coordinator_ == nullptr ? 0
                          : Streamed(shape_)      ? redealt_rows_
                                                  : coordinator_->redealt_units());
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
            << " chunk(s), "
            << (Streamed(shape_) ? std::to_string(coordinator_->redealt_units()) + " bytes (" +
                                       std::to_string(redealt_rows_) + " rows completed)"
                                 : std::to_string(coordinator_->redealt_units()) + " rows");
}

void ChunkService::Snapshot(ChunkDealingState* state) const {
  state->Clear();
  if (resume_ != nullptr) *state->mutable_resume() = *resume_;
  if (coordinator_ == nullptr) return;
  *state->mutable_shape() = shape_;
  coordinator_->Snapshot(state);
  state->set_chunks_dealt(dealt_);
  for (const auto& [rank, rows] : epoch_rows_) {
    ChunkDealingState::RankRows* o = state->add_rank_rows();
    o->set_rank(rank);
    *o->mutable_epoch_rows() = {rows.begin(), rows.end()};
  }
  for (uint64_t id : redealt_open_) state->add_redealt_open(id);
  state->set_redealt_rows(redealt_rows_);
}

Status ChunkService::Restore(const ChunkDealingState& state) {
  std::unique_ptr<ChunkCoordinator> coordinator;
  if (state.has_shape()) {
    const DataOnDemandChunk& shape = state.shape();
    if (const std::string why = Malformed(shape); !why.empty())
      return Status::InvalidArgument("data-on-demand copy: malformed shape (" + Shape(shape) + "): " + why);
    coordinator = std::make_unique<ChunkCoordinator>(MakeChunks(shape), shape.epochs(), shape.seed(),
                                                     /*shuffle=*/true, /*epoch_barrier=*/true);
    coordinator->set_deal_largest_first(shape.taper());
    TETHER_RETURN_IF_ERROR(coordinator->Restore(state));
  }
  std::map<uint64_t, std::pair<int, int64_t>> open;
  for (const ChunkDealingState::Grant& g : state.held()) open[g.id()] = {g.rank(), g.epoch()};
  std::map<int, std::vector<int64_t>> epoch_rows;
  for (const ChunkDealingState::RankRows& r : state.rank_rows())
    epoch_rows[r.rank()].assign(r.epoch_rows().begin(), r.epoch_rows().end());
  coordinator_ = std::move(coordinator);
  shape_ = state.has_shape() ? state.shape() : DataOnDemandChunk();
  dealt_ = state.chunks_dealt();
  open_ = std::move(open);
  epoch_rows_ = std::move(epoch_rows);
  redealt_open_ = {state.redealt_open().begin(), state.redealt_open().end()};
  redealt_rows_ = state.redealt_rows();
  resume_ = state.has_resume() ? std::make_unique<ChunkCoordinatorState>(state.resume()) : nullptr;
  return Status::OK();
}

}  // namespace tether
