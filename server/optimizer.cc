#include "server/optimizer.h"

#include <cmath>

namespace tether {

int Optimizer::StatePerWeight() const {
  if (config_.type() == ADAGRAD) return 1;
  return config_.momentum() > 0 ? 1 : 0;
}

float Optimizer::InitialState() const {
  return config_.type() == ADAGRAD ? config_.initial_accumulator() : 0.0f;
}

void Optimizer::Apply(float* w, float* state, const float* g, uint64_t n, float lr_scale) const {
  const float lr = config_.learning_rate() * lr_scale;
  const float l2 = config_.l2();
  if (config_.type() == ADAGRAD) {
    const float eps = config_.epsilon();
    for (uint64_t i = 0; i < n; ++i) {
      const float gi = g[i] + l2 * w[i];
      state[i] += gi * gi;
      w[i] -= lr * gi / (std::sqrt(state[i]) + eps);
    }
    return;
  }
  const float mu = config_.momentum();
  if (mu > 0) {
    for (uint64_t i = 0; i < n; ++i) {
      state[i] = mu * state[i] + (g[i] + l2 * w[i]);
      w[i] -= lr * state[i];
    }
  } else {
    for (uint64_t i = 0; i < n; ++i) w[i] -= lr * (g[i] + l2 * w[i]);
  }
}

}  // namespace tether
