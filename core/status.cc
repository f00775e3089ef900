#include "core/status.h"

namespace tether {

std::string Status::ToString() const {
  const char* name = "OK";
  switch (code_) {
    case Code::kOk: return "OK";
    case Code::kInvalidArgument: name = "InvalidArgument"; break;
    case Code::kNotFound: name = "NotFound"; break;
    case Code::kIOError: name = "IOError"; break;
    case Code::kDataLoss: name = "DataLoss"; break;
    case Code::kDeadlineExceeded: name = "DeadlineExceeded"; break;
    case Code::kFailedPrecondition: name = "FailedPrecondition"; break;
    case Code::kUnavailable: name = "Unavailable"; break;
    case Code::kInternal: name = "Internal"; break;
    case Code::kResourceExhausted: name = "ResourceExhausted"; break;
  }
  return std::string(name) + ": " + message_;
}

}  // namespace tether
