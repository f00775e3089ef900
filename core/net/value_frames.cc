#include "core/net/value_frames.h"

#include <algorithm>
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

void JoinValuePieces(Message* m, FramePool* pool) {
  if (m->value_pieces.empty()) return;
  zmq::message_t whole = pool->Take(m->values_size());
  auto* out = static_cast<char*>(whole.data());
  for (const zmq::message_t& p : m->value_pieces) {
    std::memcpy(out, p.data(), p.size());
    out += p.size();
  }
  m->values = std::move(whole);
  m->value_pieces.clear();
}

namespace {

// Copies `bytes` bytes of m's value pieces from byte `at` on into `dst`;
// *piece and *piece_start are a cursor (the piece holding `at`, and its
// first byte's offset), moved forward as pieces are passed: calls in
// increasing `at` walk the pieces once.
void CopyFromPieces(const Message& m, size_t at, size_t bytes, char* dst, size_t* piece, size_t* piece_start) {
  while (bytes > 0) {
    const zmq::message_t& p = m.value_pieces[*piece];
    if (at >= *piece_start + p.size()) {
      *piece_start += p.size();
      ++*piece;
      continue;
    }
    const size_t off = at - *piece_start;
    const size_t n = std::min(bytes, p.size() - off);
    std::memcpy(dst, static_cast<const char*>(p.data()) + off, n);
    dst += n;
    at += n;
    bytes -= n;
  }
}

}  // namespace

void ReadValuesInto(const Message& m, float* dst) {
  const uint64_t n = m.header.num_values();
  if (!m.value_pieces.empty()) {
    size_t piece = 0, start = 0;
    CopyFromPieces(m, 0, n * sizeof(float), reinterpret_cast<char*>(dst), &piece, &start);
    return;
  }
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
  if (!m.value_pieces.empty()) {  // float32 only
    const size_t row_bytes = size_t{dim} * sizeof(float);
    size_t piece = 0, start = 0;
    for (size_t i = 0; i < n;) {
      size_t j = i + 1;
      while (j < n && pos[j] == pos[j - 1] + 1) ++j;
      CopyFromPieces(m, i * row_bytes, (j - i) * row_bytes, reinterpret_cast<char*>(out + size_t{pos[i]} * dim), &piece,
                     &start);
      i = j;
    }
    return;
  }
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
