#include "launch/port_file.h"

#include <sys/stat.h>

#include <cctype>
#include <cerrno>
#include <utility>

#include "core/regular_file.h"
#include "launch/process_table.h"

namespace tether {
namespace {

// The largest port file read: it holds one endpoint ("tcp://HOST:PORT").
constexpr uint64_t kPortFileMaxBytes = 4096;

}  // namespace

StatusOr<std::optional<std::string>> ReadPortFile(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return std::optional<std::string>();
    return Status::IOError(ErrnoText(path));
  }
  // Never blocks (a FIFO is refused, not waited on) and never reads more
  // than an endpoint can be.
  StatusOr<std::string> read = ReadRegularFile(path, kPortFileMaxBytes, "port file");
  if (!read.ok()) return Status::IOError(read.status().message());
  std::string text = std::move(*read);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  const size_t colon = text.rfind(':');
  const bool tcp_ok = text.rfind("tcp://", 0) == 0 && colon != std::string::npos && colon + 1 < text.size() &&
                      text.find_first_not_of("0123456789", colon + 1) == std::string::npos &&
                      text.substr(colon + 1) != "0";
  const bool ipc_ok = text.rfind("ipc://", 0) == 0 && text.size() > 6;
  if (!tcp_ok && !ipc_ok)
    return Status::DataLoss(path + ": expected a bound endpoint tcp://HOST:PORT or ipc://PATH, got '" + text + "'");
  return std::optional<std::string>(text);
}

}  // namespace tether
