#include "server/delay_backups.h"

#include <algorithm>
#include <cstring>
#include <utility>

namespace tether {

DelayBackups::DelayBackups(uint32_t workers, uint64_t width) : workers_(std::max(workers, 1u)), width_(width) {}

void DelayBackups::Add(const float* w) {
  data_.resize((spans_ + 1) * workers_ * width_);
  ++spans_;
  Reset(spans_ - 1, w);
}

void DelayBackups::Move(uint64_t from, uint64_t to) {
  if (from == to) return;
  const uint64_t block = uint64_t{workers_} * width_;
  std::memcpy(data_.data() + to * block, data_.data() + from * block, block * sizeof(float));
}

void DelayBackups::PopBack() {
  --spans_;
  data_.resize(spans_ * workers_ * width_);
}

void DelayBackups::Restore(uint64_t spans, uint64_t capacity_floats, const float* data) {
  const uint64_t n = spans * workers_ * width_;
  std::vector<float> restored;
  restored.reserve(std::max(n, capacity_floats));
  restored.assign(data, data + n);
  data_ = std::move(restored);
  spans_ = spans;
}

void DelayBackups::Reserve(uint64_t spans) { data_.reserve(spans * workers_ * width_); }

void DelayBackups::Record(int rank, uint64_t span, const float* w) {
  std::memcpy(data_.data() + (span * workers_ + static_cast<uint64_t>(rank)) * width_, w, width_ * sizeof(float));
}

void DelayBackups::Reset(uint64_t span, const float* w) {
  for (uint32_t r = 0; r < workers_; ++r) Record(static_cast<int>(r), span, w);
}

}  // namespace tether
