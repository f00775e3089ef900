// Status and StatusOr: the error type of every Tether call that depends on
// input, peers, files or the CUDA runtime (house style: leveldb's Status).
//
// A Status is either OK or carries a code and a human-readable message that
// names the file:line, config field, flag or peer at fault. Value type, cheap
// to copy; not synchronised (each thread uses its own).
#pragma once

#include <optional>
#include <string>
#include <utility>

#include <glog/logging.h>

namespace tether {

class [[nodiscard]] Status {
 public:
  enum class Code {
    kOk = 0,
    kInvalidArgument,  // bad config, flag or data
    kNotFound,         // missing file or key
    kIOError,          // file system or network failure
    kDataLoss,         // corrupted or truncated data/message
    kDeadlineExceeded, // a blocking call ran past its timeout
    kFailedPrecondition,  // peers disagree (e.g. staleness mismatch)
    kUnavailable,      // a peer is gone or a device is missing
    kInternal,
    kResourceExhausted,  // a limit of memory or capacity (rows per shard)
  };

  Status() = default;
  static Status OK() { return Status(); }
  static Status InvalidArgument(std::string msg) { return Status(Code::kInvalidArgument, std::move(msg)); }
  static Status NotFound(std::string msg) { return Status(Code::kNotFound, std::move(msg)); }
  static Status IOError(std::string msg) { return Status(Code::kIOError, std::move(msg)); }
  static Status DataLoss(std::string msg) { return Status(Code::kDataLoss, std::move(msg)); }
  static Status DeadlineExceeded(std::string msg) { return Status(Code::kDeadlineExceeded, std::move(msg)); }
  static Status FailedPrecondition(std::string msg) { return Status(Code::kFailedPrecondition, std::move(msg)); }
  static Status Unavailable(std::string msg) { return Status(Code::kUnavailable, std::move(msg)); }
  static Status Internal(std::string msg) { return Status(Code::kInternal, std::move(msg)); }
  static Status ResourceExhausted(std::string msg) { return Status(Code::kResourceExhausted, std::move(msg)); }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  /// "OK" or "<CodeName>: <message>".
  std::string ToString() const;
  /// The same code with "<prefix>: " before the message (OK stays OK), to
  /// name the peer or the thread an error came from.
  Status WithPrefix(const std::string& prefix) const {
    return ok() ? Status() : Status(code_, prefix + ": " + message_);
  }

 private:
  Status(Code code, std::string msg) : code_(code), message_(std::move(msg)) {}
  Code code_ = Code::kOk;
  std::string message_;
};

/// Either a value of T or a non-OK Status.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(Status status) : status_(std::move(status)) {  // NOLINT: implicit by design
    CHECK(!status_.ok()) << "StatusOr constructed from OK status without a value";
  }
  StatusOr(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  T& value() & { CHECK(ok()) << status_.ToString(); return *value_; }
  const T& value() const& { CHECK(ok()) << status_.ToString(); return *value_; }
  T&& value() && { CHECK(ok()) << status_.ToString(); return std::move(*value_); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace tether

/// Returns early from the enclosing function when `expr` is not OK.
#define TETHER_RETURN_IF_ERROR(expr)          \
  do {                                        \
    ::tether::Status _tether_st = (expr);     \
    if (!_tether_st.ok()) return _tether_st;  \
  } while (0)

#define TETHER_CONCAT_INNER_(a, b) a##b
#define TETHER_CONCAT_(a, b) TETHER_CONCAT_INNER_(a, b)
/// `TETHER_ASSIGN_OR_RETURN(auto x, Foo());` assigns the value or returns the error.
#define TETHER_ASSIGN_OR_RETURN(lhs, expr)                              \
  auto TETHER_CONCAT_(_tether_sor_, __LINE__) = (expr);                 \
  if (!TETHER_CONCAT_(_tether_sor_, __LINE__).ok())                     \
    return TETHER_CONCAT_(_tether_sor_, __LINE__).status();             \
  lhs = std::move(TETHER_CONCAT_(_tether_sor_, __LINE__)).value()
