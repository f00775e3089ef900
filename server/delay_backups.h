// DelayBackups: what a shard last sent each worker of one table, for delay
// compensation (optimizer.delay_compensation, optim/delay_compensation.h:
// DC-ASGD, Zheng et al., ICML 2017). The paper's parameter server keeps
// w_bak(m), the model worker m pulled; here it is kept per row (a row
// table's rows, or the shard's one dense slice, "spans" of `width` floats)
// and per worker rank.
//
// What counts as sent: a pull's reply and a push's reply carrying the
// updated rows (refresh_on_push). The worker's SSP cache
// (worker/client/param_cache.h) keeps exactly those values and serves
// reads from them, so the last values sent to worker m are the ones its
// gradient was computed on, whether the read hit its cache or not; a
// pipelined read ahead only reads rows the current minibatch does not push.
// Evaluation pulls that read absent rows as zeros (hashed models) are not
// cached by the worker and are not recorded.
//
// A span starts with every backup equal to its weights (nothing read yet:
// no compensation); a restored checkpoint or kept model resets them to the
// restored weights (Reset): checkpoints do not carry the backups. Every
// worker's cache starts empty after a checkpoint (it reads fresh) and after
// a resume, so each row a worker pushes was read, and recorded, after the
// cut: a resume compensates exactly as the uninterrupted run does.
//
// Memory: workers × width floats per span, span-major (a span's backups
// are one block, moved whole when the table's last row takes an evicted
// row's number). bytes() is what it holds.
//
// Not thread-safe: the table that owns it (the shard's event loop).
#pragma once

#include <cstdint>
#include <vector>

namespace tether {

class DelayBackups {
 public:
  /// Backups of worker ranks [0, workers) (≥ 1) of spans of `width` (≥ 1)
  /// floats.
  DelayBackups(uint32_t workers, uint64_t width);

  uint32_t workers() const { return workers_; }
  uint64_t width() const { return width_; }
  uint64_t spans() const { return spans_; }
  /// True when `rank` has backups here (a rank outside [0, workers) is
  /// pushed uncompensated).
  bool Covers(int rank) const { return rank >= 0 && static_cast<uint64_t>(rank) < workers_; }

  /// Appends span spans() with every worker's backup set to `w` (width
  /// floats: the span's weights).
  void Add(const float* w);
  /// Span `to` (< spans()) takes span `from`'s backups (eviction: the last
  /// row takes the evicted row's number; then PopBack).
  void Move(uint64_t from, uint64_t to);
  /// Drops the last span.
  void PopBack();
  /// Room for `spans` spans without regrowing.
  void Reserve(uint64_t spans);

  /// Worker `rank` (Covers) was sent span `span`'s weights `w`.
  void Record(int rank, uint64_t span, const float* w);
  /// Every worker's backup of `span` becomes `w` (a restore).
  void Reset(uint64_t span, const float* w);
  /// Worker `rank`'s backup of `span` (width floats; valid until the next
  /// Add, Move, PopBack or Reserve).
  const float* Backup(int rank, uint64_t span) const { return data_.data() + (span * workers_ + rank) * width_; }

  /// Bytes allocated: capacity × 4.
  uint64_t bytes() const { return data_.capacity() * sizeof(float); }

  /// Every backup, span-major (spans() × workers() × width() floats), and
  /// the floats of room reserved (a shard state carries both).
  const float* data() const { return data_.data(); }
  uint64_t capacity_floats() const { return data_.capacity(); }
  /// Replaces every backup with `spans` spans of `data` (spans × workers()
  /// × width() floats) in room for exactly `capacity_floats` floats (at
  /// least that many; the caller bounds it).
  void Restore(uint64_t spans, uint64_t capacity_floats, const float* data);

 private:
  uint32_t workers_;
  uint64_t width_;
  uint64_t spans_ = 0;
  std::vector<float> data_;  // span s, worker r at (s · workers_ + r) · width_
};

}  // namespace tether
