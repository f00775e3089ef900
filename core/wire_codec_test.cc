// Wire encodings (core/wire_codec.h): BF16 and FP16 round to nearest, ties
// to even; finite overflow saturates and is counted; NaN and infinities
// stay; decoding is exact; error feedback keeps what the rounding lost.
#include "core/wire_codec.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace tether {
namespace {

float FromBits(uint32_t x) {
  float f;
  std::memcpy(&f, &x, sizeof(f));
  return f;
}

TEST(WireCodecTest, BytesPerValueAndNames) {
  EXPECT_EQ(WireBytesPerValue(FP32), 4u);
  EXPECT_EQ(WireBytesPerValue(BF16), 2u);
  EXPECT_EQ(WireBytesPerValue(FP16), 2u);
  EXPECT_STREQ(WireEncodingName(BF16), "bf16");
  EXPECT_STREQ(WireEncodingName(FP16), "fp16");
  EXPECT_STREQ(WireEncodingName(FP32), "fp32");
}

TEST(WireCodecTest, Bf16RoundsToNearestEven) {
  bool sat = false;
  EXPECT_EQ(FloatToBf16(1.0f, &sat), 0x3f80);
  // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: ties to the even 1.
  EXPECT_EQ(FloatToBf16(FromBits(0x3f808000u), &sat), 0x3f80);
  // 1 + 3·2^-8 lies halfway between 1 + 2^-7 (odd) and 1 + 2^-6: up.
  EXPECT_EQ(FloatToBf16(FromBits(0x3f818000u), &sat), 0x3f82);
  // Just above the halfway point: up.
  EXPECT_EQ(FloatToBf16(FromBits(0x3f808001u), &sat), 0x3f81);
  EXPECT_EQ(FloatToBf16(-2.5f, &sat), 0xc020);
  EXPECT_FALSE(sat);
  EXPECT_EQ(Bf16ToFloat(0x3f81), 1.0078125f);
}

TEST(WireCodecTest, Bf16SaturatesOnlyNearFloatMax) {
  bool sat = false;
  EXPECT_EQ(FloatToBf16(std::numeric_limits<float>::max(), &sat), 0x7f7f);
  EXPECT_TRUE(sat);
  sat = false;
  EXPECT_EQ(FloatToBf16(-std::numeric_limits<float>::max(), &sat), 0xff7f);
  EXPECT_TRUE(sat);
  sat = false;
  EXPECT_EQ(FloatToBf16(std::numeric_limits<float>::infinity(), &sat), 0x7f80);
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(std::nanf(""), &sat))));
  EXPECT_FALSE(sat);
}

TEST(WireCodecTest, Fp16RoundsToNearestEven) {
  bool sat = false;
  EXPECT_EQ(FloatToFp16(1.0f, &sat), 0x3c00);
  EXPECT_EQ(FloatToFp16(-2.0f, &sat), 0xc000);
  EXPECT_EQ(FloatToFp16(65504.0f, &sat), 0x7bff);
  // 1 + 2^-11: halfway between 1 and 1 + 2^-10: ties to the even 1.
  EXPECT_EQ(FloatToFp16(1.0f + 0x1p-11f, &sat), 0x3c00);
  // 1 + 3·2^-11: halfway, the lower neighbour odd: up.
  EXPECT_EQ(FloatToFp16(1.0f + 3 * 0x1p-11f, &sat), 0x3c02);
  // Subnormals: 2^-24 is the smallest; 2^-25 ties to 0, 3·2^-25 to 2·2^-24.
  EXPECT_EQ(FloatToFp16(0x1p-24f, &sat), 0x0001);
  EXPECT_EQ(FloatToFp16(0x1p-25f, &sat), 0x0000);
  EXPECT_EQ(FloatToFp16(3 * 0x1p-25f, &sat), 0x0002);
  EXPECT_EQ(Fp16ToFloat(0x0001), 0x1p-24f);
  EXPECT_EQ(Fp16ToFloat(0x3555), 0.333251953125f);
  EXPECT_FALSE(sat);
}

TEST(WireCodecTest, Fp16SaturatesFiniteOverflowNeverInfinity) {
  bool sat = false;
  // 65519.99 rounds to 65504; 65520 would round to infinity: saturated.
  EXPECT_EQ(FloatToFp16(65519.0f, &sat), 0x7bff);
  EXPECT_FALSE(sat);
  EXPECT_EQ(FloatToFp16(65520.0f, &sat), 0x7bff);
  EXPECT_TRUE(sat);
  sat = false;
  EXPECT_EQ(FloatToFp16(-1e30f, &sat), 0xfbff);
  EXPECT_TRUE(sat);
  sat = false;
  EXPECT_EQ(FloatToFp16(-std::numeric_limits<float>::infinity(), &sat), 0xfc00);
  EXPECT_TRUE(std::isnan(Fp16ToFloat(FloatToFp16(std::nanf(""), &sat))));
  EXPECT_FALSE(sat);
}

TEST(WireCodecTest, EveryHalfDecodesAndEncodesBackToItself) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    bool sat = false;
    const float f = Fp16ToFloat(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    EXPECT_EQ(FloatToFp16(f, &sat), h) << std::hex << h;
    const float b = Bf16ToFloat(static_cast<uint16_t>(h));
    if (std::isnan(b)) continue;
    EXPECT_EQ(FloatToBf16(b, &sat), h) << std::hex << h;
  }
}

TEST(WireCodecTest, EncodeScalesCountsAndKeepsResidual) {
  const std::vector<float> src = {1.001f, -3.0f, 1e6f, 0.5f};
  std::vector<float> residual = {0.0f, 0.25f, 0.0f, 0.0f};
  std::vector<uint16_t> out(src.size());
  EXPECT_EQ(EncodeValues(src.data(), src.size(), 2.0f, FP16, residual.data(), out.data()), 1u);  // 2e6 saturates
  std::vector<float> back(src.size());
  DecodeValues(out.data(), out.size(), FP16, back.data());
  EXPECT_EQ(back[0], 2.001953125f);  // 2.002 to fp16: 2 + 2^-9
  EXPECT_EQ(back[1], -5.75f);        // −6 + 0.25
  EXPECT_EQ(back[2], 65504.0f);
  EXPECT_EQ(back[3], 1.0f);
  // What was sent plus the residual is what was meant, exactly.
  EXPECT_EQ(back[0] + residual[0], 2.002f);
  EXPECT_EQ(residual[1], 0.0f);
  EXPECT_EQ(residual[2], 2e6f - 65504.0f);
  // FP32 with a residual: sent whole, the residual spent.
  std::vector<float> wide(2), r32 = {0.5f, -1.0f};
  EncodeValues(src.data(), 2, 1.0f, FP32, r32.data(), wide.data());
  EXPECT_EQ(wide[0], src[0] + 0.5f);
  EXPECT_EQ(wide[1], -4.0f);
  EXPECT_EQ(r32[0], 0.0f);
}

TEST(WireCodecTest, BulkEncodingMatchesOneValueAtATime) {
  // Long enough for the vector paths; specials spread through it.
  std::vector<float> src;
  for (int i = 0; i < 1003; ++i) src.push_back(std::ldexp(std::sin(0.7f * i), (i % 60) - 30));
  src[5] = std::numeric_limits<float>::infinity();
  src[17] = -std::numeric_limits<float>::infinity();
  src[40] = std::nanf("");
  src[64] = 1e9f;
  src[65] = -70000.0f;
  src[66] = 65519.0f;
  src[99] = std::numeric_limits<float>::max();
  src[100] = 0x1p-30f;
  for (const WireEncoding e : {BF16, FP16}) {
    std::vector<uint16_t> bulk(src.size());
    std::vector<float> residual(src.size(), 0.0f);
    const uint64_t sat = EncodeValues(src.data(), src.size(), 1.0f, e, residual.data(), bulk.data());
    uint64_t want_sat = 0;
    for (size_t i = 0; i < src.size(); ++i) {
      bool s = false;
      const uint16_t h = e == BF16 ? FloatToBf16(src[i], &s) : FloatToFp16(src[i], &s);
      want_sat += s;
      const float back = e == BF16 ? Bf16ToFloat(h) : Fp16ToFloat(h);
      if (std::isnan(src[i])) {
        EXPECT_TRUE(std::isnan(e == BF16 ? Bf16ToFloat(bulk[i]) : Fp16ToFloat(bulk[i]))) << i;
      } else {
        EXPECT_EQ(bulk[i], h) << WireEncodingName(e) << " value " << i << " = " << src[i];
      }
      EXPECT_EQ(residual[i], std::isfinite(src[i]) ? src[i] - back : 0.0f) << WireEncodingName(e) << " " << i;
    }
    EXPECT_EQ(sat, want_sat) << WireEncodingName(e);
    std::vector<float> decoded(src.size());
    DecodeValues(bulk.data(), bulk.size(), e, decoded.data());
    for (size_t i = 0; i < src.size(); ++i) {
      if (std::isnan(src[i])) continue;
      EXPECT_EQ(decoded[i], e == BF16 ? Bf16ToFloat(bulk[i]) : Fp16ToFloat(bulk[i])) << i;
    }
  }
}

}  // namespace
}  // namespace tether
