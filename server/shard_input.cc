#include "server/shard_input.h"

#include <cstring>
#include <vector>

#include "core/wire_limits.h"

namespace tether {
namespace {

constexpr uint8_t kVersion = 1;
// The longest identity a ROUTER socket gives a peer (ZeroMQ: 255 bytes).
constexpr uint32_t kMaxIdentityBytes = 255;

template <typename T>
void Put(std::string* out, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out->append(b, sizeof(T));
}

void PutBytes(std::string* out, const void* data, size_t n) { out->append(static_cast<const char*>(data), n); }

// Reads the fields in order; each read checks the bytes left.
class Reader {
 public:
  Reader(std::string_view bytes, const std::string& peer) : rest_(bytes), peer_(peer) {}

  template <typename T>
  Status Get(const char* field, T* v) {
    if (rest_.size() < sizeof(T)) return Short(field, sizeof(T));
    std::memcpy(v, rest_.data(), sizeof(T));
    rest_.remove_prefix(sizeof(T));
    return Status::OK();
  }
  // A length, then that many bytes (at most `limit`).
  template <typename Len>
  Status GetBytes(const char* field, uint64_t limit, std::string_view* out) {
    Len n = 0;
    TETHER_RETURN_IF_ERROR(Get(field, &n));
    if (n > limit)
      return Status::DataLoss("shard input from " + peer_ + ": " + field + " of " + std::to_string(n) +
                              " bytes is over the limit of " + std::to_string(limit));
    if (rest_.size() < n) return Short(field, n);
    *out = rest_.substr(0, n);
    rest_.remove_prefix(n);
    return Status::OK();
  }
  size_t left() const { return rest_.size(); }

 private:
  Status Short(const char* field, uint64_t want) const {
    return Status::DataLoss("shard input from " + peer_ + ": " + field + " needs " + std::to_string(want) +
                            " bytes, " + std::to_string(rest_.size()) + " left (truncated)");
  }
  std::string_view rest_;
  const std::string& peer_;
};

zmq::message_t Frame(std::string_view bytes) { return zmq::message_t(bytes.data(), bytes.size()); }

}  // namespace

std::string EncodeShardInput(const std::string& identity, const Message& m) {
  const std::string header = m.header.SerializeAsString();
  std::string out;
  out.reserve(1 + 4 + identity.size() + 4 + header.size() + 8 + m.keys.size() + 8 + m.values_size());
  Put<uint8_t>(&out, kVersion);
  Put<uint32_t>(&out, static_cast<uint32_t>(identity.size()));
  out += identity;
  Put<uint32_t>(&out, static_cast<uint32_t>(header.size()));
  out += header;
  Put<uint64_t>(&out, m.keys.size());
  PutBytes(&out, m.keys.data(), m.keys.size());
  Put<uint64_t>(&out, m.values_size());
  PutBytes(&out, m.values.data(), m.values.size());
  for (const zmq::message_t& piece : m.value_pieces) PutBytes(&out, piece.data(), piece.size());
  return out;
}

Status DecodeShardInput(std::string_view bytes, const std::string& peer, ShardInput* input) {
  Reader r(bytes, peer);
  uint8_t version = 0;
  TETHER_RETURN_IF_ERROR(r.Get("version", &version));
  if (version != kVersion)
    return Status::DataLoss("shard input from " + peer + ": version " + std::to_string(version) + ", this build reads " +
                            std::to_string(kVersion));
  std::string_view identity, header, keys, values;
  TETHER_RETURN_IF_ERROR(r.GetBytes<uint32_t>("identity", kMaxIdentityBytes, &identity));
  TETHER_RETURN_IF_ERROR(r.GetBytes<uint32_t>("header", kMaxHeaderBytes, &header));
  TETHER_RETURN_IF_ERROR(r.GetBytes<uint64_t>("keys", kMaxFrameBytes, &keys));
  TETHER_RETURN_IF_ERROR(r.GetBytes<uint64_t>("values", kMaxFrameBytes, &values));
  if (r.left() != 0)
    return Status::DataLoss("shard input from " + peer + ": " + std::to_string(r.left()) +
                            " bytes after the values frame");
  input->identity.assign(identity);
  std::vector<zmq::message_t> frames;
  frames.push_back(Frame(header));
  frames.push_back(Frame(keys));
  frames.push_back(Frame(values));
  input->message = Message();
  Status st = DecodeMessage(&frames, &input->message, nullptr);
  if (!st.ok()) return Status::DataLoss("shard input from " + peer + ": " + st.message());
  return Status::OK();
}

}  // namespace tether
