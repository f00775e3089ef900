// Size limits of Tether's wire messages and the protocol version: in core,
// not beside the transport (core/net/, which uses them), so that config
// validation (core/config/validate.cc, core/table_spec.cc) can check a model against
// them without pulling in ZeroMQ. Constants only; thread-safe.
#pragma once

#include <cstdint>

namespace tether {

/// Largest values or keys frame a single message may carry (bytes): far
/// below ZeroMQ's and the kernel's 2 GB int limits; the Protobuf header is
/// never near it (kMaxHeaderBytes). Row pulls and pushes above it are split
/// by the client; a dense slice or a single row above it is refused at
/// set-up (CheckMessageSizes in core/config.h).
inline constexpr uint64_t kMaxFrameBytes = 1ull << 30;

/// The wire protocol's version, carried by HELLO and its reply: a worker
/// and a server of different versions refuse to pair, naming both. Bump it
/// whenever a message's meaning changes. 1: up to 0.1.0 (model fingerprint
/// strings); 2: table specs, job identity and shard index at HELLO; 3:
/// shard 0 answers CLOCK (CLOCK_REPLY), checkpoints and resume; 4: each
/// message type's fields in its own body (MessageHeader.body), the header
/// keeps what every message needs; 5: MODEL_CUT (the best epoch's model,
/// kept on the shards); 6: values frames of pulls and pushes may be 16-bit
/// (MessageHeader.value_encoding, TableSpec.pull_wire and push_wire); 7:
/// CLOCK carries the worker's rows trained (ClockBody.samples) and parks a
/// worker at a round (ClockBody.parked).
/// MessageHeader.protocol_version keeps its
/// field number in every version, so a peer of any version is refused at
/// HELLO naming both.
inline constexpr uint32_t kProtocolVersion = 7;

/// Largest frame a listening socket takes from a peer (bytes): its
/// ZMQ_MAXMSGSIZE, less kListenerFrameSlackBytes for ZMTP and CURVE framing.
/// ZeroMQ applies it to every frame of every connection, before a CURVE
/// handshake completes too, so a peer that has not authenticated (or has
/// not said HELLO) can make a process buffer at most this much per
/// connection. A message whose frames are larger travels in chunks of this
/// size, which the receiving side joins only for admitted peers
/// (core/net/inbox.h); a HELLO must fit unchunked.
inline constexpr uint64_t kListenerFrameBytes = 16u << 10;
inline constexpr uint64_t kListenerFrameSlackBytes = 256;

/// Largest header frame accepted (bytes). A real header is under 1 KB (HELLO
/// with its model fingerprint a few KB); anything larger is refused before
/// Protobuf parses it, far below Protobuf's 64 MB and 2 GB limits.
inline constexpr uint64_t kMaxHeaderBytes = 1ull << 20;

}  // namespace tether
