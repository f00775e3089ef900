#include "core/net/message.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "core/net/chunk_wire.h"
#include "core/wire_codec.h"

#include <google/protobuf/unknown_field_set.h>

namespace tether {
namespace {

// A signal handled on this thread (SIGTERM, SIGINT: the stop request)
// interrupts a ZeroMQ send or receive with EINTR before it moved its frame
// (libzmq looks at its command pipe first): the call is repeated, and the
// caller's wait loop looks at the stop request the signal made. An EINTR
// taken for an error once ended a worker's stop wait and lost its stop
// checkpoint.
template <typename Call>
auto Uninterrupted(Call&& call) -> decltype(call()) {
  while (true) {
    try {
      return call();
    } catch (const zmq::error_t& e) {
      if (e.num() != EINTR) throw;
    }
  }
}

// The frames of one chunked message, shared by its chunks' zero-copy ZeroMQ
// messages until the last of them has left.
struct ChunkedBody {
  std::string header;
  zmq::message_t keys, values;
};

void ReleaseBody(void*, void* hint) { delete static_cast<std::shared_ptr<ChunkedBody>*>(hint); }

// A DEALER talks to a listening socket; the one that takes messages this
// large is a server shard's, whose frames are at most kShardFrameBytes;
// inproc:// has no such limit (no wire, no decoder).
bool NeedsChunks(zmq::socket_t& socket, size_t header_bytes, const Message& m) {
  if (header_bytes <= kShardFrameBytes && m.keys.size() <= kShardFrameBytes && m.values.size() <= kShardFrameBytes)
    return false;
  try {
    return socket.get(zmq::sockopt::type) == ZMQ_DEALER &&
           socket.get(zmq::sockopt::last_endpoint).rfind("inproc://", 0) != 0;
  } catch (const zmq::error_t&) {
    return true;
  }
}

// Header, keys and values as one byte stream in chunk messages ([tag]
// [payload ≤ kShardFrameBytes]); the lead tag gives the three sizes
// (core/net/chunk_wire.h). No chunk spans two of the frames, so every
// payload is sent from its frame's own bytes. `write` (may be empty) writes
// the values up to the end of each values chunk before that chunk is sent.
// On a ROUTER (`identity` non-null) each chunk follows the peer's identity.
Status SendChunked(zmq::socket_t& socket, Message* m, std::string* header_bytes, const std::string* identity,
                   const std::string& peer, const std::function<void(size_t)>& write,
                   size_t chunk_bytes = kShardFrameBytes) {
  auto body = std::make_shared<ChunkedBody>();
  body->header = std::move(*header_bytes);
  body->keys = std::move(m->keys);
  body->values = std::move(m->values);
  const std::string lead = ChunkLeadTag(body->header.size(), body->keys.size(), body->values.size());
  // float32 rows in chunks of whole rows: the shard keeps them as they came.
  const bool rows = m->header.value_encoding() == FP32 && m->header.value_dim() > 0;
  const uint64_t values_chunk =
      ValuesChunkBytes(rows ? uint64_t{m->header.value_dim()} * sizeof(float) : 0, chunk_bytes);
  struct Chunk {
    const char* data;
    size_t size;
    size_t values_end;  // for a values chunk, its end within the values; else 0
  };
  std::vector<Chunk> chunks;
  const char* values = static_cast<const char*>(body->values.data());
  for (const auto& [data, size] : {std::pair<const char*, size_t>{body->header.data(), body->header.size()},
                                   {static_cast<const char*>(body->keys.data()), body->keys.size()},
                                   {values, body->values.size()}})
    for (size_t off = 0, step = data == values ? values_chunk : chunk_bytes; off < size; off += step) {
      const size_t n = std::min<size_t>(step, size - off);
      chunks.push_back(Chunk{data + off, n, data == values ? off + n : 0});
    }
  try {
    for (size_t i = 0; i < chunks.size(); ++i) {
      if (write && chunks[i].values_end > 0) write(chunks[i].values_end);
      zmq::message_t tag(i == 0 ? lead.data() : kChunkContinueTag, i == 0 ? lead.size() : kChunkTagBytes);
      zmq::message_t payload(const_cast<char*>(chunks[i].data), chunks[i].size, &ReleaseBody,
                             new std::shared_ptr<ChunkedBody>(body));
      if (identity != nullptr &&
          !Uninterrupted([&] { return socket.send(zmq::buffer(*identity), zmq::send_flags::sndmore); }))
        return Status::Unavailable("send to " + peer + " timed out (queue full)");
      if (!Uninterrupted([&] { return socket.send(tag, zmq::send_flags::sndmore); }) ||
          !Uninterrupted([&] { return socket.send(payload, zmq::send_flags::none); }))
        return Status::Unavailable("send to " + peer + " timed out (queue full)");
    }
  } catch (const zmq::error_t& e) {
    if (e.num() == EHOSTUNREACH) return Status::Unavailable("peer " + peer + " is gone (EHOSTUNREACH)");
    return Status::IOError("send to " + peer + ": " + e.what());
  }
  return Status::OK();
}

// m's header serialized into *header_bytes, and its frames checked
// against the frame limit (a message no peer would take is not sent).
Status SerializeForSend(const Message& m, const std::string& peer, std::string* header_bytes) {
  if (!m.header.SerializeToString(header_bytes)) return Status::Internal("cannot serialize header for " + peer);
  if (m.values.size() > kMaxFrameBytes || m.keys.size() > kMaxFrameBytes)
    return Status::InvalidArgument("message " + TypeName(m.header.type()) + " to " + peer + " for table " +
                                   std::to_string(m.header.table_id()) + " is " +
                                   std::to_string(m.values.size() + m.keys.size()) + " bytes, above the " +
                                   std::to_string(kMaxFrameBytes) + "-byte frame limit; use more server shards");
  return Status::OK();
}

// Sends m's frames (plain or in chunks), with `write` called as
// Message::write_values says.
Status SendFrames(zmq::socket_t& socket, Message* m, const std::string* identity, const std::string& peer,
                  const std::function<void(size_t)>& write, bool router_chunks = false) {
  std::string header_bytes;
  TETHER_RETURN_IF_ERROR(SerializeForSend(*m, peer, &header_bytes));
  if (identity == nullptr && NeedsChunks(socket, header_bytes.size(), *m))
    return SendChunked(socket, m, &header_bytes, nullptr, peer, write);
  if (router_chunks && m->keys.size() + m->values.size() > kReplyChunkBytes)
    return SendChunked(socket, m, &header_bytes, identity, peer, write, kReplyChunkBytes);
  if (write) write(m->values.size());
  try {
    // Blocking sends: a full queue makes the sender wait (bounded by the
    // socket's ZMQ_SNDTIMEO) instead of dropping the update.
    // Frame by frame: an interrupted frame is sent again, the ones before
    // it are queued already.
    if (identity != nullptr) {
      if (!Uninterrupted([&] { return socket.send(zmq::buffer(*identity), zmq::send_flags::sndmore); }))
        return Status::Unavailable("send to " + peer + " timed out (queue full)");
    }
    if (!Uninterrupted([&] { return socket.send(zmq::buffer(header_bytes), zmq::send_flags::sndmore); }) ||
        !Uninterrupted([&] { return socket.send(m->keys, zmq::send_flags::sndmore); }) ||
        !Uninterrupted([&] { return socket.send(m->values, zmq::send_flags::none); }))
      return Status::Unavailable("send to " + peer + " timed out (queue full)");
  } catch (const zmq::error_t& e) {
    if (e.num() == EHOSTUNREACH) return Status::Unavailable("peer " + peer + " is gone (EHOSTUNREACH)");
    return Status::IOError("send to " + peer + ": " + e.what());
  }
  return Status::OK();
}

}  // namespace

const uint64_t* Message::KeyData(std::vector<uint64_t>* scratch) const {
  const void* p = keys.data();
  if (reinterpret_cast<uintptr_t>(p) % alignof(uint64_t) == 0) return static_cast<const uint64_t*>(p);
  scratch->resize(keys.size() / sizeof(uint64_t));
  std::memcpy(scratch->data(), p, scratch->size() * sizeof(uint64_t));
  return scratch->data();
}

bool ReadFrames(zmq::socket_t& socket, std::vector<zmq::message_t>* frames) {
  frames->clear();
  while (true) {
    zmq::message_t f;
    bool got = false;
    while (true) {
      try {
        got = socket.recv(f, zmq::recv_flags::dontwait).has_value();
        break;
      } catch (const zmq::error_t& e) {
        if (e.num() != EINTR) throw;
      }
    }
    if (!got) return !frames->empty();
    const bool more = f.more();
    frames->push_back(std::move(f));
    if (!more) return true;
    if (frames->size() > 8) {
      zmq::message_t rest;
      while (socket.recv(rest, zmq::recv_flags::dontwait) && rest.more()) {
      }
      return true;
    }
  }
}

uint64_t Message::values_size() const {
  uint64_t n = values.size() + placed_values_bytes;
  for (const zmq::message_t& piece : value_pieces) n += piece.size();
  return n;
}

const float* Message::ValueData(std::vector<float>* scratch) const {
  if (!value_pieces.empty()) {
    scratch->resize(values_size() / sizeof(float));
    char* out = reinterpret_cast<char*>(scratch->data());
    for (const zmq::message_t& piece : value_pieces) {
      std::memcpy(out, piece.data(), piece.size());
      out += piece.size();
    }
    return scratch->data();
  }
  const void* p = values.data();
  if (reinterpret_cast<uintptr_t>(p) % alignof(float) == 0) return static_cast<const float*>(p);
  scratch->resize(values.size() / sizeof(float));
  std::memcpy(scratch->data(), p, scratch->size() * sizeof(float));
  return scratch->data();
}

std::string TypeName(MessageType type) {
  return MessageType_IsValid(type) ? MessageType_Name(type) : "type#" + std::to_string(type);
}

void SetErrorText(const MessageHeader& request, const std::string& error, MessageHeader* reply) {
  reply->mutable_error_reply()->set_error(error);
  if (request.has_protocol_version() && request.protocol_version() < kProtocolVersion)
    reply->GetReflection()->MutableUnknownFields(reply)->AddLengthDelimited(kLegacyErrorField, error);
}

std::string ErrorText(const MessageHeader& h) {
  if (h.has_error_reply()) return h.error_reply().error();
  const google::protobuf::UnknownFieldSet& unknown = h.GetReflection()->GetUnknownFields(h);
  for (int i = 0; i < unknown.field_count(); ++i) {
    const google::protobuf::UnknownField& f = unknown.field(i);
    if (f.number() == kLegacyErrorField && f.type() == google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED)
      return f.length_delimited();
  }
  return "";
}

Status ValidateFrames(const Message& m, const std::string& peer) {
  const MessageHeader& h = m.header;
  if (!MessageType_IsValid(h.type()) || h.type() == MSG_UNKNOWN)
    return Status::DataLoss("message from " + peer + ": unknown message type " + std::to_string(h.type()));
  // Compared by division: num_keys × 8 could wrap around to the frame size.
  // A request naming a cached key list (MessageHeader.key_list) may leave
  // its keys out: num_keys is then the list's count.
  const bool keys_omitted = m.keys.size() == 0 && h.key_list() != 0 && (h.type() == PULL || h.type() == PUSH);
  if (!keys_omitted &&
      (m.keys.size() % sizeof(uint64_t) != 0 || m.keys.size() / sizeof(uint64_t) != h.num_keys()))
    return Status::DataLoss("message " + TypeName(h.type()) + " from " + peer + ": keys frame has " +
                            std::to_string(m.keys.size()) + " bytes but the header says " +
                            std::to_string(h.num_keys()) + " keys");
  const WireEncoding enc = h.value_encoding();
  if (enc != FP32 && h.type() != PULL_REPLY && h.type() != PUSH && h.type() != PUSH_REPLY)
    return Status::DataLoss("message " + TypeName(h.type()) + " from " + peer + ": value_encoding " +
                            WireEncodingName(enc) + " on a message that carries float32 values only");
  const size_t width = WireBytesPerValue(enc);
  const uint64_t values_bytes = m.values_size();
  if (values_bytes % width != 0 || values_bytes / width != h.num_values())
    return Status::DataLoss("message " + TypeName(h.type()) + " from " + peer + ": values frame has " +
                            std::to_string(values_bytes) + " bytes but the header says " +
                            std::to_string(h.num_values()) + " " + (enc == FP32 ? "floats" : WireEncodingName(enc)) +
                            " values");
  return Status::OK();
}

bool ProbeRouterPeer(zmq::socket_t& socket, const std::string& identity, const MessageHeader& probe) {
  const std::string header = probe.SerializeAsString();
  try {
    if (!socket.send(zmq::buffer(identity), zmq::send_flags::sndmore | zmq::send_flags::dontwait)) return true;
    (void)socket.send(zmq::buffer(header), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
    (void)socket.send(zmq::const_buffer(nullptr, 0), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
    (void)socket.send(zmq::const_buffer(nullptr, 0), zmq::send_flags::dontwait);
    return true;
  } catch (const zmq::error_t& e) {
    return e.num() != EHOSTUNREACH;
  }
}

Status SendMessageNoWait(zmq::socket_t& socket, Message* m, const std::string& identity, const std::string& peer) {
  if (m->write_values) {
    m->write_values(m->values.size());
    m->write_values = nullptr;
  }
  std::string header_bytes;
  TETHER_RETURN_IF_ERROR(SerializeForSend(*m, peer, &header_bytes));
  try {
    // The first frame decides: once it is queued, the rest of the message is.
    if (!Uninterrupted([&] { return socket.send(zmq::buffer(identity), zmq::send_flags::sndmore | zmq::send_flags::dontwait); }))
      return Status::Unavailable("send to " + peer + ": its queue is full (it stopped reading)");
    (void)Uninterrupted([&] { return socket.send(zmq::buffer(header_bytes), zmq::send_flags::sndmore); });
    (void)Uninterrupted([&] { return socket.send(m->keys, zmq::send_flags::sndmore); });
    (void)Uninterrupted([&] { return socket.send(m->values, zmq::send_flags::none); });
  } catch (const zmq::error_t& e) {
    if (e.num() == EHOSTUNREACH) return Status::Unavailable("peer " + peer + " is gone (EHOSTUNREACH)");
    return Status::IOError("send to " + peer + ": " + e.what());
  }
  return Status::OK();
}

Status SendMessage(zmq::socket_t& socket, Message* m, const std::string* identity,
                   const std::string& peer) {
  // Every byte of the values is written before this returns, sent or not:
  // a copy of the message kept for a resend shares its frame.
  const size_t values_bytes = m->values.size();
  const std::function<void(size_t)> write = std::move(m->write_values);
  m->write_values = nullptr;
  const Status st = SendFrames(socket, m, identity, peer, write);
  if (write) write(values_bytes);
  return st;
}

Status SendMessageInChunks(zmq::socket_t& socket, Message* m, const std::string& identity, const std::string& peer) {
  const size_t values_bytes = m->values.size();
  const std::function<void(size_t)> write = std::move(m->write_values);
  m->write_values = nullptr;
  const Status st = SendFrames(socket, m, &identity, peer, write, /*router_chunks=*/true);
  if (write) write(values_bytes);
  return st;
}

Status RecvMessage(zmq::socket_t& socket, Message* m, std::string* identity) {
  std::vector<zmq::message_t> frames;
  try {
    while (true) {
      zmq::message_t f;
      if (!Uninterrupted([&] { return socket.recv(f, zmq::recv_flags::dontwait); })) {
        if (frames.empty()) return Status::Unavailable("no message ready");
        return Status::DataLoss("truncated multipart message");
      }
      bool more = f.more();
      frames.push_back(std::move(f));
      if (!more) break;
      if (frames.size() > 8) {
        // Drain the rest so the next receive starts on a message boundary.
        zmq::message_t rest;
        while (Uninterrupted([&] { return socket.recv(rest, zmq::recv_flags::dontwait); }) && rest.more()) {}
        break;
      }
    }
  } catch (const zmq::error_t& e) {
    return Status::IOError(std::string("receive: ") + e.what());
  }
  return DecodeMessage(&frames, m, identity);
}

Status DecodeMessage(std::vector<zmq::message_t>* frames, Message* m, std::string* identity) {
  // Nothing of an earlier message may survive into this one (a reply to a
  // bad message must not carry a good one's request id).
  m->header.Clear();
  m->keys.rebuild(size_t{0});
  m->values.rebuild(size_t{0});
  m->value_pieces.clear();
  m->placed_values_bytes = 0;
  size_t first = 0;
  std::string peer = "server";
  if (identity != nullptr) {
    identity->clear();
    if (frames->empty()) return Status::DataLoss("empty message");
    *identity = (*frames)[0].to_string();
    first = 1;
    peer = "peer " + std::to_string(identity->size()) + "-byte identity";
  }
  if (frames->size() - first != 3)
    return Status::DataLoss("message from " + peer + " has " + std::to_string(frames->size() - first) +
                            " frames, expected 3 (header, keys, values)");
  const zmq::message_t& hf = (*frames)[first];
  if (hf.size() > kMaxHeaderBytes)
    return Status::DataLoss("message from " + peer + ": header frame has " + std::to_string(hf.size()) +
                            " bytes, above the " + std::to_string(kMaxHeaderBytes) + "-byte header limit");
  if (!m->header.ParseFromArray(hf.data(), static_cast<int>(hf.size()))) {
    m->header.Clear();
    return Status::DataLoss("message from " + peer + ": header does not parse (" +
                            std::to_string(hf.size()) + " bytes)");
  }
  m->keys = std::move((*frames)[first + 1]);
  m->values = std::move((*frames)[first + 2]);
  return ValidateFrames(*m, m->header.has_sender_rank() ? "worker " + std::to_string(m->header.sender_rank()) : peer);
}

}  // namespace tether
