// Server-side optimizers applied to pushed gradients, one row (or dense
// slice) at a time. Optimizer state lives beside the weights it belongs to.
//
// Stateless and thread-compatible: Apply only touches the buffers it is given.
#pragma once

#include <cstdint>

#include "proto/tether.pb.h"

namespace tether {

class Optimizer {
 public:
  explicit Optimizer(const OptimizerConfig& config) : config_(config) {}

  /// Floats of state kept per weight: 0 for plain SGD, 1 for SGD with
  /// momentum (velocity) and for AdaGrad (sum of squared gradients).
  int StatePerWeight() const;

  /// Value the state starts at (AdaGrad's initial accumulator h0, else 0).
  float InitialState() const;

  /// Applies one step to `n` weights `w` with gradients `g` and state `state`
  /// (n × StatePerWeight() floats; unused for plain SGD).
  ///  SGD:      g' = g + l2·w;  v = μ·v + g';  w -= lr·v        (μ = 0: w -= lr·g')
  ///  AdaGrad:  g' = g + l2·w;  h += g'²;      w -= lr·g' / (√h + ε)
  ///            (Duchi, Hazan & Singer, JMLR 12, 2011)
  /// `lr_scale` multiplies the step (staleness-aware rates scale it).
  void Apply(float* w, float* state, const float* g, uint64_t n, float lr_scale = 1.0f) const;

  const OptimizerConfig& config() const { return config_; }

 private:
  OptimizerConfig config_;
};

}  // namespace tether
