// The /metrics endpoint over real sockets, as a scraper and as hostile
// clients see it: the page and its content type; refusals before any body
// is read (a 3 GB POST costs no memory); header and head limits; connection
// caps per address; slow clients cut off, and never delaying a stop. Every
// wait polls with a bound.
#include "telemetry/metrics_endpoint.h"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "core/peer_limits.h"
#include "telemetry/prometheus.h"

namespace tether {
namespace {

using Clock = std::chrono::steady_clock;

int Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  return fd;
}

// Everything the server sends until it closes, or until `ms` pass.
std::string ReadUntilClose(int fd, int ms) {
  std::string out;
  const auto deadline = Clock::now() + std::chrono::milliseconds(ms);
  char buf[4096];
  while (Clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 20) <= 0) continue;
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

// Whether the server closed `fd` within `ms`.
bool ClosedWithin(int fd, int ms) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(ms);
  char buf[256];
  while (Clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 20) <= 0) continue;
    const ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN)) return true;
  }
  return false;
}

std::string Request(int port, const std::string& text, int ms = 5000) {
  const int fd = Connect(port);
  EXPECT_EQ(send(fd, text.data(), text.size(), MSG_NOSIGNAL), static_cast<ssize_t>(text.size()));
  std::string out = ReadUntilClose(fd, ms);
  close(fd);
  return out;
}

uint64_t Dropped(const std::string& reason) {
  for (const auto& [listener, r, n] : PeerDrops())
    if (listener == "metrics" && r == reason) return n;
  return 0;
}

uint64_t RssBytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  return 0;
}

const char kPage[] = "# HELP x X.\n# TYPE x gauge\nx 1\n";

TEST(MetricsEndpointTest, ServesThePageAndItsContentTypeAndNothingElse) {
  std::atomic<int> calls{0};
  auto ep = MetricsEndpoint::Start("127.0.0.1", 0, [&] {
    ++calls;
    return std::string(kPage);
  });
  ASSERT_TRUE(ep.ok()) << ep.status().ToString();
  const int port = (*ep)->port();
  ASSERT_GT(port, 0);
  EXPECT_EQ((*ep)->url(), "http://127.0.0.1:" + std::to_string(port) + "/metrics");
  for (int i = 0; i < 2; ++i) {
    // A Range header is ignored: the answer is the whole page, never 206.
    const std::string r =
        Request(port, "GET /metrics HTTP/1.1\r\nHost: x\r\nRange: bytes=0-3\r\nConnection: close\r\n\r\n");
    EXPECT_EQ(r.rfind("HTTP/1.1 200", 0), 0u) << r;
    EXPECT_NE(r.find("Content-Type: " + std::string(kPrometheusContentType)), std::string::npos) << r;
    EXPECT_NE(r.find(std::string("\r\n\r\n") + kPage), std::string::npos) << r;
    EXPECT_NE(r.find("# TYPE tether_peers_dropped_total counter"), std::string::npos) << r;
    EXPECT_NE(r.find("tether_peer_connections "), std::string::npos) << r;
  }
  EXPECT_EQ(calls.load(), 2);
  EXPECT_EQ((*ep)->scrapes(), 2u);
  const std::string head = Request(port, "HEAD /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(head.rfind("HTTP/1.1 200", 0), 0u) << head;
  EXPECT_EQ(head.find(kPage), std::string::npos) << head;
  for (const char* path : {"/", "/nope", "/metrics/x"}) {
    const std::string r = Request(port, std::string("GET ") + path + " HTTP/1.1\r\nHost: x\r\n\r\n");
    EXPECT_EQ(r.rfind("HTTP/1.1 404", 0), 0u) << path << ": " << r;
  }
}

TEST(MetricsEndpointTest, AHugePostIsRefusedBeforeItsBodyIsRead) {
  auto ep = MetricsEndpoint::Start("127.0.0.1", 0, [] { return std::string(kPage); });
  ASSERT_TRUE(ep.ok());
  const uint64_t before_drops = Dropped("method");
  const uint64_t rss_before = RssBytes();
  const int fd = Connect((*ep)->port());
  const std::string head = "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 3000000000\r\n\r\n";
  ASSERT_EQ(send(fd, head.data(), head.size(), MSG_NOSIGNAL), static_cast<ssize_t>(head.size()));
  // Push up to 256 MiB of body while the server answers and hangs up.
  const std::string chunk(1 << 20, 'x');
  uint64_t sent = 0;
  fcntl(fd, F_SETFL, O_NONBLOCK);
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (sent < (256u << 20) && Clock::now() < deadline) {
    const ssize_t n = send(fd, chunk.data(), chunk.size(), MSG_NOSIGNAL);
    if (n > 0) sent += static_cast<uint64_t>(n);
    if (n < 0 && errno != EAGAIN) break;  // the server closed the connection
    if (n < 0) {
      pollfd p{fd, POLLOUT, 0};
      if (poll(&p, 1, 200) == 0) break;  // nobody reads the body
    }
  }
  fcntl(fd, F_SETFL, 0);
  const std::string r = ReadUntilClose(fd, 5000);
  close(fd);
  EXPECT_EQ(r.rfind("HTTP/1.1 405", 0), 0u) << r.substr(0, 200);
  EXPECT_NE(r.find("Allow: GET, HEAD"), std::string::npos);
  EXPECT_LT(sent, 64u << 20) << "the server kept reading the body";
  EXPECT_LT(RssBytes(), rss_before + (16u << 20));
  EXPECT_EQ(Dropped("method"), before_drops + 1);
}

TEST(MetricsEndpointTest, HeadersPastTheLimitsAreRefused) {
  EndpointLimits limits;
  limits.max_headers = 10;
  auto ep = MetricsEndpoint::Start("127.0.0.1", 0, [] { return std::string(kPage); }, limits);
  ASSERT_TRUE(ep.ok());
  const int port = (*ep)->port();
  std::string many = "GET /metrics HTTP/1.1\r\nHost: x\r\n";
  for (int i = 0; i < 11; ++i) many += "X-" + std::to_string(i) + ": y\r\n";
  const uint64_t before = Dropped("headers");
  std::string r = Request(port, many + "\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.1 431", 0), 0u) << r;
  EXPECT_EQ(Dropped("headers"), before + 1);
  // One header line of 64 KiB: past the 8 KiB head; refused, never buffered.
  const uint64_t no_request = Dropped("no_request");
  r = Request(port, "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(64 << 10, 'a') + "\r\n\r\n");
  EXPECT_EQ(r.find("HTTP/1.1 200"), std::string::npos) << r.substr(0, 200);
  EXPECT_NE(r.find("HTTP/1.1 4"), std::string::npos) << r.substr(0, 200);
  // Counted once the connection is gone (MHD closes it after the answer).
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  while (Dropped("no_request") == no_request && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(Dropped("no_request"), no_request + 1);
}

TEST(MetricsEndpointTest, ConnectionsPastTheCapAreDroppedAndCounted) {
  EndpointLimits limits;
  limits.max_connections_per_address = 3;
  auto ep = MetricsEndpoint::Start("127.0.0.1", 0, [] { return std::string(kPage); }, limits);
  ASSERT_TRUE(ep.ok());
  const int port = (*ep)->port();
  const uint64_t before = Dropped("connections_per_address");
  std::vector<int> idle;
  for (int i = 0; i < 3; ++i) idle.push_back(Connect(port));
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  while ((*ep)->open_connections() < 3 && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_EQ((*ep)->open_connections(), 3);
  const int extra = Connect(port);
  EXPECT_TRUE(ClosedWithin(extra, 2000));
  close(extra);
  EXPECT_EQ(Dropped("connections_per_address"), before + 1);
  close(idle.back());
  idle.pop_back();
  const auto freed = Clock::now() + std::chrono::seconds(5);
  while ((*ep)->open_connections() > 2 && Clock::now() < freed)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const std::string r = Request(port, "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.1 200", 0), 0u) << r;
  for (int fd : idle) close(fd);
}

TEST(MetricsEndpointTest, SlowClientsAreCutOffAndNeverDelayTheStop) {
  EndpointLimits limits;
  limits.connection_lifetime_ms = 600;
  auto ep = MetricsEndpoint::Start("127.0.0.1", 0, [] { return std::string(kPage); }, limits);
  ASSERT_TRUE(ep.ok());
  const int port = (*ep)->port();
  const uint64_t before = Dropped("time");
  // A client that sends a byte of its request head every 100 ms.
  const int slow = Connect(port);
  const std::string head = "GET /metrics HTTP/1.1\r\nHost: x\r\n";
  const auto start = Clock::now();
  bool closed = false;
  for (size_t i = 0; i < head.size() && !closed; ++i) {
    if (send(slow, &head[i], 1, MSG_NOSIGNAL) != 1) break;
    closed = ClosedWithin(slow, 100);
  }
  const double took = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_TRUE(closed);
  EXPECT_GE(took, 0.5);
  EXPECT_LT(took, 2.0);
  close(slow);
  const auto counted = Clock::now() + std::chrono::seconds(5);
  while (Dropped("time") == before && Clock::now() < counted) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(Dropped("time"), before + 1);
  // Five silent clients do not delay the stop.
  std::vector<int> silent;
  for (int i = 0; i < 5; ++i) silent.push_back(Connect(port));
  const auto stop_start = Clock::now();
  ep->reset();
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - stop_start).count(), 1.0);
  for (int fd : silent) {
    EXPECT_TRUE(ClosedWithin(fd, 1000));
    close(fd);
  }
}

TEST(MetricsEndpointTest, ATakenPortIsAnErrorNamingIt) {
  auto first = MetricsEndpoint::Start("127.0.0.1", 0, [] { return std::string(); });
  ASSERT_TRUE(first.ok());
  const int port = (*first)->port();
  auto second = MetricsEndpoint::Start("127.0.0.1", port, [] { return std::string(); });
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), Status::Code::kIOError);
  EXPECT_EQ(second.status().message(),
            "metrics endpoint: cannot bind 127.0.0.1:" + std::to_string(port) + " (port taken, or no such address)");
}

TEST(MetricsEndpointTest, BadArgumentsAndImmediateStop) {
  EXPECT_EQ(MetricsEndpoint::Start("127.0.0.1", 70000, [] { return std::string(); }).status().code(),
            Status::Code::kInvalidArgument);
  EXPECT_EQ(MetricsEndpoint::Start("", 0, [] { return std::string(); }).status().code(),
            Status::Code::kInvalidArgument);
  EndpointLimits zero;
  zero.max_connections = 0;
  EXPECT_EQ(MetricsEndpoint::Start("127.0.0.1", 0, [] { return std::string(); }, zero).status().code(),
            Status::Code::kInvalidArgument);
  // Destroyed right after it started: must not hang, and the descriptor
  // count comes back where it was (the listening socket is closed once).
  auto open_fds = [] {
    int n = 0;
    for (int fd = 0; fd < 4096; ++fd) n += fcntl(fd, F_GETFD) != -1;
    return n;
  };
  const int fds = open_fds();
  for (int i = 0; i < 20; ++i) {
    auto ep = MetricsEndpoint::Start("127.0.0.1", 0, [] { return std::string(); });
    ASSERT_TRUE(ep.ok());
  }
  EXPECT_EQ(open_fds(), fds);
}

}  // namespace
}  // namespace tether
