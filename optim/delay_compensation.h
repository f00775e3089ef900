// Delay compensation for asynchronous pushes: DC-ASGD (Zheng et al.,
// "Asynchronous Stochastic Gradient Descent with Delay Compensation", ICML
// 2017), the variant with a constant λ (DC-ASGD-c, the parameter server of
// the paper's Algorithm 2). A worker m computes its gradient g on the
// weights it read, w_bak(m); by the time the push reaches the server the
// weights are w_now. A first-order Taylor expansion of the gradient around
// w_bak, with the Hessian approximated by λ·g⊙g (the diagonal of the outer
// product of the gradient, scaled), gives the gradient at w_now:
//
//   g' = g + λ·g⊙g⊙(w_now − w_bak(m))      (element-wise)
//
// The server's optimizer (optim/optimizer.h, any type) then steps with g'
// in place of g, so this is a wrapper around it. The adaptive variant
// (DC-ASGD-a, λ_t = λ0 / √MeanSquare(t)) is not implemented.
//
// Where w_bak comes from (the shard's per-worker backups of what it sent
// each worker) is server/delay_backups.h.
//
// Pure functions; thread-compatible.
#pragma once

#include <cstdint>

namespace tether {

/// out[i] = g[i] + ((λ·g[i])·g[i])·(w_now[i] − w_bak[i]) for i < n, each
/// operation rounded to float in that order (so results are exact for
/// values whose products are representable). `lambda` ≥ 0 and finite
/// (checked by the config: OptimizerConfig.delay_compensation); λ = 0 or
/// w_now = w_bak gives out = g bit for bit. `out` may be `g` (in place); it
/// must not overlap w_now or w_bak otherwise. A non-finite result (an
/// overflowing product) is left for the optimizer's step to refuse.
void CompensateDelay(const float* g, const float* w_now, const float* w_bak, uint64_t n, float lambda,
                     float* out);

}  // namespace tether
