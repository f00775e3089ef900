// The ranking order of every top-k in Tether (Backend::TopK, the ranking
// metrics, tether-predict): score descending, NaN after every number, and
// the smaller index first among equal scores (and among NaNs). It is a
// strict weak order even with NaN scores, so std::sort and the heap
// algorithms may use it, and every ranking of the same scores comes out
// in the same order, on any backend.
//
// Thread-safety: pure functions over caller-owned memory.
#pragma once

#include <cmath>
#include <cstdint>

namespace tether {

/// "Index a ranks before index b" over one row of `scores` (not owned).
struct TopKOrder {
  const float* scores;
  bool operator()(uint32_t a, uint32_t b) const {
    const float x = scores[a], y = scores[b];
    const bool xn = std::isnan(x), yn = std::isnan(y);
    if (xn != yn) return yn;
    if (!xn && x != y) return x > y;
    return a < b;
  }
};

/// Equal scores for a ranking: equal, or both NaN (a tie group).
inline bool SameScore(float x, float y) { return x == y || (std::isnan(x) && std::isnan(y)); }

/// The `k` best indices of scores[0, n) in TopKOrder, best first, into
/// out[0, k). Requires 0 <= k <= n. O(n log k) time; `out` doubles as the
/// heap, so no other memory is used.
void SelectTopK(const float* scores, int64_t n, int64_t k, uint32_t* out);

}  // namespace tether
