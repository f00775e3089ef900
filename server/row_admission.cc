#include "server/row_admission.h"

#include <algorithm>
#include <cmath>

#include "core/partition.h"
#include "optim/shard_budget.h"

namespace tether {

namespace {

uint64_t RoundUpPow2(uint64_t x) {
  uint64_t p = 64;
  while (p < x) p <<= 1;
  return p;
}

}  // namespace

CountMinSketch::CountMinSketch(uint64_t width, uint64_t seed)
    : width_(RoundUpPow2(width)), seed_(seed), counters_(kDepth * width_, 0) {}

uint64_t CountMinSketch::Index(int row, uint64_t key) const {
  // One independent-looking hash per row: MixKey of the key offset by a
  // per-row constant derived from the seed.
  const uint64_t h = MixKey(key ^ MixKey(seed_ + 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(row + 1)));
  return static_cast<uint64_t>(row) * width_ + (h & (width_ - 1));
}

uint32_t CountMinSketch::Estimate(uint64_t key) const {
  uint32_t m = kMaxCount;
  for (int r = 0; r < kDepth; ++r) m = std::min<uint32_t>(m, counters_[Index(r, key)]);
  return m;
}

uint32_t CountMinSketch::Add(uint64_t key) {
  uint64_t idx[kDepth];
  uint32_t m = kMaxCount;
  for (int r = 0; r < kDepth; ++r) {
    idx[r] = Index(r, key);
    m = std::min<uint32_t>(m, counters_[idx[r]]);
  }
  if (m == kMaxCount) return m;
  // Conservative update: only counters at the minimum move, to min + 1.
  for (int r = 0; r < kDepth; ++r)
    if (counters_[idx[r]] == m) counters_[idx[r]] = static_cast<uint16_t>(m + 1);
  return m + 1;
}

bool RowAdmission::Enabled(const TableBudget& budget) {
  return budget.admit_after() > 0 || (budget.has_admit_probability() && budget.admit_probability() < 1.0f);
}

namespace {

uint64_t ProbabilityThreshold(float p) {
  if (!(p < 1.0f)) return ~uint64_t{0};
  return static_cast<uint64_t>(std::ldexp(static_cast<double>(p), 64));
}

}  // namespace

uint64_t RowAdmission::SketchBytes(const TableBudget& budget) { return AdmissionSketchBytes(budget); }

RowAdmission::RowAdmission(const TableBudget& budget, uint64_t seed, uint32_t table_id)
    : admit_after_(budget.admit_after()),
      threshold_(ProbabilityThreshold(budget.admit_probability())),
      seed_(seed),
      table_id_(table_id),
      sketch_(AdmissionSketchWidth(budget), MixKey(seed ^ (uint64_t{table_id} << 32))) {}

bool RowAdmission::AdmitOnPush(uint64_t key) {
  bool admit;
  if (admit_after_ > 0) {
    admit = sketch_.Add(key) >= admit_after_;
  } else {
    // The draw is a function of the key's pushes so far, not of a stream:
    // whatever else the shard sees in between, this key's n-th push draws
    // the same number.
    const uint64_t n = sketch_.Add(key);
    const uint64_t draw = MixKey(MixKey(seed_ ^ (uint64_t{table_id_} << 40) ^ n) ^ key);
    admit = draw < threshold_ || threshold_ == ~uint64_t{0};
  }
  return admit;
}

}  // namespace tether
