// A running shard's whole state as bytes: what a shard's primary sends a
// server process that joins the shard as its replica (tether-server
// --join_as_replica, server/replica_link.h "Joining"), taken between two of
// its log entries. ServerShard::SaveState fills the message
// (proto/shard_state.proto, each room its part) and one string of raw rows
// per table; ServerShard::RestoreState puts them back into a fresh copy.
//
// Layout (little-endian): the 8 bytes "TTHRSTAT"; u32 format version
// (kShardStateFormatVersion); u64 length, the ShardState's protobuf bytes;
// u32 number of tables; for each, u64 length and the table's rows as its
// room wrote them. Size: the tables' rows and optimizer state, plus the
// rooms' state (parked pulls, cached replies, key lists: bounded by their
// own limits). The primary builds it in memory (its own tables once more,
// in pieces: EncodeShardStatePieces) and the joiner holds it whole before
// restoring.
//
// Errors: DecodeShardState reads bytes from a peer and trusts none of them:
// another magic or format, a length past the bytes left, more tables than
// the bytes could hold, a ShardState that does not parse or names
// another shard, trailing bytes: DataLoss naming `peer` and the field.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "proto/shard_state.pb.h"

namespace tether {

/// The layout and the rooms' messages of this build; a primary and a
/// joiner of different formats refuse each other (REPLICA_HELLO.state_format).
inline constexpr uint32_t kShardStateFormatVersion = 1;

/// The bytes of `state` and each table's rows (table id order).
std::string EncodeShardState(const ShardState& state, const std::vector<std::string>& table_rows);

/// EncodeShardState's bytes in pieces, never joined: their concatenation
/// is EncodeShardState(state, table_rows). The table rows are moved in as
/// pieces of their own, so a large table's rows are not copied once more
/// (the primary builds the state on its loop: the copy costs time there).
std::vector<std::string> EncodeShardStatePieces(const ShardState& state, std::vector<std::string> table_rows);

/// Reads EncodeShardState's bytes of shard `shard`. Errors: see above;
/// the outputs are unspecified then.
Status DecodeShardState(std::string_view bytes, int shard, const std::string& peer, ShardState* state,
                        std::vector<std::string>* table_rows);

}  // namespace tether
