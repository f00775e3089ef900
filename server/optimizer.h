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

  /// Floats of state kept per weight: 0 for plain SGD and SUM, 1 for SGD with
  /// momentum (velocity) and for AdaGrad (sum of squared gradients), 2 for
  /// Adam (first and second moments).
  int StatePerWeight() const;
  /// Floats of state for a span of n weights (a row or a dense slice):
  /// n × StatePerWeight(), plus 1 for Adam's step count.
  uint64_t StateFloats(uint64_t n) const;

  /// Value the state starts at (AdaGrad's initial accumulator h0, else 0).
  float InitialState() const;

  /// Initialises the StateFloats(n) floats of state for a span of n weights.
  void InitState(float* state, uint64_t n) const;

  /// Applies one step to `n` weights `w` with gradients `g` and state `state`
  /// (StateFloats(n) floats; unused for plain SGD).
  ///  SGD:      g' = g + l2·w;  v = μ·v + g';  w -= lr·v        (μ = 0: w -= lr·g')
  ///  AdaGrad:  g' = g + l2·w;  h += g'²;      w -= lr·g' / (√h + ε)
  ///            (Duchi, Hazan & Singer, JMLR 12, 2011)
  ///  Adam:     t += 1; m = β1·m + (1−β1)·g'; v = β2·v + (1−β2)·g'²;
  ///            w -= lr·(m/(1−β1ᵗ)) / (√(v/(1−β2ᵗ)) + ε)   (Kingma & Ba, ICLR 2015)
  ///  SUM:      w += g   (no learning rate, l2 or lr_scale: exact totals)
  /// `lr_scale` multiplies the step (staleness-aware rates scale it).
  void Apply(float* w, float* state, const float* g, uint64_t n, float lr_scale = 1.0f) const;

  const OptimizerConfig& config() const { return config_; }

 private:
  OptimizerConfig config_;
};

}  // namespace tether
