#include "core/top_k.h"

#include <algorithm>

namespace tether {

void SelectTopK(const float* scores, int64_t n, int64_t k, uint32_t* out) {
  if (k <= 0) return;
  const TopKOrder better{scores};
  // A heap of the k best so far with the worst on top: a candidate only
  // has to beat that one.
  for (int64_t j = 0; j < k; ++j) out[j] = static_cast<uint32_t>(j);
  std::make_heap(out, out + k, better);
  for (int64_t j = k; j < n; ++j) {
    const uint32_t cand = static_cast<uint32_t>(j);
    if (better(cand, out[0])) {
      std::pop_heap(out, out + k, better);
      out[k - 1] = cand;
      std::push_heap(out, out + k, better);
    }
  }
  std::sort_heap(out, out + k, better);
}

}  // namespace tether
