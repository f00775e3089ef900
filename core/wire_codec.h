// Wire encodings of a table's values (tables.proto WireEncoding): float32
// as stored, or 16 bits a value, bfloat16 or IEEE binary16, which halve
// the values frames of pulls and pushes. The shards keep and update
// float32; a sender narrows as it fills a frame, a receiver widens the frame
// back before anything reads it.
//
// Rounding: to nearest, ties to even, for both 16-bit encodings. A finite
// value too large for the encoding saturates to its largest finite value of
// the same sign (bfloat16: only values within half an ulp of FLT_MAX; FP16:
// |v| ≥ 65520) and is counted: it never becomes an infinity. NaN stays NaN
// and ±inf stays ±inf (a shard refuses those as it refuses them in float32).
//
// Pure functions of their inputs; thread-safe. Buffers are the caller's;
// `dst` may be unaligned.
#pragma once

#include <cstddef>
#include <cstdint>

#include "proto/tables.pb.h"

namespace tether {

/// Bytes a value takes in a values frame of encoding `e` (4 or 2).
size_t WireBytesPerValue(WireEncoding e);

/// True for BF16 and FP16.
inline bool IsHalfWire(WireEncoding e) { return e == BF16 || e == FP16; }

/// "fp32", "bf16", "fp16" (the flag's spelling).
const char* WireEncodingName(WireEncoding e);

/// One value to 16 bits; *saturated is set (never cleared) when a finite
/// value was clamped to the largest finite value.
uint16_t FloatToBf16(float v, bool* saturated);
uint16_t FloatToFp16(float v, bool* saturated);
float Bf16ToFloat(uint16_t h);
float Fp16ToFloat(uint16_t h);

/// Writes n values `src[i] × scale` to `dst` in encoding `e` (n × WireBytesPerValue(e)
/// bytes). With `residual` (n floats, error feedback: Seide et al.,
/// Interspeech 2014; Karimireddy et al., ICML 2019) the value sent is
/// v = src[i] × scale + residual[i], and residual[i] becomes v − decode(sent)
/// (0 when v is not finite). FP32 with a residual sends v and leaves a 0
/// residual. Returns the count of saturated values.
uint64_t EncodeValues(const float* src, size_t n, float scale, WireEncoding e, float* residual, void* dst);

/// Reads n values of encoding `e` from `src` into float32 `dst`.
void DecodeValues(const void* src, size_t n, WireEncoding e, float* dst);
/// DecodeValues, and returns the index of the first NaN or infinity among
/// the values (n when none; FirstNonFinite, core/finite_scan.h, on `dst`).
/// BF16 scans as it widens: no second pass over a frame of finite values.
uint64_t DecodeValuesScan(const void* src, size_t n, WireEncoding e, float* dst);

}  // namespace tether
