// The chunk framing of messages sent to a server shard whose frames exceed
// kShardFrameBytes (core/wire_limits.h), and of a shard's large float32
// PULL_REPLY to a worker (protocol version 9: each chunk after the
// worker's identity frame on the shard's ROUTER socket; joined by
// core/net/reply_joiner.h). A Tether message is then the byte
// stream header | keys | values, cut into ZeroMQ messages of two frames
// each, [tag][payload ≤ kShardFrameBytes; ≤ kReplyChunkBytes from a shard]:
//   lead  tag: "TQCL", u32 header bytes, u64 keys bytes, u64 values bytes
//              (little-endian; 24 bytes); its payload starts the stream
//   more  tag: "TQCC" (4 bytes); its payload continues it
// The stream ends when the three sizes are filled. A plain message has
// three frames (header, keys, values) and never starts with a tag.
// A sender cuts the header, the keys and the values into chunks of their
// own (no payload spans two of them), and float32 rows into chunks of
// whole rows where a row fits in one (ValuesChunkBytes): a receiver can
// then keep each values payload as it came, rows intact, instead of
// copying it into a joined frame (core/net/inbox.h). A receiver must not
// rely on either: it joins any cut of the stream.
// Constants and pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

namespace tether {

inline constexpr size_t kChunkTagBytes = 4;
inline constexpr size_t kChunkLeadTagBytes = 24;
inline constexpr char kChunkLeadMagic[] = "TQCL";
inline constexpr char kChunkContinueTag[] = "TQCC";

/// The lead tag for a stream of these sizes.
inline std::string ChunkLeadTag(uint32_t header_bytes, uint64_t keys_bytes, uint64_t values_bytes) {
  std::string t(kChunkLeadTagBytes, '\0');
  std::memcpy(&t[0], kChunkLeadMagic, 4);
  for (int i = 0; i < 4; ++i) t[4 + i] = static_cast<char>((header_bytes >> (8 * i)) & 0xff);
  for (int i = 0; i < 8; ++i) t[8 + i] = static_cast<char>((keys_bytes >> (8 * i)) & 0xff);
  for (int i = 0; i < 8; ++i) t[16 + i] = static_cast<char>((values_bytes >> (8 * i)) & 0xff);
  return t;
}

/// The most values bytes a sender puts in one chunk: the whole rows of
/// `row_bytes` that fit in `frame_bytes`, or `frame_bytes` when `row_bytes`
/// is 0 (no rows: dense values, 16-bit values) or larger than a frame.
inline uint64_t ValuesChunkBytes(uint64_t row_bytes, uint64_t frame_bytes) {
  if (row_bytes == 0 || row_bytes > frame_bytes) return frame_bytes;
  return frame_bytes / row_bytes * row_bytes;
}

enum class ChunkKind { kNone, kLead, kMore };

/// What the first frame of a two-frame message is; for kLead the sizes.
inline ChunkKind ParseChunkTag(const void* data, size_t size, uint32_t* header_bytes, uint64_t* keys_bytes,
                               uint64_t* values_bytes) {
  const auto* b = static_cast<const unsigned char*>(data);
  if (size == kChunkTagBytes && std::memcmp(b, kChunkContinueTag, 4) == 0) return ChunkKind::kMore;
  if (size != kChunkLeadTagBytes || std::memcmp(b, kChunkLeadMagic, 4) != 0) return ChunkKind::kNone;
  *header_bytes = 0;
  *keys_bytes = 0;
  *values_bytes = 0;
  for (int i = 0; i < 4; ++i) *header_bytes |= static_cast<uint32_t>(b[4 + i]) << (8 * i);
  for (int i = 0; i < 8; ++i) *keys_bytes |= static_cast<uint64_t>(b[8 + i]) << (8 * i);
  for (int i = 0; i < 8; ++i) *values_bytes |= static_cast<uint64_t>(b[16 + i]) << (8 * i);
  return ChunkKind::kLead;
}

}  // namespace tether
