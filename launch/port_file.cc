#include "launch/port_file.h"

#include <sys/stat.h>

#include <cctype>
#include <cerrno>
#include <fstream>
#include <sstream>

#include "launch/process_table.h"

namespace tether {

StatusOr<std::optional<std::string>> ReadPortFile(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return std::optional<std::string>();
    return Status::IOError(ErrnoText(path));
  }
  std::ifstream in(path);
  if (!in) return Status::IOError(path + ": cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
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
