#include "core/wire_codec.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/finite_scan.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tether {
namespace {

uint32_t Bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof(x));
  return x;
}

float FromBits(uint32_t x) {
  float f;
  std::memcpy(&f, &x, sizeof(f));
  return f;
}

}  // namespace

size_t WireBytesPerValue(WireEncoding e) { return IsHalfWire(e) ? sizeof(uint16_t) : sizeof(float); }

const char* WireEncodingName(WireEncoding e) {
  switch (e) {
    case BF16: return "bf16";
    case FP16: return "fp16";
    default: return "fp32";
  }
}

uint16_t FloatToBf16(float v, bool* saturated) {
  const uint32_t x = Bits(v);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // NaN stays NaN (quiet)
  if (ax == 0x7f800000u) return static_cast<uint16_t>(x >> 16);
  const uint32_t rounded = x + 0x7fffu + ((x >> 16) & 1u);
  if ((rounded & 0x7f800000u) == 0x7f800000u) {
    *saturated = true;
    return static_cast<uint16_t>(((x >> 16) & 0x8000u) | 0x7f7fu);
  }
  return static_cast<uint16_t>(rounded >> 16);
}

float Bf16ToFloat(uint16_t h) { return FromBits(uint32_t{h} << 16); }

// Round to nearest even on the bits (F. Giesen's float_to_half_fast3_rtne):
// normals by adding the rounding bias below the kept mantissa, subnormals
// by letting the FPU round an addition to 0.5.
uint16_t FloatToFp16(float v, bool* saturated) {
  const uint32_t x = Bits(v);
  const uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u)  // inf, NaN (a NaN keeps a payload bit: still NaN)
    return static_cast<uint16_t>(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0u));
  if (ax >= 0x477ff000u) {  // ≥ 65520: would round to infinity
    *saturated = true;
    return static_cast<uint16_t>(sign | 0x7bffu);
  }
  if (ax < 0x38800000u) {  // below 2^-14: subnormal or zero
    const float r = FromBits(ax) + 0.5f;
    return static_cast<uint16_t>(sign | (Bits(r) - 0x3f000000u));
  }
  const uint32_t odd = (ax >> 13) & 1u;
  ax += 0xc8000fffu + odd;  // exponent rebased from 127 to 15, and the rounding bias
  return static_cast<uint16_t>(sign | (ax >> 13));
}

float Fp16ToFloat(uint16_t h) {
  const uint32_t sign = uint32_t{h & 0x8000u} << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    const float f = static_cast<float>(mant) * 0x1p-24f;
    return FromBits(Bits(f) | sign);
  }
  if (exp == 31) return FromBits(sign | 0x7f800000u | (mant << 13));
  return FromBits(sign | ((exp + 112u) << 23) | (mant << 13));
}

namespace {

// BF16 of the bits x, branch-free so that the loops below vectorise; the
// same results as FloatToBf16. *sat is 1 for a finite value saturated.
inline uint16_t Bf16Bits(uint32_t x, uint32_t* sat) {
  const uint32_t ax = x & 0x7fffffffu;
  const uint32_t rounded = x + 0x7fffu + ((x >> 16) & 1u);
  const bool special = ax >= 0x7f800000u;  // inf, NaN: kept (NaN made quiet)
  const bool over = !special && (rounded & 0x7f800000u) == 0x7f800000u;
  uint32_t out = rounded >> 16;
  out = special ? ((x >> 16) | (ax > 0x7f800000u ? 0x40u : 0u)) : out;
  out = over ? (((x >> 16) & 0x8000u) | 0x7f7fu) : out;
  *sat += over;
  return static_cast<uint16_t>(out);
}

// Values [i, n) one at a time: the vector loops' tail.
uint64_t EncodeBf16Tail(const float* src, size_t i, size_t n, float scale, float* residual, uint16_t* dst) {
  uint32_t sat = 0;
  for (; i < n; ++i) {
    const float v = src[i] * scale + (residual != nullptr ? residual[i] : 0.0f);
    const uint32_t x = Bits(v);
    dst[i] = Bf16Bits(x, &sat);
    if (residual != nullptr) residual[i] = (x & 0x7f800000u) != 0x7f800000u ? v - FromBits(uint32_t{dst[i]} << 16) : 0.0f;
  }
  return sat;
}

#if defined(__x86_64__)
// Bf16Bits on 8 values at a time (AVX2); the tail as Bf16Bits.
__attribute__((target("avx2"))) uint64_t EncodeBf16Avx2(const float* src, size_t n, float scale, float* residual,
                                                        uint16_t* dst) {
  const __m256 k = _mm256_set1_ps(scale);
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff), exp_mask = _mm256_set1_epi32(0x7f800000);
  const __m256i bias = _mm256_set1_epi32(0x7fff), one = _mm256_set1_epi32(1);
  const __m256i max_finite = _mm256_set1_epi32(0x7f7fffff), quiet = _mm256_set1_epi32(0x40);
  const __m256i sign16 = _mm256_set1_epi32(0x8000), top16 = _mm256_set1_epi32(0x7f7f);
  uint64_t sat = 0;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_mul_ps(_mm256_loadu_ps(src + i), k);
    if (residual != nullptr) v = _mm256_add_ps(v, _mm256_loadu_ps(residual + i));
    const __m256i x = _mm256_castps_si256(v);
    const __m256i ax = _mm256_and_si256(x, abs_mask);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), one);
    const __m256i rounded = _mm256_add_epi32(x, _mm256_add_epi32(bias, lsb));
    const __m256i special = _mm256_cmpgt_epi32(ax, max_finite);  // inf, NaN
    const __m256i nan = _mm256_cmpgt_epi32(ax, exp_mask);
    const __m256i over = _mm256_andnot_si256(
        special, _mm256_cmpeq_epi32(_mm256_and_si256(rounded, exp_mask), exp_mask));
    const __m256i hi = _mm256_srli_epi32(x, 16);
    __m256i out = _mm256_srli_epi32(rounded, 16);
    out = _mm256_blendv_epi8(out, _mm256_or_si256(hi, _mm256_and_si256(nan, quiet)), special);
    out = _mm256_blendv_epi8(out, _mm256_or_si256(_mm256_and_si256(hi, sign16), top16), over);
    sat += static_cast<uint64_t>(__builtin_popcount(_mm256_movemask_ps(_mm256_castsi256_ps(over))));
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(out, out), 0x08);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm256_castsi256_si128(packed));
    if (residual != nullptr) {
      const __m256 back = _mm256_castsi256_ps(_mm256_slli_epi32(out, 16));
      _mm256_storeu_ps(residual + i, _mm256_andnot_ps(_mm256_castsi256_ps(special), _mm256_sub_ps(v, back)));
    }
  }
  return sat + EncodeBf16Tail(src, i, n, scale, residual, dst);
}

// The same on 16 values at a time (AVX-512: mask registers instead of
// blends, half the instructions a value). GCC 12's AVX-512 intrinsics start
// from _mm512_undefined_*() and then warn that it is (or may be)
// uninitialized: the warnings are silenced for these two functions only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
__attribute__((target("avx512f"))) uint64_t EncodeBf16Avx512(const float* src, size_t n, float scale,
                                                             float* residual, uint16_t* dst) {
  const __m512 k = _mm512_set1_ps(scale);
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff), exp_mask = _mm512_set1_epi32(0x7f800000);
  const __m512i bias = _mm512_set1_epi32(0x7fff), one = _mm512_set1_epi32(1);
  const __m512i max_finite = _mm512_set1_epi32(0x7f7fffff), quiet = _mm512_set1_epi32(0x40);
  const __m512i sign16 = _mm512_set1_epi32(0x8000), top16 = _mm512_set1_epi32(0x7f7f);
  uint64_t sat = 0;
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512 v = _mm512_mul_ps(_mm512_loadu_ps(src + i), k);
    if (residual != nullptr) v = _mm512_add_ps(v, _mm512_loadu_ps(residual + i));
    const __m512i x = _mm512_castps_si512(v);
    const __m512i ax = _mm512_and_si512(x, abs_mask);
    const __m512i hi = _mm512_srli_epi32(x, 16);
    const __m512i rounded = _mm512_add_epi32(x, _mm512_add_epi32(bias, _mm512_and_si512(hi, one)));
    const __mmask16 special = _mm512_cmpgt_epi32_mask(ax, max_finite);  // inf, NaN
    const __mmask16 nan = _mm512_cmpgt_epi32_mask(ax, exp_mask);
    const __mmask16 over =
        _mm512_mask_cmpeq_epi32_mask(static_cast<__mmask16>(~special), _mm512_and_si512(rounded, exp_mask), exp_mask);
    __m512i out = _mm512_srli_epi32(rounded, 16);
    out = _mm512_mask_mov_epi32(out, special, _mm512_mask_or_epi32(hi, nan, hi, quiet));
    out = _mm512_mask_mov_epi32(out, over, _mm512_or_si512(_mm512_and_si512(hi, sign16), top16));
    sat += static_cast<uint64_t>(__builtin_popcount(over));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), _mm512_cvtepi32_epi16(out));
    if (residual != nullptr) {
      const __m512 back = _mm512_castsi512_ps(_mm512_slli_epi32(out, 16));
      _mm512_storeu_ps(residual + i, _mm512_maskz_sub_ps(static_cast<__mmask16>(~special), v, back));
    }
  }
  return sat + EncodeBf16Tail(src, i, n, scale, residual, dst);
}

// Widens n values; returns whether one is NaN or infinite (its exponent
// bits all ones: + 1 in the exponent's lowest place carries into bit 15).
__attribute__((target("avx512f"))) bool DecodeBf16Avx512(const uint16_t* src, size_t n, float* dst) {
  const __m512i exp16 = _mm512_set1_epi32(0x7f80), low16 = _mm512_set1_epi32(0x80);
  __m512i any = _mm512_setzero_si512();
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i h = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i)));
    any = _mm512_or_si512(any, _mm512_add_epi32(_mm512_and_si512(h, exp16), low16));
    _mm512_storeu_ps(dst + i, _mm512_castsi512_ps(_mm512_slli_epi32(h, 16)));
  }
  uint32_t tail = 0;
  for (; i < n; ++i) {
    tail |= (src[i] & 0x7f80u) + 0x80u;
    dst[i] = FromBits(uint32_t{src[i]} << 16);
  }
  return ((static_cast<uint32_t>(_mm512_reduce_or_epi32(any)) | tail) & 0x8000u) != 0;
}
#pragma GCC diagnostic pop

bool HasAvx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
}

bool HasAvx512() {
  static const bool has = __builtin_cpu_supports("avx512f");
  return has;
}
#else
bool HasAvx2() { return false; }
bool HasAvx512() { return false; }
uint64_t EncodeBf16Avx2(const float*, size_t, float, float*, uint16_t*) { return 0; }
uint64_t EncodeBf16Avx512(const float*, size_t, float, float*, uint16_t*) { return 0; }
bool DecodeBf16Avx512(const uint16_t*, size_t, float*) { return false; }
#endif

// src × scale (+ residual) to BF16 at `dst` (2-byte aligned).
uint64_t EncodeBf16(const float* src, size_t n, float scale, float* residual, uint16_t* dst) {
  if (HasAvx512()) return EncodeBf16Avx512(src, n, scale, residual, dst);
  if (HasAvx2()) return EncodeBf16Avx2(src, n, scale, residual, dst);
  uint32_t sat = 0;
  if (residual == nullptr) {
    for (size_t i = 0; i < n; ++i) dst[i] = Bf16Bits(Bits(src[i] * scale), &sat);
    return sat;
  }
  for (size_t i = 0; i < n; ++i) {
    const float v = src[i] * scale + residual[i];
    const uint32_t x = Bits(v);
    const uint16_t h = Bf16Bits(x, &sat);
    dst[i] = h;
    const bool finite = (x & 0x7f800000u) != 0x7f800000u;
    residual[i] = finite ? v - FromBits(uint32_t{h} << 16) : 0.0f;
  }
  return sat;
}

// As DecodeBf16Avx512.
bool DecodeBf16(const uint16_t* src, size_t n, float* dst) {
  if (HasAvx512()) return DecodeBf16Avx512(src, n, dst);
  uint32_t any = 0;
  for (size_t i = 0; i < n; ++i) {
    any |= (src[i] & 0x7f80u) + 0x80u;
    dst[i] = FromBits(uint32_t{src[i]} << 16);
  }
  return (any & 0x8000u) != 0;
}

#if defined(__x86_64__)
// IEEE binary16 with the F16C instructions: 8 values at a time, rounded to
// nearest even by the hardware; a finite value is clamped to ±65504 first
// (the hardware would give an infinity), NaN and infinities pass as they are.
__attribute__((target("avx2,f16c"))) uint64_t EncodeFp16F16c(const float* src, size_t n, float scale,
                                                             float* residual, uint16_t* dst) {
  const __m256 k = _mm256_set1_ps(scale), lim = _mm256_set1_ps(65504.0f), nlim = _mm256_set1_ps(-65504.0f);
  const __m256 sat_at = _mm256_set1_ps(65520.0f), inf = _mm256_set1_ps(std::numeric_limits<float>::infinity());
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  uint64_t sat = 0;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_mul_ps(_mm256_loadu_ps(src + i), k);
    if (residual != nullptr) v = _mm256_add_ps(v, _mm256_loadu_ps(residual + i));
    const __m256 a = _mm256_and_ps(v, abs_mask);
    const __m256 finite = _mm256_cmp_ps(a, inf, _CMP_LT_OQ);  // false for NaN and ±inf
    sat += static_cast<uint64_t>(
        __builtin_popcount(_mm256_movemask_ps(_mm256_and_ps(finite, _mm256_cmp_ps(a, sat_at, _CMP_GE_OQ)))));
    const __m256 clamped = _mm256_blendv_ps(v, _mm256_min_ps(_mm256_max_ps(v, nlim), lim), finite);
    const __m128i h = _mm256_cvtps_ph(clamped, _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
    if (residual != nullptr)
      _mm256_storeu_ps(residual + i, _mm256_and_ps(finite, _mm256_sub_ps(v, _mm256_cvtph_ps(h))));
  }
  for (; i < n; ++i) {
    const float v = src[i] * scale + (residual != nullptr ? residual[i] : 0.0f);
    bool s = false;
    dst[i] = FloatToFp16(v, &s);
    sat += s;
    if (residual != nullptr) residual[i] = std::isfinite(v) ? v - Fp16ToFloat(dst[i]) : 0.0f;
  }
  return sat;
}

__attribute__((target("avx2,f16c"))) void DecodeFp16F16c(const uint16_t* src, size_t n, float* dst) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  for (; i < n; ++i) dst[i] = Fp16ToFloat(src[i]);
}

bool HasF16c() {
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
  return has;
}
#else
bool HasF16c() { return false; }
uint64_t EncodeFp16F16c(const float*, size_t, float, float*, uint16_t*) { return 0; }
void DecodeFp16F16c(const uint16_t*, size_t, float*) {}
#endif

uint64_t EncodeFp16(const float* src, size_t n, float scale, float* residual, uint16_t* dst) {
  if (HasF16c()) return EncodeFp16F16c(src, n, scale, residual, dst);
  uint64_t sat = 0;
  for (size_t i = 0; i < n; ++i) {
    const float v = src[i] * scale + (residual != nullptr ? residual[i] : 0.0f);
    bool s = false;
    dst[i] = FloatToFp16(v, &s);
    sat += s;
    if (residual != nullptr) residual[i] = std::isfinite(v) ? v - Fp16ToFloat(dst[i]) : 0.0f;
  }
  return sat;
}

void DecodeFp16(const uint16_t* src, size_t n, float* dst) {
  if (HasF16c()) return DecodeFp16F16c(src, n, dst);
  for (size_t i = 0; i < n; ++i) dst[i] = Fp16ToFloat(src[i]);
}

bool Aligned2(const void* p) { return reinterpret_cast<uintptr_t>(p) % alignof(uint16_t) == 0; }

}  // namespace

uint64_t EncodeValues(const float* src, size_t n, float scale, WireEncoding e, float* residual, void* dst) {
  if (!IsHalfWire(e)) {
    auto* out = static_cast<unsigned char*>(dst);
    for (size_t i = 0; i < n; ++i) {
      float v = src[i] * scale;
      if (residual != nullptr) {
        v += residual[i];
        residual[i] = 0;
      }
      std::memcpy(out + i * sizeof(float), &v, sizeof(float));
    }
    return 0;
  }
  // A frame ZeroMQ keeps inside the message (under 34 bytes) may sit at an
  // odd address: its few values go through an aligned copy.
  if (!Aligned2(dst)) {
    uint16_t tmp[16];
    uint64_t sat = 0;
    for (size_t i = 0; i < n; i += 16) {
      const size_t m = std::min<size_t>(16, n - i);
      sat += EncodeValues(src + i, m, scale, e, residual != nullptr ? residual + i : nullptr, tmp);
      std::memcpy(static_cast<unsigned char*>(dst) + i * sizeof(uint16_t), tmp, m * sizeof(uint16_t));
    }
    return sat;
  }
  auto* out = static_cast<uint16_t*>(dst);
  return e == BF16 ? EncodeBf16(src, n, scale, residual, out) : EncodeFp16(src, n, scale, residual, out);
}

void DecodeValues(const void* src, size_t n, WireEncoding e, float* dst) {
  if (!IsHalfWire(e)) {
    std::memcpy(dst, src, n * sizeof(float));
    return;
  }
  if (!Aligned2(src)) {
    uint16_t tmp[16];
    for (size_t i = 0; i < n; i += 16) {
      const size_t m = std::min<size_t>(16, n - i);
      std::memcpy(tmp, static_cast<const unsigned char*>(src) + i * sizeof(uint16_t), m * sizeof(uint16_t));
      DecodeValues(tmp, m, e, dst + i);
    }
    return;
  }
  const auto* in = static_cast<const uint16_t*>(src);
  if (e == BF16) (void)DecodeBf16(in, n, dst);
  else DecodeFp16(in, n, dst);
}

uint64_t DecodeValuesScan(const void* src, size_t n, WireEncoding e, float* dst) {
  if (e == BF16 && Aligned2(src)) {
    // The scan rides along the widening; only a frame holding a non-finite
    // value is searched again.
    if (!DecodeBf16(static_cast<const uint16_t*>(src), n, dst)) return n;
  } else {
    DecodeValues(src, n, e, dst);
  }
  return FirstNonFinite(dst, n);
}

}  // namespace tether
