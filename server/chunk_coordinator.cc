#include "server/chunk_coordinator.h"

#include <glog/logging.h>

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

}  // namespace tether
