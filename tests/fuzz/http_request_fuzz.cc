// libFuzzer target for the /metrics endpoint (telemetry/metrics_endpoint.h):
// each input is what a client sends on one connection (then it closes its
// sending side). The endpoint must answer with a status line of its own
// (200 with the page, 404, 405, 431, or libmicrohttpd's 400, 413, 414), never
// 206 or a multipart body, never more than the page, or close; and it must
// not crash, leak a descriptor or hold the connection past its limits.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "telemetry/metrics_endpoint.h"

namespace {

const char kPage[] = "# HELP x X.\n# TYPE x gauge\nx 1\n";

tether::MetricsEndpoint* Endpoint() {
  static std::unique_ptr<tether::MetricsEndpoint> ep = [] {
    tether::EndpointLimits limits;
    limits.connection_lifetime_ms = 2000;
    auto started = tether::MetricsEndpoint::Start("127.0.0.1", 0, [] { return std::string(kPage); }, limits);
    if (!started.ok()) std::abort();
    return std::move(*started);
  }();
  return ep.get();
}

void Require(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const int port = Endpoint()->port();
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  Require(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
  size_t off = 0;
  while (off < size) {
    const ssize_t n = send(fd, data + off, size - off, MSG_NOSIGNAL);
    if (n <= 0) break;  // the endpoint closed early: fine
    off += static_cast<size_t>(n);
  }
  shutdown(fd, SHUT_WR);
  std::string answer;
  char buf[4096];
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 50) <= 0) continue;
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    answer.append(buf, static_cast<size_t>(n));
    Require(answer.size() < (64u << 10));  // the page is tiny; no answer is larger
  }
  close(fd);
  Require(std::chrono::steady_clock::now() < deadline);  // closed within its limits
  if (answer.empty()) return 0;
  Require(answer.rfind("HTTP/1.", 0) == 0);
  Require(answer.find(" 206 ") == std::string::npos && answer.find("multipart/") == std::string::npos);
  return 0;
}
