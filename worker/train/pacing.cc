#include "worker/train/pacing.h"

#include <algorithm>

namespace tether {

Status SlowdownIdler::Idle(double work_seconds, const std::function<Status(int ms)>& idle) {
  if (!(slowdown_ > 1.0) || !(work_seconds > 0)) return Status::OK();
  owed_ += (slowdown_ - 1.0) * work_seconds;
  const int ms = static_cast<int>(owed_ * 1000.0);
  if (ms < 1) return Status::OK();
  owed_ -= ms / 1000.0;
  idled_ += ms / 1000.0;
  return idle(ms);
}

int64_t AdaptiveBatchEnd(const AdaptiveBatchConfig& adaptive, int64_t rows, int64_t begin, int64_t batch) {
  const int64_t end = std::min(rows, begin + batch);
  if (!adaptive.enabled()) return end;
  const int64_t tail = rows - end;
  if (tail > 0 && 2 * tail < batch && rows - begin <= std::max<int64_t>(batch, adaptive.b_max())) return rows;
  return end;
}

}  // namespace tether
