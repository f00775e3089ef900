// Tether wire messages: a Protobuf MessageHeader followed by two raw frames,
// keys (uint64 little-endian) and values (float32), always present (possibly
// empty) so that the frame count itself is checked.
//
//   DEALER side:            [header][keys][values]
//   ROUTER side (received): [peer identity][header][keys][values]
//
// A Message owns its frames (zmq::message_t); moving is cheap, copying is
// disabled. Not synchronised: one thread per Message.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <zmq.hpp>

#include "core/wire_limits.h"
#include "core/status.h"
#include "proto/wire.pb.h"

namespace tether {

struct Message {
  MessageHeader header;
  zmq::message_t keys;    // header.num_keys() × 8 bytes
  zmq::message_t values;  // header.num_values() × 4 bytes (× 2 when 16-bit, header.value_encoding)
  /// Set by the inbox for a message it joined from chunks, and by
  /// WidenValues (core/net/value_frames.h) for 16-bit values it widened:
  /// the index of the first non-finite value of `values` read as float32
  /// (the value count when none), scanned as each piece arrived or as the
  /// values were widened (core/finite_scan.h); kNotScanned otherwise.
  /// Meaningful only for float32 values.
  static constexpr uint64_t kNotScanned = ~uint64_t{0};
  uint64_t first_non_finite = kNotScanned;
  /// Set by the inbox for a 16-bit PUSH it widened as it joined it: the
  /// bytes of the values frame as they came (half of values.size()); 0
  /// when values holds what came.
  uint64_t received_values_bytes = 0;
  /// Set by a sender that writes `values` while it is sent (a worker's
  /// large 16-bit push, encoded chunk by chunk so that encoding the next
  /// chunk overlaps sending the last): called with a byte count `end`, it
  /// has written values bytes [0, end) when it returns (it may write more;
  /// a smaller `end` than before writes nothing). SendMessage calls it
  /// before it sends each piece of the values, and with values.size()
  /// before it returns, sent or not; it is empty for a message whose
  /// values are written. The function's owner keeps the frame alive until
  /// it has written every byte.
  std::function<void(size_t end)> write_values;
  /// Set by the inbox for a float32 PUSH of row values it did not join:
  /// the values frame as it came, in pieces, in order, each a whole number
  /// of rows (header.value_dim floats) at a 4-byte-aligned address; `values`
  /// is then empty. The push's step reads the rows from the pieces where a
  /// joined frame would cost a copy of every byte (RowPieces); every other
  /// reader gets them joined (ValueData). Empty otherwise.
  std::vector<zmq::message_t> value_pieces;
  /// Set by a worker's ReplyJoiner (core/net/reply_joiner.h) for a chunked
  /// float32 PULL_REPLY whose values it wrote straight into the pull's
  /// destination: their bytes (`values` is then empty, and only the
  /// pull's handler, which knows the destination, reads them). 0 otherwise.
  uint64_t placed_values_bytes = 0;

  /// The values' bytes: values.size(), the pieces' sum, or the bytes placed.
  uint64_t values_size() const;

  /// Keys as uint64; copies into `scratch` only when the frame is unaligned
  /// (ZeroMQ stores frames under 34 bytes inline).
  const uint64_t* KeyData(std::vector<uint64_t>* scratch) const;
  /// Values as float; same alignment rule as KeyData. Values in pieces
  /// are joined into `scratch` (a copy of every byte).
  const float* ValueData(std::vector<float>* scratch) const;
};

/// Checks the header against the frame sizes: keys frame = num_keys × 8
/// (or empty for a PULL/PUSH naming a cached key list, MessageHeader.key_list),
/// values frame = num_values × 4 (× 2 for a 16-bit value_encoding, which
/// only PULL_REPLY, PUSH and PUSH_REPLY may carry), known message type. `peer` names the sender
/// in the error. Errors: DataLoss.
Status ValidateFrames(const Message& m, const std::string& peer);

/// Sends `m` (frames are moved out; `m` is empty after). When `identity` is
/// non-null the message is routed to that peer (ROUTER sockets). Errors:
/// Unavailable (peer gone / would block past the socket's send timeout),
/// IOError (other ZeroMQ errors), both naming `peer`.
Status SendMessage(zmq::socket_t& socket, Message* m, const std::string* identity,
                   const std::string& peer);

/// Reads one multipart message off `socket` without waiting into *frames
/// (cleared first): false when none is queued. A message of more than 8
/// frames is cut there and the rest drained, so the next read starts on a
/// message boundary (no Tether message has more than 4). EINTR is retried;
/// any other ZeroMQ error is thrown (zmq::error_t). Thread-safety: the
/// socket's thread only.
bool ReadFrames(zmq::socket_t& socket, std::vector<zmq::message_t>* frames);

/// SendMessage to the peer `identity` of a ROUTER socket, a message whose
/// keys and values together exceed kReplyChunkBytes as chunks of at most
/// kReplyChunkBytes (core/net/chunk_wire.h), each chunk after the identity
/// frame; a smaller one as SendMessage sends it. Only for a peer that joins
/// chunked replies (a worker of protocol version 9 or later,
/// core/net/reply_joiner.h). Message::write_values is called before each
/// values chunk is queued, so that writing the next chunk overlaps ZeroMQ's
/// I/O thread sending the last, and with values.size() before this
/// returns, sent or not. The chunks go one after the other from this call:
/// nothing else is sent to the peer in between. Errors as SendMessage's; a
/// failure after the first chunk leaves the peer a truncated stream, which
/// it drops at the next lead.
Status SendMessageInChunks(zmq::socket_t& socket, Message* m, const std::string& identity, const std::string& peer);

/// SendMessage to the peer `identity` of a ROUTER socket (ZMQ_ROUTER_MANDATORY
/// set) without waiting: a peer whose queue is full (it stopped reading)
/// gets nothing and the call returns Unavailable "queue full" at once, so
/// that one stalled peer cannot stop the sender's loop. Errors as
/// SendMessage's.
Status SendMessageNoWait(zmq::socket_t& socket, Message* m, const std::string& identity, const std::string& peer);

/// Whether the ROUTER `socket` (ZMQ_ROUTER_MANDATORY set) still has a
/// connection for `identity`: sends it `probe` (a header the peer drops,
/// e.g. HEARTBEAT) with empty frames, without blocking. False only when the
/// send fails with EHOSTUNREACH (the peer's connection is gone); a full
/// queue (EAGAIN) means the connection is there. Never throws.
bool ProbeRouterPeer(zmq::socket_t& socket, const std::string& identity, const MessageHeader& probe);

/// Receives one message without blocking (call after a poll says readable).
/// For ROUTER sockets pass `identity` to receive the peer identity frame.
/// Errors: DataLoss for a malformed message (wrong frame count, header that
/// does not parse, sizes that disagree), naming the peer; all frames of the
/// bad message are consumed so the socket stays usable.
Status RecvMessage(zmq::socket_t& socket, Message* m, std::string* identity);

/// Decodes one received multipart message from its frames: a pure function
/// of the bytes (RecvMessage is a socket read followed by this; the fuzz
/// target tests/fuzz/message_fuzz.cc calls it directly). With `identity`
/// non-null the first frame is the ROUTER peer identity. Takes the frames'
/// contents (they are moved into `m`). On error `m->header` holds the header
/// only if it parsed (so a reply can echo its request id), else it is empty.
/// Errors: DataLoss for a wrong frame count, a header over kMaxHeaderBytes or
/// that does not parse, or frame sizes that disagree with the header
/// (ValidateFrames).
Status DecodeMessage(std::vector<zmq::message_t>* frames, Message* m, std::string* identity);

/// Short readable name for a message type ("PULL").
std::string TypeName(MessageType type);

/// The header field number protocol versions 1 to 3 carried an
/// ERROR_REPLY's text at (reserved since version 4).
inline constexpr int kLegacyErrorField = 9;

/// Makes `reply` carry `error` (ErrorReplyBody.error). When `request` came
/// from a peer of an older protocol version (a HELLO names its version),
/// the text is also written at kLegacyErrorField, where that peer reads it:
/// its refusal names both versions on its side too.
void SetErrorText(const MessageHeader& request, const std::string& error, MessageHeader* reply);

/// An ERROR_REPLY's text: its body's, or that of a server of protocol
/// version 3 or older (kLegacyErrorField: its refusal of this build's HELLO
/// names both versions).
std::string ErrorText(const MessageHeader& h);

}  // namespace tether
