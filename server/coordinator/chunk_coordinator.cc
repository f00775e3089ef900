#include "server/coordinator/chunk_coordinator.h"

#include <glog/logging.h>

#include "proto/coordinator.pb.h"

#include <algorithm>
#include <random>
#include <utility>

namespace tether {

std::vector<DataChunk> MakeRowChunks(uint32_t file, uint64_t num_rows, uint64_t chunk_rows) {
  CHECK_GT(chunk_rows, 0u);
  std::vector<DataChunk> out;
  for (uint64_t b = 0; b < num_rows; b += chunk_rows) {
    DataChunk c;
    c.unit = DataChunk::Unit::kRows;
    c.file = file;
    c.begin = b;
    c.end = std::min(num_rows, b + chunk_rows);
    out.push_back(c);
  }
  return out;
}

std::vector<DataChunk> MakeTaperedRowChunks(uint32_t file, uint64_t num_rows, uint64_t chunk_rows) {
  CHECK_GT(chunk_rows, 0u);
  const uint64_t least = std::max<uint64_t>(1, chunk_rows / 8);
  std::vector<DataChunk> out;
  for (uint64_t b = 0; b < num_rows;) {
    const uint64_t left = num_rows - b;
    const uint64_t n = std::min(left, std::max(least, std::min(chunk_rows, (left + 3) / 4)));
    DataChunk c;
    c.unit = DataChunk::Unit::kRows;
    c.file = file;
    c.begin = b;
    c.end = b + n;
    out.push_back(c);
    b += n;
  }
  return out;
}

std::vector<DataChunk> MakeByteChunks(const std::vector<uint64_t>& file_bytes, const std::vector<bool>& gzip,
                                      uint64_t chunk_bytes, bool taper) {
  CHECK_GT(chunk_bytes, 0u);
  CHECK_EQ(gzip.size(), file_bytes.size());
  CHECK_LT(file_bytes.size(), static_cast<size_t>(UINT32_MAX));
  std::vector<DataChunk> out;
  for (size_t i = 0; i < file_bytes.size(); ++i) {
    CHECK_GT(file_bytes[i], 0u) << "file " << i;
    const uint32_t file = static_cast<uint32_t>(i);
    std::vector<DataChunk> pieces;
    if (gzip[i]) {
      pieces.push_back(DataChunk{DataChunk::Unit::kBytes, file, 0, file_bytes[i]});
    } else {
      pieces = taper ? MakeTaperedRowChunks(file, file_bytes[i], chunk_bytes)
                     : MakeRowChunks(file, file_bytes[i], chunk_bytes);
      for (DataChunk& c : pieces) c.unit = DataChunk::Unit::kBytes;
    }
    out.insert(out.end(), pieces.begin(), pieces.end());
  }
  return out;
}

ChunkCoordinator::ChunkCoordinator(std::vector<DataChunk> chunks, int64_t epochs, uint64_t seed, bool shuffle,
                                   bool epoch_barrier)
    : chunks_(std::move(chunks)),
      epochs_(epochs),
      seed_(seed),
      shuffle_(shuffle),
      barrier_(epoch_barrier),
      epoch_rows_(static_cast<size_t>(epochs), 0),
      epoch_done_(static_cast<size_t>(epochs), false) {
  CHECK(!chunks_.empty());
  CHECK_GE(epochs_, 1);
  CHECK_LT(chunks_.size(), static_cast<size_t>(UINT32_MAX));
  for (const DataChunk& c : chunks_) CHECK_GT(c.end, c.begin);
}

void ChunkCoordinator::EnsureEpoch(int64_t e) {
  if (open_.count(e)) return;
  Epoch ep;
  ep.order.resize(chunks_.size());
  for (size_t i = 0; i < chunks_.size(); ++i) ep.order[i] = static_cast<uint32_t>(i);
  if (shuffle_) {
    // Fisher–Yates with an explicit draw, so the order is the same on every
    // standard library (std::shuffle's is not specified).
    std::mt19937_64 rng(seed_ * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(e) + 1);
    for (size_t i = ep.order.size() - 1; i > 0; --i) std::swap(ep.order[i], ep.order[rng() % (i + 1)]);
  }
  if (largest_first_)
    std::stable_sort(ep.order.begin(), ep.order.end(), [this](uint32_t a, uint32_t b) {
      return chunks_[a].end - chunks_[a].begin > chunks_[b].end - chunks_[b].begin;
    });
  open_.emplace(e, std::move(ep));
}

ChunkCoordinator::Grant ChunkCoordinator::Next(int rank) {
  CHECK_GE(rank, 0);
  WorkerCounts& w = workers_[rank];
  Grant g;
  if (done()) {
    g.kind = GrantKind::kDone;
    return g;
  }
  // The oldest incomplete epoch first, then (without a barrier) one ahead.
  const int64_t last = barrier_ ? completed_epochs_ : std::min(epochs_ - 1, completed_epochs_ + 1);
  for (int64_t e = completed_epochs_; e <= last; ++e) {
    if (epoch_done_[static_cast<size_t>(e)]) continue;  // completed ahead of an older one
    EnsureEpoch(e);
    Epoch& ep = open_.at(e);
    if (!HasUndealt(ep)) continue;
    uint32_t chunk;
    bool redealt = false;
    if (!ep.returned.empty()) {
      chunk = ep.returned.back();
      ep.returned.pop_back();
      redealt = true;
      ++redealt_chunks_;
      redealt_units_ += chunks_[chunk].end - chunks_[chunk].begin;
    } else {
      chunk = ep.order[ep.next++];
    }
    g.kind = GrantKind::kChunk;
    g.id = next_id_++;
    g.epoch = e;
    g.chunk = chunks_[chunk];
    g.redealt = redealt;
    held_.emplace(g.id, Held{rank, e, chunk, redealt});
    ++w.chunks_held;
    return g;
  }
  g.kind = GrantKind::kWait;
  return g;
}

Status ChunkCoordinator::Complete(int rank, uint64_t id, int64_t rows) {
  auto it = held_.find(id);
  if (it == held_.end() || it->second.rank != rank) {
    return Status::FailedPrecondition("worker " + std::to_string(rank) + " completed chunk " + std::to_string(id) +
                                      " it does not hold (never dealt to it, already completed, or handed back "
                                      "when it was declared gone); its rows are not counted");
  }
  if (rows < 0) return Status::InvalidArgument("chunk " + std::to_string(id) + ": negative row count");
  const int64_t e = it->second.epoch;
  held_.erase(it);
  WorkerCounts& w = workers_[rank];
  --w.chunks_held;
  ++w.chunks_completed;
  w.rows_completed += rows;
  epoch_rows_[static_cast<size_t>(e)] += rows;
  Epoch& ep = open_.at(e);
  if (++ep.completed == chunks_.size()) {
    open_.erase(e);
    epoch_done_[static_cast<size_t>(e)] = true;
    // Epochs complete in order: one that finished before an older one
    // counts once the older one is done.
    while (completed_epochs_ < epochs_ && epoch_done_[static_cast<size_t>(completed_epochs_)]) ++completed_epochs_;
  }
  return Status::OK();
}

int ChunkCoordinator::Leave(int rank) {
  int n = 0;
  for (auto it = held_.begin(); it != held_.end();) {
    if (it->second.rank != rank) {
      ++it;
      continue;
    }
    open_.at(it->second.epoch).returned.push_back(it->second.chunk);
    it = held_.erase(it);
    ++n;
  }
  auto w = workers_.find(rank);
  if (w != workers_.end()) w->second.chunks_held = 0;
  return n;
}

void ChunkCoordinator::Snapshot(ChunkDealingState* s) const {
  s->set_completed_epochs(completed_epochs_);
  s->clear_epoch_rows();
  for (int64_t r : epoch_rows_) s->add_epoch_rows(r);
  s->clear_epochs_done();
  for (int64_t e = completed_epochs_; e < epochs_; ++e)
    if (epoch_done_[static_cast<size_t>(e)]) s->add_epochs_done(e);
  s->clear_open();
  for (const auto& [e, ep] : open_) {
    ChunkDealingState::Epoch* o = s->add_open();
    o->set_epoch(e);
    for (size_t i = ep.next; i < ep.order.size(); ++i) o->add_undealt(ep.order[i]);
    for (uint32_t c : ep.returned) o->add_returned(c);
    o->set_completed(ep.completed);
  }
  s->clear_held();
  for (const auto& [id, h] : held_) {
    ChunkDealingState::Grant* g = s->add_held();
    g->set_id(id);
    g->set_rank(h.rank);
    g->set_epoch(h.epoch);
    g->set_chunk(h.chunk);
    g->set_redealt(h.redealt);
  }
  s->set_next_id(next_id_);
  s->set_redealt_chunks(redealt_chunks_);
  s->set_redealt_units(redealt_units_);
  s->clear_workers();
  for (const auto& [rank, w] : workers_) {
    ChunkDealingState::Worker* o = s->add_workers();
    o->set_rank(rank);
    o->set_chunks_completed(w.chunks_completed);
    o->set_rows_completed(w.rows_completed);
    o->set_chunks_held(w.chunks_held);
  }
}

Status ChunkCoordinator::Restore(const ChunkDealingState& s) {
  if (!held_.empty() || !open_.empty() || !workers_.empty() || next_id_ != 1 || completed_epochs_ != 0)
    return Status::FailedPrecondition("the chunk coordinator has dealt chunks already: a copy is restored into a "
                                      "fresh one only");
  const size_t n = chunks_.size();
  auto bad = [](const std::string& field, const std::string& why) {
    return Status::InvalidArgument("data-on-demand copy, field " + field + ": " + why);
  };
  if (s.completed_epochs() < 0 || s.completed_epochs() > epochs_)
    return bad("completed_epochs", std::to_string(s.completed_epochs()) + " outside [0, " + std::to_string(epochs_) + "]");
  if (s.epoch_rows_size() != epochs_)
    return bad("epoch_rows", std::to_string(s.epoch_rows_size()) + " entries for " + std::to_string(epochs_) + " epochs");
  for (int64_t e : s.epochs_done())
    if (e < s.completed_epochs() || e >= epochs_) return bad("epochs_done", "epoch " + std::to_string(e) + " out of range");
  std::map<int64_t, Epoch> open;
  for (const ChunkDealingState::Epoch& o : s.open()) {
    const std::string field = "open (epoch " + std::to_string(o.epoch()) + ")";
    if (o.epoch() < s.completed_epochs() || o.epoch() >= epochs_ || open.count(o.epoch()))
      return bad(field, "not an epoch in progress, or listed twice");
    Epoch ep;
    for (const auto* list : {&o.undealt(), &o.returned()})
      for (uint32_t c : *list)
        if (c >= n) return bad(field, "chunk " + std::to_string(c) + " outside the " + std::to_string(n) + " chunks");
    ep.order.assign(o.undealt().begin(), o.undealt().end());
    ep.returned.assign(o.returned().begin(), o.returned().end());
    ep.completed = o.completed();
    if (ep.completed >= n) return bad(field, "every chunk completed, yet the epoch is in progress");
    open.emplace(o.epoch(), std::move(ep));
  }
  std::map<uint64_t, Held> held;
  for (const ChunkDealingState::Grant& g : s.held()) {
    if (g.rank() < 0 || g.chunk() >= n || open.count(g.epoch()) == 0 || g.id() == 0 || g.id() >= s.next_id() ||
        !held.emplace(g.id(), Held{g.rank(), g.epoch(), g.chunk(), g.redealt()}).second)
      return bad("held", "grant " + std::to_string(g.id()) + " (rank " + std::to_string(g.rank()) + ", epoch " +
                             std::to_string(g.epoch()) + ", chunk " + std::to_string(g.chunk()) +
                             ") does not fit the open epochs or next_id, or is listed twice");
  }
  std::map<int, WorkerCounts> workers;
  for (const ChunkDealingState::Worker& w : s.workers()) {
    if (w.rank() < 0 || workers.count(w.rank())) return bad("workers", "rank " + std::to_string(w.rank()));
    workers[w.rank()] = {w.chunks_completed(), w.rows_completed(), w.chunks_held()};
  }
  for (int64_t e = 0; e < epochs_; ++e) {
    epoch_rows_[static_cast<size_t>(e)] = s.epoch_rows(static_cast<int>(e));
    epoch_done_[static_cast<size_t>(e)] = e < s.completed_epochs();
  }
  for (int64_t e : s.epochs_done()) epoch_done_[static_cast<size_t>(e)] = true;
  completed_epochs_ = s.completed_epochs();
  open_ = std::move(open);
  held_ = std::move(held);
  workers_ = std::move(workers);
  next_id_ = s.next_id();
  redealt_chunks_ = s.redealt_chunks();
  redealt_units_ = s.redealt_units();
  return Status::OK();
}

}  // namespace tether
