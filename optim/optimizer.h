// Server-side optimizers applied to pushed gradients, one row (or dense
// slice) at a time. Optimizer state lives beside the weights it belongs to.
//
// Stateless and thread-compatible: Apply only touches the buffers it is given.
#pragma once

#include <cstdint>
#include <string>

#include "proto/tables.pb.h"

namespace tether {

class Optimizer {
 public:
  explicit Optimizer(const OptimizerConfig& config);

  /// Floats of state kept per weight: 0 for plain SGD, SUM and NOOP, 1 for SGD with
  /// momentum (velocity) and for AdaGrad (sum of squared gradients), 2 for
  /// Adam (first and second moments) and for FTRL (z, then n: the span's n
  /// z values come first, then its n sums of squared gradients).
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
  ///            with weight_decay λ > 0 (AdamW: Loshchilov & Hutter, ICLR
  ///            2019) the weight is first shrunk, w ← w·(1 − lr·λ), lr the
  ///            step's rate (lr_scale included); m and v never see λ
  ///  FTRL:     per coordinate (McMahan et al., KDD 2013, Algorithm 1), with
  ///            α = alpha·lr_scale, β = beta, λ1 = l1, λ2 = l2:
  ///            σ = (√(n + g²) − √n)/α;  z += g − σ·w;  n += g²;
  ///            w = 0 if |z| ≤ λ1, else −(z − sgn(z)·λ1) / ((β + √n)/α + λ2)
  ///            (learning_rate is not read). A coordinate with n = 0 first
  ///            sets z so that w(z, 0) is the weight it holds (its initial
  ///            value). The stored weight is always that w: pulls, exports
  ///            and checkpoints see it; z and n are the state.
  ///  SUM:      w += g   (no learning rate, l2 or lr_scale: exact totals)
  ///  NOOP:     nothing (benchmarks: the push is still checked and its rows
  ///            looked up by the caller; see proto/tables.proto)
  /// `lr_scale` multiplies the step (staleness-aware rates scale it).
  /// w, state and g must not overlap. Cost (dim 256, in cache, one core):
  /// about 0.1 µs per row for Adam with AVX2 (one exp for the bias
  /// correction, none once βᵗ rounds away; the loop runs 8 floats wide).
  /// Returns false when the step wrote a NaN or an infinity to a weight or
  /// to the state (case C22); the kernels check every value they store, in
  /// registers, at no extra pass over memory. Nothing is undone here: the
  /// caller (ServerTable) keeps what it needs to undo a push.
  bool Apply(float* w, float* state, const float* g, uint64_t n, float lr_scale = 1.0f) const;

  /// Rows of at most this many floats are gathered by a loop of their own
  /// instead of a memcpy per row (ServerTable::PullRowsAt).
  static constexpr uint32_t kMaxGatheredDim = 16;
  /// Rows without optimizer state of at most this many weights take one
  /// call per push instead of one per row (ApplyGathered).
  static constexpr uint32_t kMaxGatheredStepDim = 1024;
  /// True when ApplyGathered serves rows of `dim` weights: NOOP at any
  /// dim > 0; plain SGD and SUM (no state) at 0 < dim ≤ kMaxGatheredStepDim.
  bool CanApplyGathered(uint64_t dim) const;
  /// Applies one step to each of n rows with no state: row i's `dim` weights
  /// at base + offsets[i], its gradients at g + i·dim. The same bits as
  /// Apply on each row in turn. Rows that lie one after the other in the
  /// table (offsets[i + 1] = offsets[i] + dim) are stepped as one span, up
  /// to kMaxGatheredStepDim floats at a time. Stops at the first row whose
  /// step would store a NaN or an infinity, leaves that row as it was, and
  /// returns its index (the rows before it keep their updates); n when all
  /// were finite. Requires CanApplyGathered(dim). Uses 4 KB of stack.
  uint64_t ApplyGathered(float* base, const uint64_t* offsets, uint64_t n, const float* g, uint32_t dim,
                         float lr_scale = 1.0f) const;

  const OptimizerConfig& config() const { return config_; }
  /// The type and the settings its step reads, for messages:
  /// "ADAGRAD (learning_rate 0.1, initial_accumulator 0.1, epsilon 1e-08, l2 0)".
  std::string Describe() const;

 private:
  // One pass of the step: the kernel of the type, storing or not; returns
  // non-zero when a value is not finite.
  uint32_t Kernel(float* w, float* state, const float* g, uint64_t n, float lr_scale, bool store) const;
  // 1 − βᵗ in float: −expm1(t · ln β), or exactly 1 once t >= one_after.
  static float BiasCorrection(float t, double log_beta, float one_after);

  OptimizerConfig config_;
  // Adam's bias correction, precomputed from the config: ln β1, ln β2, and
  // the step counts from which 1 − βᵗ rounds to 1.0f.
  double log_beta1_ = 0, log_beta2_ = 0;
  float one_after1_ = 0, one_after2_ = 0;
};

}  // namespace tether
