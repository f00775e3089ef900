// libFuzzer target for the wire-message decoder (core/net/message.h):
// DecodeMessage + ValidateFrames + the Key/Value accessors, i.e. everything a
// server or worker does with a peer's bytes before its own checks.
//
// Input layout (so that the fuzzer controls the frame structure too):
//   byte 0            bit 0: the first frame is a ROUTER peer identity
//   then frames       [u16 little-endian length][that many bytes], repeated;
//                     a length past the end takes what is left.
// Any crash, sanitizer report, or broken invariant (abort) is a finding.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <zmq.hpp>

#include "core/net/message.h"

namespace {

void Require(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool routed = (data[0] & 1) != 0;
  std::vector<zmq::message_t> frames;
  size_t pos = 1;
  while (pos < size && frames.size() < 16) {
    size_t len = data[pos];
    if (pos + 1 < size) len |= size_t{data[pos + 1]} << 8;
    pos += 2;
    if (pos > size) pos = size;
    len = std::min(len, size - pos);
    frames.emplace_back(data + pos, len);
    pos += len;
  }
  tether::Message m;
  std::string identity;
  const tether::Status st = tether::DecodeMessage(&frames, &m, routed ? &identity : nullptr);
  if (!st.ok()) {
    Require(!st.message().empty());
    (void)tether::TypeName(m.header.type());
    return 0;
  }
  // A message that decodes must agree with its header exactly.
  const tether::MessageHeader& h = m.header;
  Require(m.keys.size() == h.num_keys() * sizeof(uint64_t));
  Require(m.values.size() == h.num_values() * sizeof(float));
  std::vector<uint64_t> key_scratch;
  std::vector<float> value_scratch;
  const uint64_t* keys = m.KeyData(&key_scratch);
  const float* values = m.ValueData(&value_scratch);
  uint64_t k = 0;
  for (uint64_t i = 0; i < h.num_keys(); ++i) k ^= keys[i];
  uint32_t v = 0;
  for (uint64_t i = 0; i < h.num_values(); ++i) {
    uint32_t bits;
    std::memcpy(&bits, values + i, sizeof bits);
    v ^= bits;
  }
  volatile uint64_t sink = k ^ v;
  (void)sink;
  (void)tether::TypeName(h.type());
  return 0;
}
