#include "core/net/value_frames.h"

#include <cstring>

#include "core/wire_codec.h"

namespace tether {

zmq::message_t NarrowFrame(const float* src, uint64_t n, float scale, WireEncoding e, float* residual,
                           FramePool* pool, uint64_t* saturated) {
  zmq::message_t f = pool->Take(n * WireBytesPerValue(e));
  if (n > 0) *saturated += EncodeValues(src, n, scale, e, residual, f.data());
  return f;
}

void WidenValues(Message* m, FramePool* pool) {
  const WireEncoding e = m->header.value_encoding();
  if (!IsHalfWire(e)) return;
  const uint64_t n = m->header.num_values();
  zmq::message_t wide = pool->Take(n * sizeof(float));
  // Scanned as they are widened (the inbox left 16-bit bytes alone): the
  // server's check reads the result instead of the values again.
  m->first_non_finite = n > 0 ? DecodeValuesScan(m->values.data(), n, e, static_cast<float*>(wide.data())) : 0;
  m->values = std::move(wide);
  m->header.clear_value_encoding();
}

void ReadValuesInto(const Message& m, float* dst) {
  const uint64_t n = m.header.num_values();
  if (n > 0) DecodeValues(m.values.data(), n, m.header.value_encoding(), dst);
}

namespace {

// Value i of a frame in encoding `e` (a small frame may sit unaligned).
float ValueAt(const unsigned char* src, size_t i, WireEncoding e) {
  if (!IsHalfWire(e)) {
    float v;
    std::memcpy(&v, src + i * sizeof(float), sizeof(v));
    return v;
  }
  uint16_t h;
  std::memcpy(&h, src + i * sizeof(uint16_t), sizeof(h));
  return e == BF16 ? Bf16ToFloat(h) : Fp16ToFloat(h);
}

}  // namespace

void ScatterValueRows(const Message& m, const uint32_t* pos, size_t n, uint32_t dim, float* out) {
  const WireEncoding e = m.header.value_encoding();
  const auto* src = static_cast<const unsigned char*>(m.values.data());
  if (dim == 1) {  // a call per value would dominate
    for (size_t i = 0; i < n; ++i) out[pos[i]] = ValueAt(src, i, e);
    return;
  }
  const size_t row_bytes = size_t{dim} * WireBytesPerValue(e);
  for (size_t i = 0; i < n;) {
    size_t j = i + 1;
    while (j < n && pos[j] == pos[j - 1] + 1) ++j;
    DecodeValues(src + i * row_bytes, (j - i) * dim, e, out + size_t{pos[i]} * dim);
    i = j;
  }
}

}  // namespace tether
