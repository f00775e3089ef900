// 16-bit values frames (core/net/value_frames.h): narrowed, checked
// against the header's size in their encoding, widened back on receipt.
#include "core/net/value_frames.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/wire_codec.h"

namespace tether {
namespace {

FramePool Pool() { return FramePool(FramePool::Options{1 << 20, 4096}); }

// Frame i as float (a small frame lives inside the message, maybe unaligned).
float FloatAt(const zmq::message_t& f, size_t i) {
  float v;
  std::memcpy(&v, static_cast<const char*>(f.data()) + i * sizeof(float), sizeof(v));
  return v;
}

// A message of `type` carrying `v` narrowed to `e` (scale 1, no residuals);
// `*saturated` counts the values that did not fit.
Message NarrowedMessage(MessageType type, const std::vector<float>& v, WireEncoding e, FramePool* pool,
                        uint64_t* saturated) {
  Message m;
  m.header.set_type(type);
  m.header.set_num_values(v.size());
  m.header.set_value_encoding(e);
  m.values = NarrowFrame(v.data(), v.size(), 1.0f, e, nullptr, pool, saturated);
  return m;
}

TEST(ValueFramesTest, NarrowThenWidenGivesTheRoundedValues) {
  FramePool pool = Pool();
  const std::vector<float> v = {1.0f, -0.333333f, 70000.0f, 0.0f, 1e-3f};
  uint64_t saturated = 0;
  Message m = NarrowedMessage(PUSH, v, FP16, &pool, &saturated);
  EXPECT_EQ(m.values.size(), v.size() * 2);
  EXPECT_EQ(saturated, 1u);  // 70000
  EXPECT_TRUE(ValidateFrames(m, "test").ok());
  m.first_non_finite = 1;  // a scan of the 16-bit bytes read as float32 says nothing of the values
  WidenValues(&m, &pool);
  EXPECT_FALSE(m.header.has_value_encoding());
  EXPECT_EQ(m.first_non_finite, v.size());  // scanned as widened: all finite
  ASSERT_EQ(m.values.size(), v.size() * 4);
  bool sat = false;
  for (size_t i = 0; i < v.size(); ++i) EXPECT_EQ(FloatAt(m.values, i), Fp16ToFloat(FloatToFp16(v[i], &sat))) << i;
  EXPECT_EQ(FloatAt(m.values, 2), 65504.0f);
  EXPECT_TRUE(ValidateFrames(m, "test").ok());
}

TEST(ValueFramesTest, FramesAreCheckedInTheirEncoding) {
  FramePool pool = Pool();
  const std::vector<float> v(6, 0.5f);
  uint64_t saturated = 0;
  Message m = NarrowedMessage(PULL_REPLY, v, BF16, &pool, &saturated);
  EXPECT_TRUE(ValidateFrames(m, "worker 0").ok());
  // The same 12 bytes read as float32 would be 3 values, not 6.
  m.header.clear_value_encoding();
  const Status st = ValidateFrames(m, "worker 0");
  EXPECT_EQ(st.code(), Status::Code::kDataLoss);
  EXPECT_NE(st.message().find("values frame has 12 bytes but the header says 6 floats"), std::string::npos)
      << st.message();
  // Only pulls' replies and pushes carry 16-bit values.
  m.header.set_type(PUSH_DELTA);
  m.header.set_value_encoding(BF16);
  EXPECT_NE(ValidateFrames(m, "worker 0").message().find("value_encoding bf16 on a message that carries float32"),
            std::string::npos);
}

// The widened values' first NaN or infinity is found as they are widened
// (a frame long enough for the vector loop, and its tail).
TEST(ValueFramesTest, WideningFindsTheFirstNonFiniteValue) {
  FramePool pool = Pool();
  for (const WireEncoding e : {BF16, FP16}) {
    for (const size_t bad : {size_t{3}, size_t{33}, size_t{39}, size_t{40}}) {
      std::vector<float> v(40, 0.25f);
      if (bad < v.size()) v[bad] = bad % 2 == 0 ? std::nanf("") : -std::numeric_limits<float>::infinity();
      if (bad < 30) v[35] = std::numeric_limits<float>::infinity();  // a later one does not count
      uint64_t saturated = 0;
      Message m = NarrowedMessage(PUSH, v, e, &pool, &saturated);
      WidenValues(&m, &pool);
      EXPECT_EQ(m.first_non_finite, bad) << WireEncodingName(e) << " value " << bad;
      EXPECT_EQ(FloatAt(m.values, 0), 0.25f);
    }
  }
}

TEST(ValueFramesTest, Fp32IsLeftAsItIs) {
  FramePool pool = Pool();
  Message m;
  m.header.set_type(PUSH);
  m.header.set_num_values(1);
  const float one = 1.5f;
  m.values = zmq::message_t(&one, sizeof(one));
  WidenValues(&m, &pool);
  EXPECT_EQ(m.values.size(), 4u);
  EXPECT_EQ(FloatAt(m.values, 0), 1.5f);
}

}  // namespace
}  // namespace tether
