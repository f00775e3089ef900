// Values frames in a table's wire encoding (core/wire_codec.h): narrowing
// float32 values into a frame as it is filled, and widening a received
// 16-bit frame back to float32 in place of the message's own, so that
// everything after the receipt reads float32 as before.
//
// Thread-compatible: one thread per Message; the pool is FramePool's
// (Take is thread-safe).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/net/frame_pool.h"
#include "core/net/message.h"

namespace tether {

/// A values frame of n values `src[i] × scale` in encoding `e`, from `pool`,
/// with error feedback through `residual` when non-null (n floats;
/// EncodeValues). *saturated grows by the values clamped to the encoding's
/// largest finite value.
zmq::message_t NarrowFrame(const float* src, uint64_t n, float scale, WireEncoding e, float* residual,
                           FramePool* pool, uint64_t* saturated);

/// When m->header.value_encoding() is 16-bit: replaces m->values by its
/// float32 widening (num_values × 4 bytes, from `pool`), clears the
/// encoding and sets m->first_non_finite (the values scanned as they were
/// widened). Call after ValidateFrames (the frame's size is trusted). A
/// float32 message is left as it is.
void WidenValues(Message* m, FramePool* pool);

/// The values of a received message `m` as float32 into `dst`
/// (header.num_values() floats): widened straight from a 16-bit frame,
/// copied from a float32 one. One pass over the values, instead of
/// WidenValues and a copy. Call after ValidateFrames (the frame's size is
/// trusted); `m` is not changed. Values are not scanned for non-finite ones.
void ReadValuesInto(const Message& m, float* dst);

/// Row i of `m`'s values (n rows of `dim`, n × dim ≤ header.num_values(),
/// any encoding) as float32 to out + pos[i] × dim, widening a 16-bit frame
/// as it goes. Consecutive positions are written with one call per run (a
/// single shard's keys are all one run). Same preconditions as ReadValuesInto.
void ScatterValueRows(const Message& m, const uint32_t* pos, size_t n, uint32_t dim, float* out);

}  // namespace tether
