// ServerTable's delay compensation (optimizer.delay_compensation): the
// reads each worker was sent, and a push's gradients corrected by them
// (server/table.h, server/delay_backups.h, optim/delay_compensation.h).
#include "server/table.h"

#include "optim/delay_compensation.h"

namespace tether {

const float* ServerTable::Compensated(const uint64_t* offsets, uint64_t n, const float* g, int pusher) {
  if (backups_ == nullptr || !backups_->Covers(pusher)) return g;
  const uint32_t dim = dim_;
  const float lambda = spec_.optimizer().delay_compensation();
  compensated_.resize(n * dim);
  for (uint64_t i = 0; i < n; ++i)
    CompensateDelay(g + i * dim, data_.data() + offsets[i], backups_->Backup(pusher, offsets[i] / stride_), dim,
                    lambda, compensated_.data() + i * dim);
  return compensated_.data();
}

void ServerTable::NoteRead(int rank, const uint64_t* keys, uint64_t n) {
  if (backups_ == nullptr || !backups_->Covers(rank)) return;
  for (uint64_t i = 0; i < n; ++i) {
    const uint64_t row = index_.Find(keys[i]);
    if (row != RowIndex::kAbsent) backups_->Record(rank, row, data_.data() + row * stride_);
  }
}

void ServerTable::NoteReadAt(int rank, const uint64_t* offsets, uint64_t n) {
  if (backups_ == nullptr || !backups_->Covers(rank)) return;
  for (uint64_t i = 0; i < n; ++i) backups_->Record(rank, offsets[i] / stride_, data_.data() + offsets[i]);
}

void ServerTable::NoteDenseRead(int rank) {
  if (backups_ != nullptr && backups_->Covers(rank)) backups_->Record(rank, 0, data_.data());
}

void ServerTable::ResetDelayBackups() {
  if (backups_ == nullptr) return;
  const uint64_t spans = IsDenseTable(spec_) ? 1 : index_.size();  // == backups_->spans()
  for (uint64_t s = 0; s < spans; ++s) backups_->Reset(s, data_.data() + s * stride_);
}

}  // namespace tether
