#include "server/optimizer.h"

#include <algorithm>
#include <cmath>

namespace tether {

int Optimizer::StatePerWeight() const {
  if (config_.type() == SUM) return 0;
  if (config_.type() == ADAM) return 2;
  if (config_.type() == ADAGRAD) return 1;
  return config_.momentum() > 0 ? 1 : 0;
}

float Optimizer::InitialState() const {
  return config_.type() == ADAGRAD ? config_.initial_accumulator() : 0.0f;
}

uint64_t Optimizer::StateFloats(uint64_t n) const {
  return n * StatePerWeight() + (config_.type() == ADAM ? 1 : 0);
}

void Optimizer::InitState(float* state, uint64_t n) const {
  std::fill(state, state + StateFloats(n), InitialState());
}

void Optimizer::Apply(float* w, float* state, const float* g, uint64_t n, float lr_scale) const {
  if (config_.type() == SUM) {
    for (uint64_t i = 0; i < n; ++i) w[i] += g[i];
    return;
  }
  const float lr = config_.learning_rate() * lr_scale;
  const float l2 = config_.l2();
  if (config_.type() == ADAM) {
    const float b1 = config_.beta1(), b2 = config_.beta2(), eps = config_.epsilon();
    float* m = state;
    float* v = state + n;
    float& t = state[2 * n];
    t += 1.0f;
    const float c1 = 1.0f - std::pow(b1, t);
    const float c2 = 1.0f - std::pow(b2, t);
    const float step = lr / c1;
    const float inv_c2 = 1.0f / c2;
    for (uint64_t i = 0; i < n; ++i) {
      const float gi = g[i] + l2 * w[i];
      m[i] = b1 * m[i] + (1.0f - b1) * gi;
      v[i] = b2 * v[i] + (1.0f - b2) * gi * gi;
      w[i] -= step * m[i] / (std::sqrt(v[i] * inv_c2) + eps);
    }
    return;
  }
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
