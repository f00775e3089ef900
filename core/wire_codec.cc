#include "core/wire_codec.h"

#include <cmath>
#include <cstring>

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

float Decode(uint16_t h, WireEncoding e) { return e == BF16 ? Bf16ToFloat(h) : Fp16ToFloat(h); }

uint16_t Encode(float v, WireEncoding e, bool* saturated) {
  return e == BF16 ? FloatToBf16(v, saturated) : FloatToFp16(v, saturated);
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

uint64_t EncodeValues(const float* src, size_t n, float scale, WireEncoding e, float* residual, void* dst) {
  auto* out = static_cast<unsigned char*>(dst);
  if (!IsHalfWire(e)) {
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
  uint64_t saturated = 0;
  for (size_t i = 0; i < n; ++i) {
    float v = src[i] * scale;
    if (residual != nullptr) v += residual[i];
    bool sat = false;
    const uint16_t h = Encode(v, e, &sat);
    saturated += sat;
    if (residual != nullptr) residual[i] = std::isfinite(v) ? v - Decode(h, e) : 0.0f;
    std::memcpy(out + i * sizeof(uint16_t), &h, sizeof(h));
  }
  return saturated;
}

void DecodeValues(const void* src, size_t n, WireEncoding e, float* dst) {
  const auto* in = static_cast<const unsigned char*>(src);
  if (!IsHalfWire(e)) {
    std::memcpy(dst, in, n * sizeof(float));
    return;
  }
  for (size_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, in + i * sizeof(uint16_t), sizeof(h));
    dst[i] = Decode(h, e);
  }
}

}  // namespace tether
