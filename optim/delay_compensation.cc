#include "optim/delay_compensation.h"

namespace tether {

void CompensateDelay(const float* g, const float* w_now, const float* w_bak, uint64_t n, float lambda, float* out) {
  for (uint64_t i = 0; i < n; ++i) {
    const float gi = g[i];
    const float hessian = (lambda * gi) * gi;  // λ·g⊙g, the Hessian's approximation
    out[i] = gi + hessian * (w_now[i] - w_bak[i]);
  }
}

}  // namespace tether
