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
/// worker at a round (ClockBody.parked); 8: chunks to a server shard of up
/// to kShardFrameBytes (were kListenerFrameBytes); 9: a shard's float32
/// PULL_REPLY larger than kShardFrameBytes comes to the worker in chunks
/// (core/net/reply_joiner.h).
/// MessageHeader.protocol_version keeps its
/// field number in every version, so a peer of any version is refused at
/// HELLO naming both.
inline constexpr uint32_t kProtocolVersion = 9;

/// Largest frame a listening socket takes from a peer by default (bytes):
/// its ZMQ_MAXMSGSIZE, less kListenerFrameSlackBytes for ZMTP and CURVE
/// framing; the rendezvous store's (core/net/rendezvous.h). ZeroMQ applies
/// it to every frame of every connection, before a CURVE handshake
/// completes too. It is also the largest frame a server shard reads from a
/// peer whose HELLO it has not accepted (core/net/inbox.h): a HELLO must fit
/// in frames of this size.
inline constexpr uint64_t kListenerFrameBytes = 16u << 10;
/// Largest frame a server shard's socket takes from a peer (bytes), less
/// kListenerFrameSlackBytes: a message whose frames are larger travels to a
/// shard in chunks of this size, which the shard joins only for admitted
/// peers (core/net/chunk_wire.h, core/net/inbox.h). ZeroMQ allocates a frame
/// when its size arrives, so this is what a peer that has not said HELLO
/// can make a shard allocate per connection at once (and kShardQueueBytes
/// while the shard is busy elsewhere). 256 KiB:
/// a 16 MiB push moves in 64 frames, where 16 KiB frames took 1,024 and
/// 2.2–2.7× the time on loopback (docs/PERFORMANCE.md).
inline constexpr uint64_t kShardFrameBytes = 256u << 10;
/// Largest chunk of a shard's chunked PULL_REPLY (bytes; a worker's socket
/// takes frames up to kMaxFrameBytes, so this is the sender's choice): the
/// first chunk is written before anything is sent, and each chunk is a
/// ZeroMQ message the worker wakes for.
inline constexpr uint64_t kReplyChunkBytes = 1u << 20;
/// Most bytes of frames a server shard's socket queues per connection
/// before it stops reading that connection (TCP then holds the sender
/// back; nothing is dropped): a peer that has not said HELLO cannot make a
/// busy shard hold more for it.
inline constexpr uint64_t kShardQueueBytes = 16u << 20;
/// The ZMQ_RCVHWM of a shard's socket (frames per connection) for
/// cluster.recv_hwm = `recv_hwm`: at most kShardQueueBytes of
/// kShardFrameBytes frames (64), fewer when recv_hwm says so; recv_hwm ≤ 0
/// (ZeroMQ's "no limit") gets the bound too.
inline constexpr int ShardQueueFrames(int recv_hwm) {
  constexpr int kMost = static_cast<int>(kShardQueueBytes / kShardFrameBytes);
  return recv_hwm > 0 && recv_hwm < kMost ? recv_hwm : kMost;
}
inline constexpr uint64_t kListenerFrameSlackBytes = 256;

/// Largest header frame accepted (bytes). A real header is under 1 KB (HELLO
/// with its model fingerprint a few KB); anything larger is refused before
/// Protobuf parses it, far below Protobuf's 64 MB and 2 GB limits.
inline constexpr uint64_t kMaxHeaderBytes = 1ull << 20;

}  // namespace tether
