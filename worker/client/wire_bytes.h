// WireBytes: a worker's bytes on the wire per table and direction, counted
// where its frames are sent and where replies are received (before a 16-bit
// frame is widened): keys and values frames of PULL, PUSH and PUSH_DELTA
// (sent) and of PULL_REPLY and PUSH_REPLY (received). Beside each count,
// what its values would have taken in float32, so the compression ratio
// of an encoding is measured, not assumed; and the values of the replies
// that the shard saturated narrowing them (MessageHeader.values_saturated).
//
// Thread-compatible (the request channel's one thread).
#pragma once

#include <cstdint>
#include <vector>

#include "core/net/message.h"

namespace tether {

struct DirectionBytes {
  uint64_t messages = 0;
  uint64_t bytes = 0;             // keys + values frames as sent
  uint64_t value_bytes = 0;       // of `bytes`, the values frames
  uint64_t fp32_value_bytes = 0;  // the values frames' size in float32
  /// Bytes in float32 over bytes as sent (≥ 1; 1 with nothing sent).
  double ratio() const {
    return bytes == 0 ? 1.0 : static_cast<double>(bytes - value_bytes + fp32_value_bytes) / static_cast<double>(bytes);
  }
};

struct TableWireBytes {
  DirectionBytes sent;      // worker → shards
  DirectionBytes received;  // shards → worker
  // Values of the received replies the shards clamped to the 16-bit
  // encoding's largest finite value (FP16: beyond ±65504).
  uint64_t received_saturated = 0;
};

class WireBytes {
 public:
  /// Counts `m` (before it is sent) when it is a PULL, PUSH or PUSH_DELTA.
  void CountSent(const Message& m);
  /// Counts `m` (as received) when it is a PULL_REPLY or PUSH_REPLY, with
  /// the values its header says the shard saturated.
  void CountReceived(const Message& m);
  /// Indexed by table id; tables never seen are zeros (or absent past the end).
  const std::vector<TableWireBytes>& tables() const { return tables_; }
  /// Σ received_saturated over the tables.
  uint64_t received_saturated() const;

 private:
  void Count(const Message& m, bool sent);
  std::vector<TableWireBytes> tables_;
};

}  // namespace tether
