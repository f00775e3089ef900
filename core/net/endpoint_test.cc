// Endpoints of every shape a user writes (IPv4, IPv6 literals, wildcards,
// host names) bind and connect: a DEALER reaches the ROUTER at the endpoint
// it reports (or advertises, for a wildcard), and the reply comes back.
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <string>

#include "core/net/transport.h"

namespace tether {
namespace {

// Whether an interface of this machine holds the IPv6 address `text`.
bool HasIpv6Address(const std::string& text) {
  in6_addr want{};
  if (inet_pton(AF_INET6, text.c_str(), &want) != 1) return false;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return false;
  bool found = false;
  for (ifaddrs* i = list; i != nullptr && !found; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET6) continue;
    found = memcmp(&reinterpret_cast<sockaddr_in6*>(i->ifa_addr)->sin6_addr, &want, sizeof(want)) == 0;
  }
  freeifaddrs(list);
  return found;
}

std::string Hostname() {
  char name[256] = {0};
  gethostname(name, sizeof(name) - 1);
  return name;
}

// Binds `listen`, connects to `connect_to` (the bound endpoint when empty),
// and checks one request and its reply cross within 5 s.
void RoundTrip(const std::string& listen, const std::string& advertise_host = "") {
  SCOPED_TRACE("listen " + listen);
  zmq::context_t ctx;
  SocketOptions opts;
  std::string bound;
  auto router = BindRouter(ctx, listen, opts, &bound);
  ASSERT_TRUE(router.ok()) << router.status().message();
  const std::string target = AdvertisedEndpoint(bound, advertise_host);
  SCOPED_TRACE("bound " + bound + ", connecting to " + target);
  EXPECT_FALSE(IsWildcardEndpoint(target));
  EXPECT_NE(bound.find(':', 6), std::string::npos);
  EXPECT_NE(bound.substr(bound.rfind(':') + 1), "0");
  auto dealer = ConnectDealer(ctx, target, "w0", opts);
  ASSERT_TRUE(dealer.ok()) << dealer.status().message();
  ASSERT_TRUE(dealer->send(zmq::buffer(std::string("ping")), zmq::send_flags::none));
  zmq::pollitem_t items[] = {{router->handle(), 0, ZMQ_POLLIN, 0}};
  ASSERT_EQ(zmq::poll(items, 1, std::chrono::milliseconds(5000)), 1) << "no request reached the server";
  zmq::message_t id, body;
  ASSERT_TRUE(router->recv(id));
  ASSERT_TRUE(router->recv(body));
  EXPECT_EQ(id.to_string(), "w0");
  EXPECT_EQ(body.to_string(), "ping");
  router->send(id, zmq::send_flags::sndmore);
  router->send(zmq::buffer(std::string("pong")), zmq::send_flags::none);
  zmq::pollitem_t back[] = {{dealer->handle(), 0, ZMQ_POLLIN, 0}};
  ASSERT_EQ(zmq::poll(back, 1, std::chrono::milliseconds(5000)), 1) << "no reply reached the worker";
  zmq::message_t reply;
  ASSERT_TRUE(dealer->recv(reply));
  EXPECT_EQ(reply.to_string(), "pong");
}

TEST(EndpointTest, Ipv4Loopback) {
  RoundTrip("tcp://127.0.0.1:0");
  // Reported as plain IPv4, as before IPv6 support (port files, logs).
  zmq::context_t ctx;
  std::string bound;
  auto router = BindRouter(ctx, "tcp://127.0.0.1:0", SocketOptions{}, &bound);
  ASSERT_TRUE(router.ok());
  EXPECT_EQ(bound.rfind("tcp://127.0.0.1:", 0), 0u) << bound;
}

TEST(EndpointTest, Ipv6Loopback) {
  if (!HasIpv6Address("::1")) GTEST_SKIP() << "SKIP: this machine has no ::1 (IPv6 off)";
  RoundTrip("tcp://[::1]:0");
}

TEST(EndpointTest, Ipv6UniqueLocal) {
  // fd00::1 exists only where someone configured it (the netns test does);
  // elsewhere the bind must fail with an error naming the endpoint.
  if (!HasIpv6Address("fd00::1")) {
    zmq::context_t ctx;
    std::string bound;
    auto router = BindRouter(ctx, "tcp://[fd00::1]:0", SocketOptions{}, &bound);
    ASSERT_FALSE(router.ok());
    EXPECT_NE(router.status().message().find("tcp://[fd00::1]:0"), std::string::npos) << router.status().message();
    GTEST_SKIP() << "SKIP: no interface holds fd00::1 (bind refused with: " << router.status().message() << ")";
  }
  RoundTrip("tcp://[fd00::1]:0");
}

TEST(EndpointTest, WildcardsAdvertiseAConnectableHost) {
  RoundTrip("tcp://*:0", "127.0.0.1");
  RoundTrip("tcp://0.0.0.0:0", "127.0.0.1");
  RoundTrip("tcp://0.0.0.0:0", "localhost");
  // No advertise host: this machine's hostname.
  RoundTrip("tcp://*:0");
}

TEST(EndpointTest, HostNames) {
  RoundTrip("tcp://localhost:0");
  RoundTrip("tcp://" + Hostname() + ":0");
}

TEST(EndpointTest, HostNameBoundIsReportedByName) {
  zmq::context_t ctx;
  std::string bound;
  auto router = BindRouter(ctx, "tcp://localhost:0", SocketOptions{}, &bound);
  ASSERT_TRUE(router.ok()) << router.status().message();
  EXPECT_EQ(bound.rfind("tcp://localhost:", 0), 0u) << bound;
}

TEST(EndpointTest, UnknownHostIsAnErrorNamingIt) {
  zmq::context_t ctx;
  std::string bound;
  auto router = BindRouter(ctx, "tcp://no-such-host.invalid:0", SocketOptions{}, &bound);
  ASSERT_FALSE(router.ok());
  EXPECT_NE(router.status().message().find("no-such-host.invalid"), std::string::npos) << router.status().message();
}

TEST(EndpointTest, Helpers) {
  EXPECT_EQ(EndpointHost("tcp://[::1]:5"), "::1");
  EXPECT_EQ(EndpointHost("tcp://h:5"), "h");
  EXPECT_EQ(EndpointHost("ipc:///tmp/x"), "");
  EXPECT_TRUE(IsWildcardEndpoint("tcp://0.0.0.0:1"));
  EXPECT_TRUE(IsWildcardEndpoint("tcp://[::]:1"));
  EXPECT_TRUE(IsWildcardEndpoint("tcp://*:1"));
  EXPECT_FALSE(IsWildcardEndpoint("tcp://127.0.0.1:1"));
  EXPECT_EQ(TcpEndpoint("fd00::2", 7), "tcp://[fd00::2]:7");
  EXPECT_EQ(TcpEndpoint("10.0.0.1", 7), "tcp://10.0.0.1:7");
  EXPECT_EQ(AdvertisedEndpoint("tcp://[::]:9", "fd00::2"), "tcp://[fd00::2]:9");
  EXPECT_EQ(AdvertisedEndpoint("tcp://0.0.0.0:9", "[fd00::2]"), "tcp://[fd00::2]:9");
  EXPECT_EQ(AdvertisedEndpoint("tcp://0.0.0.0:9", "node7"), "tcp://node7:9");
  EXPECT_EQ(AdvertisedEndpoint("tcp://10.1.2.3:9", "node7"), "tcp://10.1.2.3:9");
  EXPECT_EQ(AdvertisedEndpoint("tcp://0.0.0.0:9", ""), "tcp://" + Hostname() + ":9");
}

}  // namespace
}  // namespace tether
