// ReplyJoiner: the receiving side of a worker's DEALER socket to one server
// shard. A shard sends a large float32 PULL_REPLY in chunks (protocol
// version 9; core/net/chunk_wire.h framing, SendMessageInChunks in
// core/net/message.h), writing each chunk's rows just before it is queued,
// so that its copy of the next chunk overlaps the transfer of the last. The
// joiner copies each chunk's payload into the reply's frames as the chunk
// arrives, so that the join overlaps the transfer too, and hands on a
// Message equal to the one the shard would have sent whole. Plain
// messages ([header][keys][values]) are decoded as RecvMessage decodes
// them.
//
// Bounds: one reply in progress (a shard sends its chunks one after the
// other, never interleaved with another message); a lead chunk announcing
// a header above kMaxHeaderBytes or keys or values above `max_frame_bytes`
// is refused before anything is allocated, and so is a stream whose chunks
// carry more than announced. Every malformed stream is DataLoss naming the
// server; the chunks after a refused lead are dropped quietly up to the
// next lead, and a stream cut short (the shard's send failed part way) is
// dropped, with a DataLoss, when the next lead arrives.
//
// Values frames of joined replies come from `pool` (frames reused from one
// pull to the next, no page faults per reply) when one is given. With a
// `place` function, a float32 PULL_REPLY's values go where it says (the
// pull's destination in the caller's buffer): each chunk is copied there
// as it arrives and freed, so the worker's one copy of the values overlaps
// the transfer, and no reply-sized buffer is allocated or joined.
//
// Thread-safety: one thread (the socket's). Ownership: holds the partial
// reply's bytes; `pool` must outlive the joiner.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <zmq.hpp>

#include "core/net/frame_pool.h"
#include "core/net/message.h"
#include "core/status.h"
#include "core/wire_limits.h"

namespace tether {

class ReplyJoiner {
 public:
  /// `server` names the shard in errors ("server tcp://10.0.0.1:5000");
  /// `max_frame_bytes`: the largest keys or values frame taken (the
  /// socket's own limit for a plain message, kMaxFrameBytes by default).
  /// Where a chunked float32 PULL_REPLY's values go: given its header (its
  /// num_values already checked against the `bytes` announced, 4 bytes
  /// each), the address of `bytes` writable bytes, or null to have them
  /// joined into a frame as any other reply's. Called once per such reply,
  /// when its header is whole and before any value is written; the memory
  /// must stay valid until the reply is complete or the joiner is Reset.
  /// A reply placed so reaches Recv's caller with empty `values` and
  /// Message::placed_values_bytes set; a stream cut short leaves the
  /// destination partly written.
  using Placer = std::function<char*(const MessageHeader& header, uint64_t bytes)>;

  explicit ReplyJoiner(std::string server, uint64_t max_frame_bytes = kMaxFrameBytes, FramePool* pool = nullptr,
                       Placer place = nullptr)
      : server_(std::move(server)), max_frame_bytes_(max_frame_bytes), pool_(pool), place_(std::move(place)) {}

  /// Receives the next complete message without blocking (call when a poll
  /// says readable; call again until Unavailable). Chunks that do not yet
  /// complete a reply are taken and kept. Errors: Unavailable (nothing
  /// complete is queued); DataLoss for a malformed message (as
  /// DecodeMessage) or chunk stream (above), naming the server; IOError
  /// from ZeroMQ.
  Status Recv(zmq::socket_t& socket, Message* m);

  /// Drops the reply in progress (the socket was moved to another
  /// endpoint: the rest of the stream will not come).
  void Reset();
  /// Whether a reply is in progress, and its bytes so far.
  bool partial() const { return active_; }
  uint64_t partial_bytes() const { return active_ ? filled_ : 0; }
  /// Bytes of chunk payloads taken (all streams, kept or dropped).
  uint64_t chunk_bytes() const { return chunk_bytes_; }

  /// Takes one multipart message already read off the socket: the pure
  /// step behind Recv (tests feed it frames). Sets *complete when `m`
  /// holds a finished message; errors as Recv's.
  Status Take(std::vector<zmq::message_t>* frames, Message* m, bool* complete);

 private:
  Status TakeFrames(std::vector<zmq::message_t>* frames, Message* m, bool* complete);
  // A lead chunk: a stream in progress is cut (cut_), the sizes checked.
  Status StartReply(const zmq::message_t& tag);
  // Copies `n` payload bytes into the header, keys or values.
  void Fill(const char* data, uint64_t n);
  // The header is whole and the first values byte comes: joined into
  // values_, or written where place_ says (a float32 PULL_REPLY).
  void StartValues();
  Status Finish(Message* m);
  uint64_t total() const { return header_bytes_ + keys_bytes_ + values_bytes_; }

  std::string server_;
  uint64_t max_frame_bytes_;
  FramePool* pool_;
  Placer place_;
  bool active_ = false;
  bool values_started_ = false;
  char* placed_ = nullptr;  // where the values go (place_), values_ unused; null: joined into values_
  bool skipping_ = false;  // a refused stream's chunks are dropped up to the next lead
  uint32_t header_bytes_ = 0;
  uint64_t keys_bytes_ = 0, values_bytes_ = 0;
  uint64_t filled_ = 0;
  std::string header_;
  zmq::message_t keys_, values_;
  uint64_t chunk_bytes_ = 0;
  Status cut_;  // a stream cut short, reported by the next Take or Recv
};

}  // namespace tether
