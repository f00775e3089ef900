#include "core/net/value_frames.h"

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

}  // namespace tether
