// ListenerGuard: a listener takes connections up to its cap; the next is
// cut (its peer reads end-of-stream) and counted in the process's peer
// drops; a connection that leaves frees its place. ConnectionBudget: the
// process-wide descriptor budget is taken and given back one at a time.
#include "core/net/listener_guard.h"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <tuple>

#include "core/peer_limits.h"

namespace tether {
namespace {

// A raw TCP connection to 127.0.0.1:`port` (no ZMTP greeting sent).
int Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  return fd;
}

// Polls `guard` until `done` holds, for at most 10 s.
bool PollUntil(ListenerGuard* guard, const std::function<bool()>& done) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < until) {
    zmq::pollitem_t items[] = {{guard->handle(), 0, ZMQ_POLLIN, 0}};
    zmq::poll(items, 1, std::chrono::milliseconds(50));
    guard->Poll();
    if (done()) return true;
  }
  return done();
}

// Whether the peer closed `fd` (end-of-stream or reset) within 10 s.
bool ClosedByPeer(int fd) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, 10000) <= 0) return false;
  char byte;
  const ssize_t n = recv(fd, &byte, 1, MSG_DONTWAIT);
  // ZeroMQ greets first (10 bytes of ZMTP): read them and look again.
  if (n > 0) {
    char rest[64];
    while (recv(fd, rest, sizeof(rest), MSG_DONTWAIT) > 0) {
    }
    if (poll(&p, 1, 10000) <= 0) return false;
    return recv(fd, &byte, 1, MSG_DONTWAIT) <= 0;
  }
  return n <= 0;
}

uint64_t Drops(const std::string& listener, const std::string& reason) {
  for (const auto& [l, r, n] : PeerDrops())
    if (l == listener && r == reason) return n;
  return 0;
}

TEST(ListenerGuardTest, AConnectionPastTheCapIsCutAndCounted) {
  zmq::context_t ctx;
  SocketOptions opts;
  opts.handshake_timeout_ms = 0;  // the raw peers never greet: keep them until they leave
  auto guard = ListenerGuard::Create(ctx, "guard_test", ListenerGuard::Limits{2}, 0, &opts);
  ASSERT_TRUE(guard.ok()) << guard.status().message();
  std::string endpoint;
  auto router = BindRouter(ctx, "tcp://127.0.0.1:0", opts, &endpoint);
  ASSERT_TRUE(router.ok()) << router.status().message();
  const int port = std::stoi(endpoint.substr(endpoint.rfind(':') + 1));
  ListenerGuard* g = guard->get();

  const int a = Connect(port), b = Connect(port);
  ASSERT_TRUE(PollUntil(g, [&] { return g->open_connections() == 2; }));
  EXPECT_EQ(g->cut(), 0u);
  const int c = Connect(port);
  ASSERT_TRUE(PollUntil(g, [&] { return g->cut() == 1; }));
  EXPECT_EQ(g->open_connections(), 2);
  EXPECT_TRUE(ClosedByPeer(c)) << "the third connection was not cut";
  EXPECT_EQ(Drops("guard_test", "connections_per_port"), 1u);

  // One leaves: its place is free again.
  close(a);
  ASSERT_TRUE(PollUntil(g, [&] { return g->open_connections() == 1; }));
  const int d = Connect(port);
  ASSERT_TRUE(PollUntil(g, [&] { return g->open_connections() == 2; }));
  EXPECT_EQ(g->cut(), 1u);
  for (int fd : {b, c, d}) close(fd);
}

// A ZMTP 3.0 greeting for `mechanism` (64 bytes), as a client's.
std::string Greeting(const std::string& mechanism) {
  std::string g(64, '\0');
  g[0] = '\xff';
  g[9] = '\x7f';
  g[10] = 3;
  g.replace(12, mechanism.size(), mechanism);
  return g;
}

// A peer that greets and announces a 3 GB command frame before any
// handshake is cut off by ZeroMQ; one that greets with another mechanism,
// and one that never completes its handshake, count as drops with their
// reasons.
TEST(ListenerGuardTest, FramesAboveTheBoundAndFailedHandshakesEndTheConnection) {
  zmq::context_t ctx;
  SocketOptions opts;
  opts.handshake_timeout_ms = 300;
  auto guard = ListenerGuard::Create(ctx, "guard_frames", ListenerGuard::Limits{}, 0, &opts);
  ASSERT_TRUE(guard.ok()) << guard.status().message();
  std::string endpoint;
  auto router = BindRouter(ctx, "tcp://127.0.0.1:0", opts, &endpoint);
  ASSERT_TRUE(router.ok()) << router.status().message();
  const int port = std::stoi(endpoint.substr(endpoint.rfind(':') + 1));
  ListenerGuard* g = guard->get();

  const int big = Connect(port);
  std::string frame = Greeting("NULL");
  frame += '\x06';  // a long command frame, its 8-byte size next (big-endian)
  for (int shift = 56; shift >= 0; shift -= 8) frame += static_cast<char>((uint64_t{3000000000} >> shift) & 0xff);
  frame += std::string(4096, 'x');
  ASSERT_EQ(send(big, frame.data(), frame.size(), MSG_NOSIGNAL), static_cast<ssize_t>(frame.size()));
  EXPECT_TRUE(ClosedByPeer(big)) << "the 3 GB frame's connection stayed open";

  const int curve = Connect(port);  // this listener is plain: a CURVE greeting fails
  const std::string greeting = Greeting("CURVE");
  ASSERT_EQ(send(curve, greeting.data(), greeting.size(), MSG_NOSIGNAL), 64);
  ASSERT_TRUE(PollUntil(g, [] { return Drops("guard_frames", "handshake") == 1; })) << "not counted";
  EXPECT_TRUE(ClosedByPeer(curve));

  const int idle = Connect(port);  // says nothing: closed after 300 ms
  ASSERT_TRUE(PollUntil(g, [] { return Drops("guard_frames", "handshake_timeout") >= 1; })) << "not counted";
  EXPECT_TRUE(ClosedByPeer(idle));
  EXPECT_TRUE(g->Poll().empty());  // the owner asked for no event
  EXPECT_EQ(g->cut(), 0u);
  for (int fd : {big, curve, idle}) close(fd);
}

TEST(ConnectionBudgetTest, TakenAndGivenBackOneAtATime) {
  ConnectionBudget budget(2);
  EXPECT_TRUE(budget.TryAcquire());
  EXPECT_TRUE(budget.TryAcquire());
  EXPECT_FALSE(budget.TryAcquire());
  EXPECT_EQ(budget.in_use(), 2u);
  budget.Release();
  EXPECT_TRUE(budget.TryAcquire());
  budget.Release();
  budget.Release();
  budget.Release();  // one too many: stays at 0
  EXPECT_EQ(budget.in_use(), 0u);
  EXPECT_EQ(budget.capacity(), 2u);
}

}  // namespace
}  // namespace tether
