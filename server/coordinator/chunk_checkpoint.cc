// The conversion between the job coordinator's dealing objects (ChunkCoordinator,
// ChunkService) and the ChunkCoordinatorState of a checkpoint; the file
// itself and its checks are checkpoint/chunk_state.h.
#include "checkpoint/chunk_state.h"

#include <glog/logging.h>

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "server/coordinator/chunk_coordinator.h"
#include "server/coordinator/chunk_service.h"

namespace tether {

// ---- ChunkCoordinator

void ChunkCoordinator::SaveState(ChunkCoordinatorState* s) const {
  s->set_chunks_per_epoch(chunks_.size());
  s->set_epochs(epochs_);
  s->set_seed(seed_);
  s->set_shuffle(shuffle_);
  s->set_epoch_barrier(barrier_);
  s->set_completed_epochs(completed_epochs_);
  s->clear_epoch_rows();
  for (int64_t r : epoch_rows_) s->add_epoch_rows(r);
  // Dealt and not completed: held by a worker, or given back by one that
  // left and not dealt again yet. Both are dealt again after a resume.
  std::map<int64_t, std::set<uint32_t>> pending_again;
  for (const auto& [id, h] : held_) pending_again[h.epoch].insert(h.chunk);
  s->clear_open();
  for (const auto& [e, ep] : open_) {
    std::set<uint32_t>& again = pending_again[e];
    again.insert(ep.returned.begin(), ep.returned.end());
    std::vector<bool> not_completed(chunks_.size(), false);
    for (size_t i = ep.next; i < ep.order.size(); ++i) not_completed[ep.order[i]] = true;
    for (uint32_t c : again) not_completed[c] = true;
    ChunkCoordinatorState::OpenEpoch* o = s->add_open();
    o->set_epoch(e);
    for (uint32_t c = 0; c < chunks_.size(); ++c)
      if (!not_completed[c]) o->add_completed(c);
    for (uint32_t c : again) o->add_held(c);
  }
  s->clear_done_ahead();
  for (int64_t e = completed_epochs_; e < epochs_; ++e)
    if (epoch_done_[static_cast<size_t>(e)]) s->add_done_ahead(e);
  s->set_next_id(next_id_);
  s->set_redealt_chunks(redealt_chunks_);
  s->set_redealt_units(redealt_units_);
  s->clear_workers();
  for (const auto& [rank, w] : workers_) {
    ChunkCoordinatorState::Worker* o = s->add_workers();
    o->set_rank(rank);
    o->set_chunks_completed(w.chunks_completed);
    o->set_rows_completed(w.rows_completed);
  }
}

namespace {

// The checks of a checkpoint's state against a coordinator over `n` chunks
// per epoch with `seed`, `shuffle` and `barrier` (ChunkCoordinator::
// RestoreState): OK, or InvalidArgument naming the field.
Status CheckCheckpointState(const ChunkCoordinatorState& s, size_t n, uint64_t seed, bool shuffle, bool barrier) {
  auto bad = [](const std::string& field, const std::string& why) {
    return Status::InvalidArgument("data-on-demand state, field " + field + ": " + why);
  };
  auto differ = [&](const std::string& field, const std::string& a, const std::string& b) {
    return bad(field, "the checkpoint has " + a + ", this job " + b);
  };
  if (s.chunks_per_epoch() != n)
    return differ("chunks_per_epoch", std::to_string(s.chunks_per_epoch()), std::to_string(n));
  if (s.seed() != seed) return differ("seed", std::to_string(s.seed()), std::to_string(seed));
  if (s.shuffle() != shuffle) return differ("shuffle", s.shuffle() ? "true" : "false", shuffle ? "true" : "false");
  if (s.epoch_barrier() != barrier)
    return differ("epoch_barrier", s.epoch_barrier() ? "true" : "false", barrier ? "true" : "false");
  if (s.epochs() < 1) return bad("epochs", "must be ≥ 1, got " + std::to_string(s.epochs()));
  if (s.completed_epochs() < 0 || s.completed_epochs() > s.epochs())
    return bad("completed_epochs", std::to_string(s.completed_epochs()) + " outside [0, " +
                                       std::to_string(s.epochs()) + "]");
  if (s.epoch_rows_size() != s.epochs())
    return bad("epoch_rows", std::to_string(s.epoch_rows_size()) + " entries for " + std::to_string(s.epochs()) +
                                 " epochs");
  for (int64_t r : s.epoch_rows())
    if (r < 0) return bad("epoch_rows", "a negative count " + std::to_string(r));
  std::set<int64_t> seen;
  int64_t last = -1;
  for (const ChunkCoordinatorState::OpenEpoch& o : s.open()) {
    const std::string e = "open (epoch " + std::to_string(o.epoch()) + ")";
    if (o.epoch() < s.completed_epochs() || o.epoch() >= s.epochs() || o.epoch() <= last)
      return bad(e, "not an epoch in progress in increasing order (completed_epochs " +
                        std::to_string(s.completed_epochs()) + ", epochs " + std::to_string(s.epochs()) + ")");
    last = o.epoch();
    seen.insert(o.epoch());
    std::vector<bool> listed(n, false);
    for (const auto* list : {&o.completed(), &o.held()}) {
      for (uint32_t c : *list) {
        if (c >= n) return bad(e, "chunk " + std::to_string(c) + " outside the " + std::to_string(n) + " chunks");
        if (listed[c]) return bad(e, "chunk " + std::to_string(c) + " listed twice");
        listed[c] = true;
      }
    }
    if (static_cast<size_t>(o.completed_size()) >= n)
      return bad(e, "every chunk completed, yet the epoch is listed as in progress");
  }
  for (int64_t d : s.done_ahead())
    if (d <= s.completed_epochs() || d >= s.epochs() || seen.count(d))
      return bad("done_ahead", "epoch " + std::to_string(d) + " is not one past completed_epochs " +
                                   std::to_string(s.completed_epochs()) + " and not in progress");
  for (const ChunkCoordinatorState::Worker& w : s.workers())
    if (w.rank() < 0) return bad("workers", "a negative rank " + std::to_string(w.rank()));
  return Status::OK();
}

}  // namespace

Status ChunkCoordinator::RestoreState(const ChunkCoordinatorState& s) {
  if (!held_.empty() || !open_.empty() || !workers_.empty() || next_id_ != 1 || completed_epochs_ != 0)
    return Status::FailedPrecondition("the chunk coordinator has dealt chunks already: a checkpoint's state is "
                                      "restored before the first request only");
  const size_t n = chunks_.size();
  TETHER_RETURN_IF_ERROR(CheckCheckpointState(s, n, seed_, shuffle_, barrier_));
  // Checked: now apply. Epochs past this job's train.epochs are dropped.
  const int64_t keep = std::min(s.epochs(), epochs_);
  for (int64_t e = 0; e < keep; ++e) epoch_rows_[static_cast<size_t>(e)] = s.epoch_rows(static_cast<int>(e));
  for (int64_t e = 0; e < std::min(s.completed_epochs(), epochs_); ++e) epoch_done_[static_cast<size_t>(e)] = true;
  for (int64_t d : s.done_ahead())
    if (d < epochs_) epoch_done_[static_cast<size_t>(d)] = true;
  completed_epochs_ = 0;
  while (completed_epochs_ < epochs_ && epoch_done_[static_cast<size_t>(completed_epochs_)]) ++completed_epochs_;
  for (const ChunkCoordinatorState::OpenEpoch& o : s.open()) {
    if (o.epoch() >= epochs_) continue;
    EnsureEpoch(o.epoch());
    Epoch& ep = open_.at(o.epoch());
    std::vector<bool> out(n, false);
    for (uint32_t c : o.completed()) out[c] = true;
    for (uint32_t c : o.held()) out[c] = true;
    std::vector<uint32_t> order;
    for (uint32_t c : ep.order)
      if (!out[c]) order.push_back(c);
    ep.order = std::move(order);
    ep.next = 0;
    ep.completed = static_cast<size_t>(o.completed_size());
    // Dealt from the back: the first held chunk goes out first.
    ep.returned.assign(o.held().rbegin(), o.held().rend());
  }
  next_id_ = std::max<uint64_t>(1, s.next_id());
  redealt_chunks_ = s.redealt_chunks();
  redealt_units_ = s.redealt_units();
  for (const ChunkCoordinatorState::Worker& w : s.workers()) {
    WorkerCounts& c = workers_[w.rank()];
    c.chunks_completed = w.chunks_completed();
    c.rows_completed = w.rows_completed();
    c.chunks_held = 0;
  }
  return Status::OK();
}

// ---- ChunkService

bool ChunkService::SaveState(int64_t clock, ChunkCoordinatorState* state) const {
  if (coordinator_ == nullptr) return false;
  state->Clear();
  state->set_format_version(kChunkStateFormatVersion);
  state->set_train_rows(shape_.train_rows());
  state->set_chunk_rows(shape_.chunk_rows());
  state->set_taper(shape_.taper());
  state->set_clock(clock);
  coordinator_->SaveState(state);
  state->set_chunks_dealt(dealt_);
  std::set<int> listed;
  for (ChunkCoordinatorState::Worker& w : *state->mutable_workers()) {
    listed.insert(w.rank());
    auto it = epoch_rows_.find(w.rank());
    if (it != epoch_rows_.end()) *w.mutable_epoch_rows() = {it->second.begin(), it->second.end()};
  }
  for (const auto& [rank, rows] : epoch_rows_) {
    if (listed.count(rank)) continue;
    ChunkCoordinatorState::Worker* w = state->add_workers();
    w->set_rank(rank);
    *w->mutable_epoch_rows() = {rows.begin(), rows.end()};
  }
  return true;
}

Status ChunkService::Resume(ChunkCoordinatorState state) {
  if (coordinator_ != nullptr)
    return Status::FailedPrecondition("data on demand: the job dealt chunks already; a checkpoint's state is "
                                      "taken before the first request only");
  resume_ = std::make_unique<ChunkCoordinatorState>(std::move(state));
  return Status::OK();
}

Status ChunkService::StartFromCheckpoint(const DataOnDemandChunk& request, const std::string& who) {
  const ChunkCoordinatorState& s = *resume_;
  const std::string diff = DiffChunkShape(s, request);
  if (!diff.empty())
    return Status::InvalidArgument("data on demand: " + who + " cannot continue the checkpoint's " +
                                   std::string(kChunkStateName) + ": " + diff);
  auto c = std::make_unique<ChunkCoordinator>(
      request.taper() ? MakeTaperedRowChunks(0, request.train_rows(), request.chunk_rows())
                      : MakeRowChunks(0, request.train_rows(), request.chunk_rows()),
      request.epochs(), request.seed(), /*shuffle=*/true, /*epoch_barrier=*/true);
  c->set_deal_largest_first(request.taper());
  if (Status st = c->RestoreState(s); !st.ok())
    return Status::InvalidArgument("data on demand: cannot continue the checkpoint's " +
                                   std::string(kChunkStateName) + ": " + st.message());
  coordinator_ = std::move(c);
  shape_.set_train_rows(request.train_rows());
  shape_.set_chunk_rows(request.chunk_rows());
  shape_.set_epochs(request.epochs());
  shape_.set_seed(request.seed());
  shape_.set_taper(request.taper());
  dealt_ = s.chunks_dealt();
  for (const ChunkCoordinatorState::Worker& w : s.workers())
    if (w.epoch_rows_size() > 0) epoch_rows_[w.rank()].assign(w.epoch_rows().begin(), w.epoch_rows().end());
  int64_t held = 0, completed = 0;
  for (const ChunkCoordinatorState::OpenEpoch& o : s.open()) {
    held += o.held_size();
    completed += o.completed_size();
  }
  LOG(INFO) << log_prefix_ << "data on demand resumed from the checkpoint at clock " << s.clock() << ": "
            << coordinator_->completed_epochs() << " of " << coordinator_->epochs() << " epochs complete, "
            << completed << " chunk(s) of the epoch in progress completed, " << held
            << " dealt and not completed at the checkpoint: dealt again first (their pushes before the checkpoint "
            << "stay applied)";
  resume_.reset();
  return Status::OK();
}

}  // namespace tether
