#include "worker/client/push_writer.h"

#include <algorithm>

#include "core/wire_codec.h"

namespace tether {

PushRowWriter::PushRowWriter(PushEncoder* encoder, uint32_t table, const uint64_t* keys, size_t n, const float* grads,
                             const uint32_t* rows, float scale, FramePool* pool, const ResidualStore::KeyList& list)
    : encoder_(encoder),
      spec_(encoder->tables_[table]),
      keys_(keys),
      n_(n),
      grads_(grads),
      rows_(rows),
      scale_(scale),
      store_(encoder->rows_[table].get()),
      list_(list),
      row_bytes_(size_t{spec_.dim} * WireBytesPerValue(spec_.wire)),
      frame_(pool->Take(n * row_bytes_)),
      out_(static_cast<unsigned char*>(frame_.data())),
      gathered_end_(rows == nullptr ? n : 0) {}

PushRowWriter::~PushRowWriter() { Finish(); }

void PushRowWriter::WriteThrough(size_t end) {
  if (finished_) return;
  WriteRows(std::min(n_, (end + row_bytes_ - 1) / std::max<size_t>(row_bytes_, 1)));
}

void PushRowWriter::Finish() {
  if (finished_) return;
  WriteRows(n_);
  if (store_ != nullptr) store_->EndList();  // may lay the list's rows out as one run for its next push
  finished_ = true;
}

zmq::message_t PushRowWriter::TakeFrame() {
  Finish();
  return std::move(frame_);
}

void PushRowWriter::WriteRows(size_t end) {
  if (!begun_) {
    begun_ = true;
    if (store_ != nullptr) {
      store_->BeginList(list_);
      // The list's residuals lie in one run: one pass over them and each
      // run of contiguous gradients.
      run_ = store_->KnownRun();
    }
  }
  if (end <= next_) return;
  if (store_ == nullptr || run_ != nullptr) {
    encoder_->saturated_ += PushEncoder::EncodeInRuns(spec_.wire, spec_.dim, grads_, rows_, next_, end, scale_, run_,
                                                      out_);
    next_ = end;
    return;
  }
  WriteLookedUp(end);
}

void PushRowWriter::WriteLookedUp(size_t end) {
  // Index entries are loaded this many rows ahead while rows are looked up
  // one by one; not while a key list repeats (Rows() finds its rows in
  // runs without the index).
  constexpr size_t kAhead = 32;
  const uint32_t dim = spec_.dim;
  while (next_ < end) {
    const size_t i = next_;
    if (!store_->in_runs())
      for (loaded_ = std::max(loaded_, i + 1); loaded_ < std::min(n_, i + kAhead); ++loaded_)
        store_->Prefetch(keys_[loaded_]);
    // A run may span rows whose gradients lie one after the other.
    if (i >= gathered_end_)
      for (gathered_end_ = i + 1; gathered_end_ < n_ && rows_[gathered_end_] == rows_[i] + (gathered_end_ - i);)
        ++gathered_end_;
    const float* g = grads_ + (rows_ != nullptr ? size_t{rows_[i]} : i) * dim;
    size_t taken = 1;
    float* residual = store_->Rows(keys_ + i, gathered_end_ - i, &taken);
    encoder_->saturated_ += EncodeValues(g, taken * dim, scale_, spec_.wire, residual, out_ + i * row_bytes_);
    next_ += taken;
  }
}

PushDenseWriter::PushDenseWriter(PushEncoder* encoder, uint32_t table, uint64_t begin, uint64_t end,
                                 const float* grad, float scale, FramePool* pool)
    : encoder_(encoder),
      wire_(encoder->tables_[table].wire),
      grad_(grad + begin),
      residual_(encoder->dense_[table].empty() ? nullptr : encoder->dense_[table].data() + begin),
      count_(end - begin),
      scale_(scale),
      value_bytes_(WireBytesPerValue(wire_)),
      frame_(pool->Take(count_ * value_bytes_)),
      out_(static_cast<unsigned char*>(frame_.data())) {}

PushDenseWriter::~PushDenseWriter() { Finish(); }

void PushDenseWriter::WriteThrough(size_t end) {
  const uint64_t target = std::min<uint64_t>(count_, (end + value_bytes_ - 1) / value_bytes_);
  if (target <= next_) return;
  float* residual = residual_ != nullptr ? residual_ + next_ : nullptr;
  encoder_->saturated_ += EncodeValues(grad_ + next_, target - next_, scale_, wire_, residual, out_ + next_ * value_bytes_);
  next_ = target;
}

void PushDenseWriter::Finish() { WriteThrough(count_ * value_bytes_); }

zmq::message_t PushDenseWriter::TakeFrame() {
  Finish();
  return std::move(frame_);
}

}  // namespace tether
