// What the PushEncoder and push writer tests share (push_encoder_test.cc,
// push_writer_test.cc): a pool whose frames are never pooled (every frame
// a plain ZeroMQ message, so a copy shares its bytes) and a row table's
// encoder spec. Header-only.
#pragma once

#include <cstdint>

#include "core/net/frame_pool.h"
#include "worker/client/push_encoder.h"

namespace tether::push_testing {

inline FramePool Pool() { return FramePool(FramePool::Options{1 << 20, 1 << 30}); }

inline PushEncoder::Table RowTable(WireEncoding wire, bool feedback, uint32_t dim) {
  PushEncoder::Table t;
  t.wire = wire;
  t.error_feedback = feedback;
  t.dim = dim;
  return t;
}

}  // namespace tether::push_testing
