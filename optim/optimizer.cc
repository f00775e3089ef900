#include "optim/optimizer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "core/prefetch.h"

namespace tether {
namespace {

// The update loops are compiled twice, for baseline x86-64 and for
// x86-64-v3 (AVX2 + FMA), and picked at load time (as in
// compute/cpu_backend.cc): 8-wide sqrt and division without requiring
// -march=native at build time. A server applies these to every pushed row,
// so they sit on the critical path of each minibatch. The AVX2 clone fuses
// multiply-adds, so its results differ from the baseline clone's in the
// last bit; on one machine the same clone always runs (deterministic).
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
#define TETHER_OPT_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define TETHER_OPT_CLONES
#endif

// Every kernel takes __restrict pointers: a row's weights, its state and the
// pushed gradient never overlap, and saying so lets GCC drop the run-time
// overlap checks and the scalar fallback it would otherwise keep. One fused
// pass per row, so each float of weights and state is loaded and stored
// once. kL2: whether g' = g + l2·w (a separate instantiation keeps the
// common l2 = 0 case free of the extra multiply-add).

// 1 when x is NaN or infinite (its exponent bits all ones), else 0. The
// kernels OR this over every value they store, in registers, so the check
// that no step wrote a non-finite value (case C22) costs no extra pass over
// the row and vectorises with the loop.
inline uint32_t NonFinite(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  return static_cast<uint32_t>((bits & 0x7f800000u) == 0x7f800000u);
}

// kStore: false runs the step without storing anything and only reports
// whether a value of it would be a NaN or an infinity (a check pass); true
// stores it. Apply stores in one pass (the caller undoes a refused step);
// GatheredKernel checks a run of rows, then stores it: on scattered rows
// that miss the cache, with the next rows hinted, that ran 1.5-2.3x faster
// than computing each run into a buffer and copying it back (ServerTable,
// SGD at dims 16-256, 2 M-8 M rows). Both passes
// compute the same expressions, so the stored values are the bits one pass
// gives. (A check pass before every in-place step, without hints, ran
// 2-12x slower on rows that miss the cache, and costs Adam a second
// computation of its step: Apply does not take it.)
// kDecay: decoupled weight decay (AdamW), the weight shrunk by `keep` =
// 1 − lr·weight_decay before the step; the moments never see it. A
// separate instantiation keeps weight_decay = 0 the very loop it was.
template <bool kL2, bool kDecay, bool kStore>
inline uint32_t AdamLoop(float* __restrict w, float* __restrict m, float* __restrict v,
                         const float* __restrict g, uint64_t n, float l2, float b1, float b2,
                         float step, float inv_c2, float eps, float keep) {
  const float a1 = 1.0f - b1, a2 = 1.0f - b2;
  uint32_t bad = 0;
  for (uint64_t i = 0; i < n; ++i) {
    const float gi = kL2 ? g[i] + l2 * w[i] : g[i];
    const float mi = b1 * m[i] + a1 * gi;
    const float vi = b2 * v[i] + a2 * gi * gi;
    const float wd = kDecay ? w[i] * keep : w[i];
    const float wi = wd - step * mi / (std::sqrt(vi * inv_c2) + eps);
    if (kStore) {
      m[i] = mi;
      v[i] = vi;
      w[i] = wi;
    }
    bad |= NonFinite(wi) | NonFinite(mi) | NonFinite(vi);
  }
  return bad;
}

template <bool kDecay>
inline uint32_t AdamLoops(float* __restrict w, float* __restrict m, float* __restrict v, const float* __restrict g,
                          uint64_t n, float l2, float b1, float b2, float step, float inv_c2, float eps, float keep,
                          bool store) {
  if (l2 != 0.0f) {
    return store ? AdamLoop<true, kDecay, true>(w, m, v, g, n, l2, b1, b2, step, inv_c2, eps, keep)
                 : AdamLoop<true, kDecay, false>(w, m, v, g, n, l2, b1, b2, step, inv_c2, eps, keep);
  }
  return store ? AdamLoop<false, kDecay, true>(w, m, v, g, n, l2, b1, b2, step, inv_c2, eps, keep)
               : AdamLoop<false, kDecay, false>(w, m, v, g, n, l2, b1, b2, step, inv_c2, eps, keep);
}

// keep = 1 exactly when there is no weight decay: the loop without it.
TETHER_OPT_CLONES uint32_t AdamKernel(float* __restrict w, float* __restrict m, float* __restrict v,
                                      const float* __restrict g, uint64_t n, float l2, float b1, float b2,
                                      float step, float inv_c2, float eps, float keep, bool store) {
  if (keep != 1.0f) return AdamLoops<true>(w, m, v, g, n, l2, b1, b2, step, inv_c2, eps, keep, store);
  return AdamLoops<false>(w, m, v, g, n, l2, b1, b2, step, inv_c2, eps, keep, store);
}

template <bool kStore>
inline uint32_t AdagradLoop(float* __restrict w, float* __restrict h, const float* __restrict g, uint64_t n,
                            float l2, float lr, float eps) {
  uint32_t bad = 0;
  for (uint64_t i = 0; i < n; ++i) {
    const float gi = g[i] + l2 * w[i];
    const float hi = h[i] + gi * gi;
    const float wi = w[i] - lr * gi / (std::sqrt(hi) + eps);
    if (kStore) {
      h[i] = hi;
      w[i] = wi;
    }
    bad |= NonFinite(wi) | NonFinite(hi);
  }
  return bad;
}

TETHER_OPT_CLONES uint32_t AdagradKernel(float* __restrict w, float* __restrict h,
                                         const float* __restrict g, uint64_t n, float l2, float lr,
                                         float eps, bool store) {
  return store ? AdagradLoop<true>(w, h, g, n, l2, lr, eps) : AdagradLoop<false>(w, h, g, n, l2, lr, eps);
}

template <bool kStore>
inline uint32_t MomentumLoop(float* __restrict w, float* __restrict vel, const float* __restrict g, uint64_t n,
                             float l2, float lr, float mu) {
  uint32_t bad = 0;
  for (uint64_t i = 0; i < n; ++i) {
    const float vi = mu * vel[i] + (g[i] + l2 * w[i]);
    const float wi = w[i] - lr * vi;
    if (kStore) {
      vel[i] = vi;
      w[i] = wi;
    }
    bad |= NonFinite(wi) | NonFinite(vi);
  }
  return bad;
}

TETHER_OPT_CLONES uint32_t MomentumKernel(float* __restrict w, float* __restrict vel,
                                          const float* __restrict g, uint64_t n, float l2, float lr,
                                          float mu, bool store) {
  return store ? MomentumLoop<true>(w, vel, g, n, l2, lr, mu) : MomentumLoop<false>(w, vel, g, n, l2, lr, mu);
}

// SGD without momentum (sum = false) and SUM (sum = true), as one loop.
template <bool kStore>
inline uint32_t SgdLoop(float* __restrict w, const float* __restrict g, uint64_t n, float l2, float lr, bool sum) {
  uint32_t bad = 0;
  for (uint64_t i = 0; i < n; ++i) {
    const float wi = sum ? w[i] + g[i] : w[i] - lr * (g[i] + l2 * w[i]);
    if (kStore) w[i] = wi;
    bad |= NonFinite(wi);
  }
  return bad;
}

TETHER_OPT_CLONES uint32_t SgdKernel(float* __restrict w, const float* __restrict g, uint64_t n,
                                     float l2, float lr, bool sum, bool store) {
  return store ? SgdLoop<true>(w, g, n, l2, lr, sum) : SgdLoop<false>(w, g, n, l2, lr, sum);
}

// FTRL-Proximal (McMahan et al., KDD 2013, Algorithm 1), per coordinate,
// state z then n. A coordinate never stepped (n = 0) takes its z from the
// weight it holds, z = −w·(β/α + λ2) − sgn(w)·λ1, so that w(z, 0) = w: a
// table's initializer (random rows of a hidden layer) is where FTRL starts,
// as the paper's w_1 = 0 is for a zero-initialised table. The branch on
// |z| ≤ λ1 compiles to a select, so the loop still vectorises.
template <bool kStore>
inline uint32_t FtrlLoop(float* __restrict w, float* __restrict z, float* __restrict nsum,
                        const float* __restrict g, uint64_t n, float alpha, float beta, float l1, float l2) {
  const float inv_alpha = 1.0f / alpha;
  const float base = beta * inv_alpha + l2;
  uint32_t bad = 0;
  for (uint64_t i = 0; i < n; ++i) {
    const float wi = w[i], gi = g[i], ni = nsum[i];
    const float sgn_w = wi > 0.0f ? 1.0f : (wi < 0.0f ? -1.0f : 0.0f);
    const float zi0 = ni == 0.0f ? -wi * base - sgn_w * l1 : z[i];
    const float sqrt_old = std::sqrt(ni);
    const float n_new = ni + gi * gi;
    const float sqrt_new = std::sqrt(n_new);
    const float sigma = (sqrt_new - sqrt_old) * inv_alpha;
    const float zi = zi0 + (gi - sigma * wi);
    const float sgn_z = zi > 0.0f ? 1.0f : -1.0f;
    const float w_new = std::fabs(zi) <= l1 ? 0.0f : -(zi - sgn_z * l1) / ((beta + sqrt_new) * inv_alpha + l2);
    if (kStore) {
      z[i] = zi;
      nsum[i] = n_new;
      w[i] = w_new;
    }
    bad |= NonFinite(w_new) | NonFinite(zi) | NonFinite(n_new);
  }
  return bad;
}

TETHER_OPT_CLONES uint32_t FtrlKernel(float* __restrict w, float* __restrict z, float* __restrict nsum,
                                      const float* __restrict g, uint64_t n, float alpha, float beta, float l1,
                                      float l2, bool store) {
  return store ? FtrlLoop<true>(w, z, nsum, g, n, alpha, beta, l1, l2)
               : FtrlLoop<false>(w, z, nsum, g, n, alpha, beta, l1, l2);
}

// Rows of a push without optimizer state, gathered: row i is
// w[offsets[i], + dim) with gradients g[i·dim, + dim), dim ≤
// Optimizer::kMaxGatheredStepDim. The same arithmetic as SgdKernel (l2 ≥ 0)
// or SUM (sum = true), element by element, so the results are the same bits.
// Rows whose offsets follow one another (offsets[i + 1] = offsets[i] + dim:
// rows created in the order of a sorted key list, the common case for a
// list's first rows) are taken as one run of up to kRunFloats floats, which
// is one contiguous span of the table and of g, and the loop over it runs 8
// floats wide; a scattered row is a run of one. Each run is checked (the
// step computed, nothing stored) and then stored only if every value is
// finite, as Apply does. Returns the first row whose step is not finite
// (left as it was; the rows before it stored), or n.
constexpr uint64_t kRunFloats = Optimizer::kMaxGatheredStepDim;

TETHER_OPT_CLONES uint64_t GatheredKernel(float* __restrict w, const uint64_t* __restrict offsets, uint64_t n,
                                          const float* __restrict g, uint32_t dim, float l2, float lr, bool sum) {
  const uint64_t max_rows = kRunFloats / dim;  // ≥ 1: dim ≤ kRunFloats
  const uint64_t lines = (uint64_t{dim} * sizeof(float) + 63) / 64;
  // Scattered rows miss the cache one after the other: the rows
  // kGatheredAhead further on are hinted (every line, for writing), so
  // their loads overlap this one's step. Without the hints a push of
  // scattered rows ran at one DRAM round trip a row (~550 ns at dim 256).
  constexpr uint64_t kGatheredAhead = 4;
  // A row that follows the one before it in the table is part of a run the
  // hardware prefetcher streams: only the first row of a run is hinted (a
  // 10^6-key push of one run hints nothing but its start).
  const auto hint = [&](uint64_t k) {
    if (k > 0 && offsets[k] == offsets[k - 1] + dim) return;
    for (uint64_t l = 0; l < lines; ++l) HintWrite(w + offsets[k] + l * 16);
  };
  for (uint64_t i = 0; i < std::min(n, kGatheredAhead); ++i) hint(i);
  for (uint64_t i = 0; i < n;) {
    const uint64_t first = offsets[i];
    const uint64_t limit = std::min(n - i, max_rows);
    uint64_t rows = 1;
    while (rows < limit && offsets[i + rows] == first + rows * dim) ++rows;
    // Rows i+1 .. i+rows−1 continue this run, so only those past it can
    // start one: a check per row of a 10^6-row run cost that push ~1 ms.
    for (uint64_t k = std::max(i + kGatheredAhead, i + rows); k < std::min(n, i + rows + kGatheredAhead); ++k) hint(k);
    float* __restrict wr = w + first;
    const float* __restrict gr = g + i * dim;
    const uint64_t m = rows * dim;
    if (__builtin_expect(SgdLoop<false>(wr, gr, m, l2, lr, sum) != 0, 0)) {
      // Store the rows before the first bad one, row by row.
      uint64_t ok = 0;
      while (SgdLoop<false>(wr + ok * dim, gr + ok * dim, dim, l2, lr, sum) == 0) ++ok;
      (void)SgdLoop<true>(wr, gr, ok * dim, l2, lr, sum);
      return i + ok;
    }
    (void)SgdLoop<true>(wr, gr, m, l2, lr, sum);
    i += rows;
  }
  return n;
}

// Steps t at and beyond which 1 − βᵗ rounds to exactly 1.0f (βᵗ < 2⁻²⁵),
// so the bias correction needs no exp; ∞ (never) for β outside (0, 1).
float OneAfter(double log_beta) {
  return log_beta < 0.0 ? static_cast<float>(std::ceil(-25.0 * std::log(2.0) / log_beta)) : INFINITY;
}

}  // namespace

Optimizer::Optimizer(const OptimizerConfig& config) : config_(config) {
  // βᵗ = exp(t · ln β): one exp per row and step instead of a pow, in
  // double so the result is the float rounding of the exact 1 − βᵗ as
  // closely as powf gave it (ln β is taken once here).
  log_beta1_ = std::log(static_cast<double>(config_.beta1()));
  log_beta2_ = std::log(static_cast<double>(config_.beta2()));
  one_after1_ = OneAfter(log_beta1_);
  one_after2_ = OneAfter(log_beta2_);
}

int Optimizer::StatePerWeight() const {
  if (config_.type() == SUM || config_.type() == NOOP) return 0;
  if (config_.type() == ADAM || config_.type() == FTRL) return 2;
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

float Optimizer::BiasCorrection(float t, double log_beta, float one_after) {
  if (t >= one_after) return 1.0f;
  return static_cast<float>(-std::expm1(static_cast<double>(t) * log_beta));
}

std::string Optimizer::Describe() const {
  const auto num = [](float v) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%g", static_cast<double>(v));
    return std::string(buf);
  };
  const OptimizerConfig& c = config_;
  const std::string lr = "learning_rate " + num(c.learning_rate());
  const std::string l2 = "l2 " + num(c.l2());
  switch (c.type()) {
    case SUM: return "SUM (w += g)";
    case NOOP: return "NOOP (no arithmetic; benchmarks)";
    case ADAGRAD:
      return "ADAGRAD (" + lr + ", initial_accumulator " + num(c.initial_accumulator()) + ", epsilon " +
             num(c.epsilon()) + ", " + l2 + ")";
    case FTRL:
      return "FTRL (alpha " + num(c.alpha()) + ", beta " + num(c.beta()) + ", l1 " + num(c.l1()) + ", " + l2 + ")";
    case ADAM:
      return "ADAM (" + lr + ", beta1 " + num(c.beta1()) + ", beta2 " + num(c.beta2()) + ", epsilon " +
             num(c.epsilon()) + ", " + l2 + (c.weight_decay() > 0 ? ", weight_decay " + num(c.weight_decay()) : "") +
             ")";
    default:
      return "SGD (" + lr + ", momentum " + num(c.momentum()) + ", " + l2 + ")";
  }
}

bool Optimizer::CanApplyGathered(uint64_t dim) const {
  if (dim == 0) return false;
  if (config_.type() == NOOP) return true;  // nothing to do, at any width
  if (dim > kMaxGatheredStepDim) return false;
  return config_.type() == SUM || (config_.type() == SGD && config_.momentum() <= 0);
}

uint64_t Optimizer::ApplyGathered(float* base, const uint64_t* offsets, uint64_t n, const float* g, uint32_t dim,
                                  float lr_scale) const {
  if (config_.type() == NOOP) return n;
  return GatheredKernel(base, offsets, n, g, dim, config_.l2(), config_.learning_rate() * lr_scale,
                        config_.type() == SUM);
}

uint32_t Optimizer::Kernel(float* w, float* state, const float* g, uint64_t n, float lr_scale, bool store) const {
  if (config_.type() == SUM) return SgdKernel(w, g, n, 0.0f, 0.0f, /*sum=*/true, store);
  const float lr = config_.learning_rate() * lr_scale;
  const float l2 = config_.l2();
  if (config_.type() == ADAM) {
    // The step count is stored with the row (its last float of state).
    const float t = state[2 * n] + 1.0f;
    if (store) state[2 * n] = t;
    const float c1 = BiasCorrection(t, log_beta1_, one_after1_);
    const float c2 = BiasCorrection(t, log_beta2_, one_after2_);
    // No decay: keep is exactly 1 and the loop without it runs.
    const float keep = config_.weight_decay() > 0.0f ? 1.0f - lr * config_.weight_decay() : 1.0f;
    return AdamKernel(w, state, state + n, g, n, l2, config_.beta1(), config_.beta2(), lr / c1, 1.0f / c2,
                      config_.epsilon(), keep, store);
  }
  if (config_.type() == FTRL)
    return FtrlKernel(w, state, state + n, g, n, config_.alpha() * lr_scale, config_.beta(), config_.l1(), l2, store);
  if (config_.type() == ADAGRAD) return AdagradKernel(w, state, g, n, l2, lr, config_.epsilon(), store);
  const float mu = config_.momentum();
  if (mu > 0) return MomentumKernel(w, state, g, n, l2, lr, mu, store);
  return SgdKernel(w, g, n, l2, lr, /*sum=*/false, store);
}

bool Optimizer::Apply(float* w, float* state, const float* g, uint64_t n, float lr_scale) const {
  // Every check happened before Apply (server.cc), and the row was looked
  // up or created by the table: NOOP leaves out only the arithmetic.
  if (config_.type() == NOOP) return true;
  return Kernel(w, state, g, n, lr_scale, /*store=*/true) == 0;
}

}  // namespace tether
