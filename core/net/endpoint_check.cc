#include "core/net/endpoint_check.h"

#include <netdb.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <cctype>

namespace tether {
namespace {

Status Bad(const std::string& source, const std::string& endpoint, const std::string& why) {
  return Status::InvalidArgument(source + ": endpoint '" + endpoint + "': " + why);
}

bool AllDigits(const std::string& s) {
  if (s.empty() || s.size() > 5) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

Status CheckTcp(const std::string& endpoint, const std::string& source, EndpointUse use) {
  const std::string rest = endpoint.substr(6);
  const size_t colon = rest.rfind(':');
  if (colon == std::string::npos || colon == 0)
    return Bad(source, endpoint, "expected tcp://HOST:PORT (a host and a port), e.g. tcp://127.0.0.1:5550");
  std::string host = rest.substr(0, colon);
  const std::string port = rest.substr(colon + 1);
  if (!AllDigits(port) || std::stoi(port) > 65535 || (use == EndpointUse::kConnect && std::stoi(port) == 0))
    return Bad(source, endpoint,
               "port '" + port + "' is not a number in [" + (use == EndpointUse::kConnect ? "1" : "0") +
                   ", 65535]");
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (use == EndpointUse::kBind && (host == "*" || host == "0.0.0.0" || host == "::")) return Status::OK();
  // A bind may also name an interface ("tcp://eth0:5550"); ZeroMQ reports
  // one that is missing itself, so only connects are resolved here.
  if (use == EndpointUse::kBind) return Status::OK();
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (found != nullptr) freeaddrinfo(found);
  if (rc != 0)
    return Bad(source, endpoint,
               "host '" + host + "' does not resolve (" + gai_strerror(rc) +
                   "): check the name, or give the server's IP address");
  return Status::OK();
}

}  // namespace

Status CheckListenAcrossProcesses(const std::string& endpoint, const std::string& source) {
  if (endpoint.rfind("inproc://", 0) != 0) return Status::OK();
  return Bad(source, endpoint,
             "an inproc:// endpoint is reached only from inside this process, and a server's workers run in "
             "processes of their own: listen on tcp://HOST:PORT or ipc://PATH (a one-process job: tether-launch "
             "--transport=inproc)");
}

size_t MaxIpcPathBytes() { return sizeof(sockaddr_un{}.sun_path) - 1; }

Status CheckEndpoint(const std::string& endpoint, const std::string& source, EndpointUse use) {
  const size_t scheme_end = endpoint.find("://");
  if (scheme_end == std::string::npos)
    return Bad(source, endpoint,
               "no transport scheme: write tcp://" + endpoint + " (or ipc://PATH, inproc://NAME)");
  const std::string scheme = endpoint.substr(0, scheme_end);
  const std::string rest = endpoint.substr(scheme_end + 3);
  if (scheme == "tcp") return CheckTcp(endpoint, source, use);
  if (scheme == "ipc") {
    if (rest.empty()) return Bad(source, endpoint, "expected ipc://PATH");
    if (rest.size() > MaxIpcPathBytes())
      return Bad(source, endpoint,
                 "the socket path is " + std::to_string(rest.size()) + " bytes, over the " +
                     std::to_string(MaxIpcPathBytes()) +
                     " a Unix socket address holds: use a shorter directory (for tether-launch "
                     "--transport=ipc, set TMPDIR to a short one such as /tmp)");
    return Status::OK();
  }
  if (scheme == "inproc") {
    if (rest.empty()) return Bad(source, endpoint, "expected inproc://NAME");
    return Status::OK();
  }
  return Bad(source, endpoint, "unknown transport scheme '" + scheme + "' (tcp, ipc or inproc)");
}

}  // namespace tether
