#include "server/shard_state.h"

#include <cstring>
#include <utility>

namespace tether {
namespace {

constexpr char kMagic[8] = {'T', 'T', 'H', 'R', 'S', 'T', 'A', 'T'};

template <typename T>
void Put(std::string* out, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out->append(b, sizeof(T));
}

// Reads the bytes little by little; every read is checked against what is left.
class Reader {
 public:
  Reader(std::string_view bytes, std::string what) : bytes_(bytes), what_(std::move(what)) {}
  template <typename T>
  Status Get(T* v, const char* field) {
    if (bytes_.size() - pos_ < sizeof(T)) return Short(field, sizeof(T));
    std::memcpy(v, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return Status::OK();
  }
  Status Take(uint64_t n, std::string_view* out, const char* field) {
    if (bytes_.size() - pos_ < n) return Short(field, n);
    *out = bytes_.substr(pos_, n);
    pos_ += n;
    return Status::OK();
  }
  size_t left() const { return bytes_.size() - pos_; }
  Status Short(const char* field, uint64_t n) const {
    return Status::DataLoss(what_ + ": " + field + " needs " + std::to_string(n) + " bytes at offset " +
                            std::to_string(pos_) + ", " + std::to_string(left()) + " left");
  }

 private:
  std::string_view bytes_;
  std::string what_;
  size_t pos_ = 0;
};

}  // namespace

std::string EncodeShardState(const ShardState& state, const std::vector<std::string>& table_rows) {
  const std::string message = state.SerializeAsString();
  size_t size = sizeof(kMagic) + 4 + 8 + message.size() + 4;
  for (const std::string& t : table_rows) size += 8 + t.size();
  std::string out;
  out.reserve(size);
  out.append(kMagic, sizeof(kMagic));
  Put<uint32_t>(&out, kShardStateFormatVersion);
  Put<uint64_t>(&out, message.size());
  out += message;
  Put<uint32_t>(&out, static_cast<uint32_t>(table_rows.size()));
  for (const std::string& t : table_rows) {
    Put<uint64_t>(&out, t.size());
    out += t;
  }
  return out;
}

std::vector<std::string> EncodeShardStatePieces(const ShardState& state, std::vector<std::string> table_rows) {
  std::vector<std::string> pieces(1);
  std::string* head = &pieces.back();
  const std::string message = state.SerializeAsString();
  head->reserve(sizeof(kMagic) + 4 + 8 + message.size() + 4 + 8);
  head->append(kMagic, sizeof(kMagic));
  Put<uint32_t>(head, kShardStateFormatVersion);
  Put<uint64_t>(head, message.size());
  *head += message;
  Put<uint32_t>(head, static_cast<uint32_t>(table_rows.size()));
  for (std::string& t : table_rows) {
    // Each table's length ends the piece before its rows.
    Put<uint64_t>(&pieces.back(), t.size());
    pieces.push_back(std::move(t));
    pieces.emplace_back();
  }
  if (pieces.back().empty()) pieces.pop_back();
  return pieces;
}

Status DecodeShardState(std::string_view bytes, int shard, const std::string& peer, ShardState* state,
                        std::vector<std::string>* table_rows) {
  const std::string what = "shard " + std::to_string(shard) + "'s state from " + peer;
  Reader r(bytes, what);
  std::string_view magic, message;
  TETHER_RETURN_IF_ERROR(r.Take(sizeof(kMagic), &magic, "the magic"));
  if (std::memcmp(magic.data(), kMagic, sizeof(kMagic)) != 0)
    return Status::DataLoss(what + ": does not start with the shard state magic");
  uint32_t format = 0, tables = 0;
  uint64_t length = 0;
  TETHER_RETURN_IF_ERROR(r.Get(&format, "the format version"));
  if (format != kShardStateFormatVersion)
    return Status::DataLoss(what + ": format version " + std::to_string(format) + ", this build reads " +
                            std::to_string(kShardStateFormatVersion));
  TETHER_RETURN_IF_ERROR(r.Get(&length, "the state's length"));
  TETHER_RETURN_IF_ERROR(r.Take(length, &message, "the state"));
  if (message.size() > INT32_MAX || !state->ParseFromArray(message.data(), static_cast<int>(message.size())))
    return Status::DataLoss(what + ": the ShardState message does not parse");
  if (state->shard() != shard)
    return Status::DataLoss(what + ": it is shard " + std::to_string(state->shard()) + "'s state");
  TETHER_RETURN_IF_ERROR(r.Get(&tables, "the number of tables"));
  if (tables > r.left() / 8)
    return Status::DataLoss(what + ": " + std::to_string(tables) + " tables in " + std::to_string(r.left()) +
                            " bytes");
  table_rows->clear();
  table_rows->reserve(tables);
  for (uint32_t t = 0; t < tables; ++t) {
    std::string_view rows;
    const std::string field = "table " + std::to_string(t) + "'s rows";
    TETHER_RETURN_IF_ERROR(r.Get(&length, field.c_str()));
    TETHER_RETURN_IF_ERROR(r.Take(length, &rows, field.c_str()));
    table_rows->emplace_back(rows);
  }
  if (r.left() != 0) return Status::DataLoss(what + ": " + std::to_string(r.left()) + " bytes past the last table");
  return Status::OK();
}

}  // namespace tether
