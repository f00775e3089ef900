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

// A message of `type` whose values frame holds `bytes` at an odd address
// (a frame ZeroMQ keeps inside the message may sit anywhere).
Message WithUnalignedValues(const Message& from, std::vector<unsigned char>* store) {
  store->assign(from.values.size() + 1, 0);
  std::memcpy(store->data() + 1, from.values.data(), from.values.size());
  Message m;
  m.header = from.header;
  m.values = zmq::message_t(store->data() + 1, from.values.size(), [](void*, void*) {}, nullptr);
  return m;
}

// Values of every kind the codecs treat apart: ties, subnormals, FP16's
// saturation, NaN and infinities, and lengths around the vector widths.
std::vector<float> MixedValues(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = std::sin(0.61f * static_cast<float>(i)) * std::ldexp(1.0f, static_cast<int>(i % 40) - 24);
  const float specials[] = {1.0f + 0x1p-8f, -0.0f, 70000.0f, std::nanf(""), -std::numeric_limits<float>::infinity(),
                            0x1p-20f, 3.0e38f};
  for (size_t i = 0; i < n && i < 7; ++i) v[(i * 5) % n] = specials[i];
  return v;
}

const WireEncoding kEncodings[] = {FP32, BF16, FP16};
const size_t kLengths[] = {1, 2, 7, 15, 16, 17, 31, 33, 1029};

uint32_t BitsAt(const float* p) {
  uint32_t x;
  std::memcpy(&x, p, sizeof(x));
  return x;
}

// Frame i's 4 bytes (a widened frame's value i, its bits as they are).
uint32_t WordAt(const zmq::message_t& f, size_t i) {
  uint32_t x;
  std::memcpy(&x, static_cast<const char*>(f.data()) + i * sizeof(x), sizeof(x));
  return x;
}

// ReadValuesInto gives, bit for bit, what WidenValues then a copy gave:
// every encoding, lengths off the vector widths, aligned and not.
TEST(ValueFramesTest, ReadValuesIntoIsWidenValuesInOnePass) {
  FramePool pool = Pool();
  for (const WireEncoding e : kEncodings) {
    for (const size_t n : kLengths) {
      uint64_t saturated = 0;
      const Message sent = NarrowedMessage(PULL_REPLY, MixedValues(n), e, &pool, &saturated);
      std::vector<unsigned char> store;
      const Message unaligned = WithUnalignedValues(sent, &store);
      Message old = NarrowedMessage(PULL_REPLY, MixedValues(n), e, &pool, &saturated);
      WidenValues(&old, &pool);
      for (const Message* m : {&sent, &unaligned}) {
        ASSERT_TRUE(ValidateFrames(*m, "test").ok());
        std::vector<float> got(n + 1, -7.0f);
        ReadValuesInto(*m, got.data());
        EXPECT_EQ(got[n], -7.0f) << "wrote past the values";
        for (size_t i = 0; i < n; ++i)
          ASSERT_EQ(BitsAt(&got[i]), WordAt(old.values, i))
              << WireEncodingName(e) << " n " << n << " value " << i << (m == &unaligned ? " unaligned" : "");
      }
    }
  }
}

// ScatterValueRows puts row i at pos[i] as widening then scattering did:
// runs of positions and single rows, dims 1, 3 and 17, unaligned frames.
TEST(ValueFramesTest, ScatterValueRowsWidensIntoThePositions) {
  FramePool pool = Pool();
  const std::vector<uint32_t> pos = {9, 0, 1, 2, 7, 4, 5, 10, 12};  // runs 0–2 and 4–5, the rest alone
  for (const WireEncoding e : kEncodings) {
    for (const uint32_t dim : {1u, 3u, 17u}) {
      const size_t n = pos.size() * dim;
      uint64_t saturated = 0;
      Message sent = NarrowedMessage(PULL_REPLY, MixedValues(n), e, &pool, &saturated);
      sent.header.set_value_dim(dim);
      std::vector<unsigned char> store;
      const Message odd = WithUnalignedValues(sent, &store);
      Message wide = NarrowedMessage(PULL_REPLY, MixedValues(n), e, &pool, &saturated);
      WidenValues(&wide, &pool);
      for (const Message* m : {static_cast<const Message*>(&sent), &odd}) {
        std::vector<float> out(13 * dim, -7.0f);
        ScatterValueRows(*m, pos.data(), pos.size(), dim, out.data());
        std::vector<bool> written(13, false);
        for (size_t i = 0; i < pos.size(); ++i) {
          written[pos[i]] = true;
          for (uint32_t j = 0; j < dim; ++j)
            ASSERT_EQ(BitsAt(&out[pos[i] * dim + j]), WordAt(wide.values, i * dim + j))
                << WireEncodingName(e) << " dim " << dim << " row " << i << " col " << j;
        }
        for (size_t r = 0; r < written.size(); ++r) {
          if (!written[r]) {
            EXPECT_EQ(out[r * dim], -7.0f) << "row " << r << " was not in the reply";
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace tether
