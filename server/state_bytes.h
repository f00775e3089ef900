// The large parts of a shard state (proto/shard_state.proto: a table's
// rows, index slots, backups, eviction metadata, sketch, key lists' row
// offsets, AVERAGE sums), written outside its protobuf message: arrays of
// trivially copyable values appended one after another in the host's byte
// order (a snapshot is a copy between processes of one build, never a file
// format). The message says how many values each part holds; the reader
// checks every count against the bytes left before it allocates anything.
//
// Errors: StateReader's reads give DataLoss naming where the bytes came
// from (its `where`, e.g. "shard state: kv.tables[1] (w)") and the part.
// Thread-safety: none (one owner).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/status.h"

namespace tether {

/// Appends n values of `p` to *out, raw.
template <typename T>
void AppendRaw(std::string* out, const T* p, uint64_t n) {
  static_assert(std::is_trivially_copyable_v<T>);
  if (n > 0) out->append(reinterpret_cast<const char*>(p), n * sizeof(T));
}

/// Reads AppendRaw's arrays from `bytes` (not owned: they outlive it).
class StateReader {
 public:
  StateReader(std::string_view bytes, std::string where) : bytes_(bytes), where_(std::move(where)) {}

  /// True when n values of T are left.
  template <typename T>
  bool Holds(uint64_t n) const {
    return n <= left() / sizeof(T);
  }
  /// Copies the next n values into out (room for n). Errors: DataLoss
  /// naming `part` when fewer are left (nothing read then).
  template <typename T>
  Status ReadInto(const char* part, uint64_t n, T* out) {
    static_assert(std::is_trivially_copyable_v<T>);
    if (!Holds<T>(n)) return Short(part, n, sizeof(T));
    if (n > 0) std::memcpy(out, bytes_.data() + pos_, n * sizeof(T));
    pos_ += n * sizeof(T);
    return Status::OK();
  }
  /// *out becomes the next n values (checked before it is resized).
  template <typename T, typename A>
  Status Read(const char* part, uint64_t n, std::vector<T, A>* out) {
    if (!Holds<T>(n)) return Short(part, n, sizeof(T));
    out->resize(n);
    return ReadInto(part, n, out->data());
  }
  uint64_t left() const { return bytes_.size() - pos_; }
  const std::string& where() const { return where_; }
  /// DataLoss "<where>: <what>".
  Status Error(const std::string& what) const { return Status::DataLoss(where_ + ": " + what); }
  /// Errors: DataLoss when bytes are left over (a count too low somewhere).
  Status Finish() const {
    if (left() == 0) return Status::OK();
    return Error(std::to_string(left()) + " byte(s) left over after its last part");
  }

 private:
  Status Short(const char* part, uint64_t n, size_t size) const {
    return Error(std::string(part) + ": " + std::to_string(n) + " value(s) of " + std::to_string(size) +
                 " bytes, but only " + std::to_string(left()) + " bytes are left");
  }

  std::string_view bytes_;
  uint64_t pos_ = 0;
  std::string where_;
};

}  // namespace tether
