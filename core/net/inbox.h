// Inbox: the receiving side of a server shard's ROUTER socket, in two
// stages.
//
// Stage one, every peer: ZeroMQ takes frames of at most kShardFrameBytes
// (ZMQ_MAXMSGSIZE, set by BindRouter; core/wire_limits.h) on every
// connection, before a CURVE handshake completes too, so a peer that has
// not authenticated or said HELLO makes the process buffer at most
// cluster.recv_hwm such frames per connection until they are read here.
// Its plain messages whose frames are at most kListenerFrameBytes (a HELLO)
// are delivered; a larger one is refused (below) and dropped once read.
// Stage two, admitted peers (Admit: the server accepted its HELLO): plain
// messages of any frame size up to kShardFrameBytes, and larger messages as
// chunks (core/net/chunk_wire.h), joined here, one message in progress per
// peer, frames up to kMaxFrameBytes.
// A chunked message from a peer that is not admitted (a removed worker, one
// that never said HELLO) is not joined: its header is read (it must fit in
// the lead chunk and in kListenerFrameBytes), the message is refused naming
// why, so that the sender gets an answer, and nothing of it is kept: its
// other chunks are dropped as they come (reason="stray_chunk"); each such
// message, and each refused plain one, counts in
// tether_peers_dropped_total{listener,reason="not_admitted"}
// (core/peer_limits.h).
//
// The values of a joined message are scanned for NaN and infinity piece by
// piece as they are copied in, while each piece is in cache
// (Message::first_non_finite), so the server's check makes no second pass.
// A float32 PUSH of rows is not joined while every values payload holds
// whole rows (MessageHeader.value_dim floats) at an aligned address, as a
// Tether sender cuts them (core/net/chunk_wire.h): the payloads are kept as
// they came (Message::value_pieces) and scanned in place, so that the
// shard's step reads the gradients where they landed and no byte of them is
// copied (a no-op push of 1,024 × 4,096 floats took 3.9–4.3 ms against
// 4.9 joined, docs/PERFORMANCE.md "Against ps-lite"). A payload cut otherwise, or shorter than half a
// frame before the last (so a message holds at most one piece per 128 KiB),
// joins the message from then on (the pieces so far copied in): any cut of
// the stream is taken.
// A joined PUSH of 16-bit values (MessageHeader.value_encoding) is widened
// to float32 piece by piece instead, scanned on the way, and delivered as a
// float32 message (value_encoding cleared; Message::received_values_bytes
// keeps the bytes that came): one pass, where joining and then widening
// (WidenValues, core/net/value_frames.h) took two.
//
// Thread-safety: one thread (the socket's). Ownership: holds the partial
// messages' bytes.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <zmq.hpp>

#include "core/net/message.h"
#include "core/status.h"

namespace tether {

class Inbox {
 public:
  /// `listener` names the socket in counters and messages ("server").
  explicit Inbox(std::string listener) : listener_(std::move(listener)) {}

  /// Receives the next complete message without blocking (call when a poll
  /// says readable; call again until Unavailable). Chunks that do not yet
  /// complete a message are taken and kept. Errors: Unavailable (nothing
  /// complete is queued); DataLoss for a malformed message or chunk (as
  /// DecodeMessage; a chunk stream longer than announced or sizes above the
  /// limits), and for a chunked message from a peer that is not admitted,
  /// naming the bound; `*identity` is set and `m->header` holds the header
  /// when it parsed, so that the caller can answer.
  Status Recv(zmq::socket_t& socket, Message* m, std::string* identity);

  /// The CURVE public key (Z85, 40 characters) of the connection the last
  /// message Recv returned came from, as the socket's ZAP handler admitted
  /// it (ZeroMQ's "User-Id" message property, core/net/zap_handler.h);
  /// empty without CURVE.
  const std::string& peer_key() const { return peer_key_; }

  /// The server accepted `identity`'s HELLO: its chunked messages are joined.
  void Admit(const std::string& identity) { admitted_.insert(identity); }
  /// `identity` left or was removed: its partial message is dropped and its
  /// chunked messages are refused again.
  void Forget(const std::string& identity);
  bool admitted(const std::string& identity) const { return admitted_.count(identity) > 0; }
  /// Every identity admitted (and not forgotten), in no particular order.
  const std::unordered_set<std::string>& admitted_identities() const { return admitted_; }
  /// Messages in progress, and the bytes they hold.
  size_t partial_messages() const { return partial_.size(); }
  uint64_t partial_bytes() const;

 private:
  struct Partial {
    uint32_t header_bytes = 0;
    uint64_t keys_bytes = 0, values_bytes = 0;
    uint64_t filled = 0;  // bytes of the stream taken so far
    std::string header;
    zmq::message_t keys, values;
    bool scan = true;        // the values are float32 (known once the header is whole)
    bool header_read = false;
    // A 16-bit PUSH is widened into `wide` as its values land (the widening
    // the server would make anyway, without joining the 16-bit bytes first):
    WireEncoding half = FP32;  // its encoding; FP32: values joined as they came
    zmq::message_t wide;
    uint64_t decoded = 0;        // values widened so far
    bool has_odd = false;        // a piece ended inside a value: its first byte
    unsigned char odd = 0;
    uint64_t scanned = 0;    // leading values floats found finite so far
    uint64_t bad = ~uint64_t{0};  // the first non-finite one, once found
    bool refused = false;  // not admitted: answered from the lead chunk, then dropped
    // A float32 PUSH of rows whose values payloads were all whole rows so
    // far: kept in `pieces` (values stays empty until JoinPieces).
    bool keep_pieces = false;
    uint64_t row_bytes = 0;
    std::vector<zmq::message_t> pieces;
    uint64_t total() const { return header_bytes + keys_bytes + values_bytes; }
  };

  // A plain message ([identity][header][keys][values]) from a peer not
  // admitted whose frames are above kListenerFrameBytes: refused as a
  // chunked one is (DataLoss, *identity and m->header set when readable).
  Status CheckBeforeHello(const std::vector<zmq::message_t>& frames, Message* m, std::string* identity);
  static Status NotAdmitted(const MessageHeader& header, const std::string& identity);
  // One chunk ([identity][tag][payload]); true in *complete when `m` holds
  // a finished message (or a refusal to report).
  Status TakeChunk(std::vector<zmq::message_t>* frames, Message* m, std::string* identity, bool* complete);
  Status StartMessage(const std::string& identity, const zmq::message_t& tag);
  // Appends `n` bytes of the stream to `p`; the values bytes are scanned
  // for non-finite floats as they land (Message::first_non_finite).
  static void Fill(Partial* p, const char* data, size_t n);
  // The first values byte came: the header is whole, so the values' buffer
  // is chosen (float32 joined as they come, or a 16-bit PUSH widened).
  static void StartValues(Partial* p);
  static void ScanValues(Partial* p, uint64_t filled_values_bytes);
  static void WidenPiece(Partial* p, const char* data, uint64_t n);
  // A payload that holds only values, kept as it came when `p` keeps
  // pieces and it is whole rows at an aligned address; false: to be copied
  // by Fill (the pieces so far joined first).
  static bool TakePiece(Partial* p, zmq::message_t* payload);
  // Stops keeping pieces: the values frame is made and the pieces copied in.
  static void JoinPieces(Partial* p);
  // `whole`'s values into `m` once every byte came.
  static void FinishValues(Partial* whole, Message* m);

  std::string listener_;
  std::string peer_key_;
  std::unordered_set<std::string> admitted_;
  std::unordered_map<std::string, Partial> partial_;
};

}  // namespace tether
