// ShardInput: one message a shard took in, as bytes, so that another copy
// of the shard can take in the same. A shard is a deterministic state
// machine of the messages it handles, in the order it handles them (its
// tables, optimizer state, clocks, members and, on shard 0, the job
// coordinator): a copy fed the same inputs (ServerShard::Replay) holds the
// same state, bit for bit. These bytes are what a primary forwards down its
// chain (replication/replication_log.h: LogEntry.payload).
//
// Layout (little-endian): version byte 1; u32 identity length, identity
// (the worker's ROUTER identity: replies and key lists are per connection);
// u32 header length, the MessageHeader's protobuf bytes; u64 keys length,
// keys; u64 values length, values (16-bit values stay 16-bit: the copy
// widens them as the primary did). Size: the message's frames plus 21 bytes
// and the identity.
//
// Errors: DecodeShardInput reads bytes from a peer and trusts none of them:
// a wrong version, a length past the bytes left or past the wire limits
// (core/wire_limits.h), trailing bytes, or frames that disagree with their
// header (ValidateFrames) give DataLoss naming `peer` and the field.
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "core/net/message.h"
#include "core/status.h"

namespace tether {

struct ShardInput {
  std::string identity;  // the sender's connection, as the shard's socket named it
  Message message;       // header, keys and values as received
};

/// The bytes of `m` received from `identity` (m is left as it is).
std::string EncodeShardInput(const std::string& identity, const Message& m);

/// Reads EncodeShardInput's bytes into `*input`. Errors: DataLoss naming
/// `peer` (see above); `*input` is unspecified then.
Status DecodeShardInput(std::string_view bytes, const std::string& peer, ShardInput* input);

}  // namespace tether
