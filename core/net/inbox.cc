#include "core/net/inbox.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/finite_scan.h"
#include "core/net/chunk_wire.h"
#include "core/peer_limits.h"
#include "core/wire_codec.h"
#include "core/wire_limits.h"

namespace tether {
namespace {

std::string PeerName(const std::string& identity) {
  return "peer " + std::to_string(identity.size()) + "-byte identity";
}

}  // namespace

void Inbox::Forget(const std::string& identity) {
  admitted_.erase(identity);
  partial_.erase(identity);
}

uint64_t Inbox::partial_bytes() const {
  uint64_t n = 0;
  for (const auto& [id, p] : partial_) n += p.refused ? 0 : p.total();
  return n;
}

Status Inbox::NotAdmitted(const MessageHeader& header, const std::string& identity) {
  return Status::DataLoss("message " + (header.has_type() ? TypeName(header.type()) + " " : std::string()) + "from " +
                          PeerName(identity) + " has frames above the " + std::to_string(kListenerFrameBytes) +
                          " bytes a server takes from a peer whose HELLO it has not accepted (a worker that was "
                          "removed, or never said HELLO)");
}

Status Inbox::CheckBeforeHello(const std::vector<zmq::message_t>& frames, Message* m, std::string* identity) {
  if (frames.size() < 2) return Status::OK();  // DecodeMessage names what is missing
  bool large = false;
  for (size_t i = 1; i < frames.size(); ++i) large = large || frames[i].size() > kListenerFrameBytes;
  if (!large) return Status::OK();  // most messages: no identity looked up
  const std::string id = frames[0].to_string();
  if (admitted_.count(id) > 0) return Status::OK();
  // Answered when the header is small enough to read, as for a chunked
  // message: the sender learns why.
  *identity = id;
  m->header.Clear();
  if (frames[1].size() > kListenerFrameBytes || !m->header.ParseFromArray(frames[1].data(), static_cast<int>(frames[1].size())))
    m->header.Clear();
  m->keys.rebuild(size_t{0});
  m->values.rebuild(size_t{0});
  CountPeerDrop(listener_, "not_admitted");
  return NotAdmitted(m->header, id);
}

Status Inbox::Recv(zmq::socket_t& socket, Message* m, std::string* identity) {
  std::vector<zmq::message_t> frames;
  m->first_non_finite = Message::kNotScanned;
  m->received_values_bytes = 0;
  m->value_pieces.clear();
  while (true) {
    try {
      if (!ReadFrames(socket, &frames)) return Status::Unavailable("no message ready");
    } catch (const zmq::error_t& e) {
      return Status::IOError(std::string("receive: ") + e.what());
    }
    // The last frame came off the wire (a ROUTER makes the identity frame
    // itself), so it carries the connection's properties.
    const char* user_id = zmq_msg_gets(frames.back().handle(), "User-Id");
    peer_key_ = user_id != nullptr ? user_id : "";
    uint32_t h = 0;
    uint64_t k = 0, v = 0;
    if (frames.size() != 3 || ParseChunkTag(frames[1].data(), frames[1].size(), &h, &k, &v) == ChunkKind::kNone) {
      TETHER_RETURN_IF_ERROR(CheckBeforeHello(frames, m, identity));
      return DecodeMessage(&frames, m, identity);
    }
    bool complete = false;
    Status st = TakeChunk(&frames, m, identity, &complete);
    if (!st.ok() || complete) return st;
  }
}

void Inbox::Fill(Partial* p, const char* data, size_t n) {
  while (n > 0) {
    uint64_t at = p->filled, take = 0;
    if (at < p->header_bytes) {
      take = std::min<uint64_t>(n, p->header_bytes - at);
      p->header.append(data, take);
    } else if ((at -= p->header_bytes) < p->keys_bytes) {
      take = std::min<uint64_t>(n, p->keys_bytes - at);
      if (!p->refused) std::memcpy(static_cast<char*>(p->keys.data()) + at, data, take);
    } else {
      at -= p->keys_bytes;
      take = std::min<uint64_t>(n, p->values_bytes - at);
      if (!p->refused) {
        if (!p->header_read) StartValues(p);
        if (p->half != FP32) {
          WidenPiece(p, data, take);
        } else {
          if (p->keep_pieces) JoinPieces(p);
          std::memcpy(static_cast<char*>(p->values.data()) + at, data, take);
          ScanValues(p, at + take);
        }
      }
    }
    p->filled += take;
    data += take;
    n -= take;
  }
}

void Inbox::StartValues(Partial* p) {
  p->header_read = true;
  MessageHeader h;
  const bool parsed = h.ParseFromString(p->header);
  const WireEncoding e = parsed ? h.value_encoding() : FP32;
  // Only a PUSH may carry 16-bit values, and only one whose sizes agree is
  // widened here; any other is joined as it came, for ValidateFrames to
  // name what is wrong.
  if (parsed && h.type() == PUSH && IsHalfWire(e) && p->values_bytes % sizeof(uint16_t) == 0 &&
      h.num_values() == p->values_bytes / sizeof(uint16_t)) {
    p->half = e;
    p->wide.rebuild(h.num_values() * sizeof(float));
    return;
  }
  // 16-bit values not widened here are widened and scanned by the server.
  p->scan = parsed && !IsHalfWire(e);
  if (parsed && h.type() == PUSH && e == FP32 && h.value_dim() > 0) {
    p->keep_pieces = true;  // the values frame is made only if a payload is cut otherwise
    p->row_bytes = uint64_t{h.value_dim()} * sizeof(float);
    return;
  }
  p->values.rebuild(p->values_bytes);
}

bool Inbox::TakePiece(Partial* p, zmq::message_t* payload) {
  const uint64_t values_from = uint64_t{p->header_bytes} + p->keys_bytes;
  if (p->refused || p->filled < values_from || payload->size() == 0) return false;
  if (!p->header_read) StartValues(p);
  if (!p->keep_pieces) return false;
  const uint64_t at = p->filled - values_from, n = payload->size();
  // Only whole rows, and no more pieces than half-frame ones (the last may
  // be shorter): a peer's stream of tiny chunks cannot make the shard hold
  // a message descriptor per few bytes.
  if (at % p->row_bytes != 0 || n % p->row_bytes != 0 || (n < kShardFrameBytes / 2 && at + n < p->values_bytes)) {
    JoinPieces(p);
    return false;
  }
  // ZeroMQ keeps a small payload (under its 8 KiB read batch) inside its
  // read buffer, at any address: such a piece is copied (a message's last,
  // short chunk).
  if (reinterpret_cast<uintptr_t>(payload->data()) % alignof(float) != 0) *payload = zmq::message_t(payload->data(), n);
  if (p->bad == ~uint64_t{0}) {
    const uint64_t count = n / sizeof(float);
    const uint64_t i = FirstNonFinite(static_cast<const float*>(payload->data()), count);
    if (i < count) p->bad = at / sizeof(float) + i;
  }
  p->scanned = (at + n) / sizeof(float);
  p->pieces.push_back(std::move(*payload));
  p->filled += n;
  return true;
}

void Inbox::JoinPieces(Partial* p) {
  p->keep_pieces = false;
  p->values.rebuild(p->values_bytes);
  char* out = static_cast<char*>(p->values.data());
  for (const zmq::message_t& piece : p->pieces) {
    std::memcpy(out, piece.data(), piece.size());
    out += piece.size();
  }
  p->pieces.clear();
}

void Inbox::WidenPiece(Partial* p, const char* data, uint64_t n) {
  float* out = static_cast<float*>(p->wide.data());
  const auto widen = [p, out](const void* src, uint64_t count) {
    const uint64_t first = DecodeValuesScan(src, count, p->half, out + p->decoded);
    if (first < count && p->bad == ~uint64_t{0}) p->bad = p->decoded + first;
    p->decoded += count;
  };
  if (p->has_odd && n > 0) {  // the value the last piece began
    const unsigned char two[2] = {p->odd, static_cast<unsigned char>(data[0])};
    widen(two, 1);
    p->has_odd = false;
    ++data;
    --n;
  }
  if (n >= sizeof(uint16_t)) widen(data, n / sizeof(uint16_t));
  if (n % sizeof(uint16_t) != 0) {
    p->has_odd = true;
    p->odd = static_cast<unsigned char>(data[n - 1]);
  }
}

void Inbox::ScanValues(Partial* p, uint64_t filled_values_bytes) {
  const uint64_t whole = filled_values_bytes / sizeof(float);
  if (!p->scan || p->bad != ~uint64_t{0} || whole <= p->scanned) return;
  const float* v = static_cast<const float*>(p->values.data());
  const uint64_t i = FirstNonFinite(v + p->scanned, whole - p->scanned);
  if (i < whole - p->scanned) p->bad = p->scanned + i;
  p->scanned = whole;
}

Status Inbox::StartMessage(const std::string& identity, const zmq::message_t& tag) {
  uint32_t h = 0;
  uint64_t k = 0, v = 0;
  ParseChunkTag(tag.data(), tag.size(), &h, &k, &v);
  if (partial_.erase(identity) > 0) CountPeerDrop(listener_, "interrupted_message");
  const bool admitted = admitted_.count(identity) > 0;
  // Before HELLO the header must come whole in the lead chunk, and nothing
  // else is kept: the rest of the stream is only counted as it comes.
  if (h > kMaxHeaderBytes || k > kMaxFrameBytes || v > kMaxFrameBytes || (!admitted && h > kListenerFrameBytes)) {
    CountPeerDrop(listener_, admitted ? "frame_bytes" : "not_admitted");
    return Status::DataLoss("message from " + PeerName(identity) + " announces a header of " + std::to_string(h) +
                            " bytes and frames of " + std::to_string(k) + " and " + std::to_string(v) +
                            " bytes: above the limits (" + std::to_string(kMaxHeaderBytes) + ", " +
                            std::to_string(kMaxFrameBytes) + (admitted ? "" : "; before HELLO a header of at most " +
                                                                                 std::to_string(kListenerFrameBytes)) +
                            ")");
  }
  Partial& p = partial_[identity];
  p.header_bytes = h;
  p.keys_bytes = k;
  p.values_bytes = v;
  p.refused = !admitted;
  p.header.reserve(h);
  if (admitted) {
    p.keys.rebuild(k);
  }
  return Status::OK();
}

void Inbox::FinishValues(Partial* whole, Message* m) {
  if (whole->half != FP32) {
    m->values = std::move(whole->wide);
    m->header.clear_value_encoding();
    m->first_non_finite = whole->bad != ~uint64_t{0} ? whole->bad : whole->decoded;
    m->received_values_bytes = whole->values_bytes;
    return;
  }
  if (whole->keep_pieces) {
    m->value_pieces = std::move(whole->pieces);
    m->values.rebuild(size_t{0});
  } else {
    m->values = std::move(whole->values);
  }
  if (whole->scan && whole->values_bytes % sizeof(float) == 0 && !IsHalfWire(m->header.value_encoding()))
    m->first_non_finite = whole->bad != ~uint64_t{0} ? whole->bad : whole->values_bytes / sizeof(float);
}

Status Inbox::TakeChunk(std::vector<zmq::message_t>* frames, Message* m, std::string* identity, bool* complete) {
  *identity = (*frames)[0].to_string();
  const zmq::message_t& tag = (*frames)[1];
  const zmq::message_t& payload = (*frames)[2];
  uint32_t h = 0;
  uint64_t k = 0, v = 0;
  const ChunkKind kind = ParseChunkTag(tag.data(), tag.size(), &h, &k, &v);
  m->header.Clear();
  m->keys.rebuild(size_t{0});
  m->values.rebuild(size_t{0});
  m->value_pieces.clear();
  if (kind == ChunkKind::kLead) TETHER_RETURN_IF_ERROR(StartMessage(*identity, tag));
  auto it = partial_.find(*identity);
  if (it == partial_.end()) {
    CountPeerDrop(listener_, "stray_chunk");  // the rest of a message refused or dropped before
    return Status::OK();
  }
  Partial& p = it->second;
  if (payload.size() > p.total() - p.filled) {
    partial_.erase(it);
    CountPeerDrop(listener_, "frame_bytes");
    return Status::DataLoss("message from " + PeerName(*identity) + ": its chunks carry more bytes than announced");
  }
  if (!TakePiece(&p, &(*frames)[2])) Fill(&p, static_cast<const char*>(payload.data()), payload.size());
  const bool done = p.filled == p.total();
  if (p.refused) {
    // Answered at once, from the lead chunk (a sender's header always fits
    // in it), and nothing is kept: the message's other chunks arrive as
    // strays, and a peer that opens connections, starts a message on each
    // and leaves leaves no bytes behind.
    if (p.filled < p.header_bytes || !m->header.ParseFromString(p.header)) m->header.Clear();
    partial_.erase(it);
    *complete = true;
    CountPeerDrop(listener_, "not_admitted");
    return NotAdmitted(m->header, *identity);
  }
  if (!done) return Status::OK();
  *complete = true;
  Partial whole = std::move(p);
  partial_.erase(it);
  if (!m->header.ParseFromString(whole.header)) {
    m->header.Clear();
    return Status::DataLoss("message from " + PeerName(*identity) + ": header does not parse (" +
                            std::to_string(whole.header.size()) + " bytes)");
  }
  m->keys = std::move(whole.keys);
  FinishValues(&whole, m);
  return ValidateFrames(*m, m->header.has_sender_rank() ? "worker " + std::to_string(m->header.sender_rank())
                                                        : PeerName(*identity));
}

}  // namespace tether
