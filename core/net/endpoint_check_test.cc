// CheckEndpoint: each kind of bad endpoint is refused with the value and the
// fix; good ones of every scheme pass.
#include "core/net/endpoint_check.h"

#include <gtest/gtest.h>

#include <string>

namespace tether {
namespace {

std::string Why(const std::string& endpoint, EndpointUse use = EndpointUse::kConnect) {
  const Status st = CheckEndpoint(endpoint, "flag --server_addresses", use);
  return st.ok() ? "ok" : st.message();
}

TEST(EndpointCheck, GoodEndpointsPass) {
  EXPECT_EQ(Why("tcp://127.0.0.1:5550"), "ok");
  EXPECT_EQ(Why("tcp://[::1]:5550"), "ok");
  EXPECT_EQ(Why("tcp://localhost:1"), "ok");
  EXPECT_EQ(Why("tcp://*:0", EndpointUse::kBind), "ok");
  EXPECT_EQ(Why("tcp://127.0.0.1:0", EndpointUse::kBind), "ok");
  EXPECT_EQ(Why("ipc:///run/x.ipc"), "ok");
  EXPECT_EQ(Why("inproc://server_0"), "ok");
}

TEST(EndpointCheck, NoSchemeSaysWhatToWrite) {
  EXPECT_EQ(Why("127.0.0.1:5550"),
            "flag --server_addresses: endpoint '127.0.0.1:5550': no transport scheme: write tcp://127.0.0.1:5550 "
            "(or ipc://PATH, inproc://NAME)");
  EXPECT_NE(Why("udp://h:1").find("unknown transport scheme 'udp'"), std::string::npos);
}

TEST(EndpointCheck, BadPorts) {
  EXPECT_NE(Why("tcp://127.0.0.1").find("expected tcp://HOST:PORT"), std::string::npos);
  EXPECT_NE(Why("tcp://127.0.0.1:0").find("port '0' is not a number in [1, 65535]"), std::string::npos);
  EXPECT_NE(Why("tcp://127.0.0.1:70000").find("port '70000'"), std::string::npos);
  EXPECT_NE(Why("tcp://127.0.0.1:5x").find("port '5x'"), std::string::npos);
}

TEST(EndpointCheck, UnresolvableHost) {
  // ".invalid" never resolves (RFC 6761).
  const std::string why = Why("tcp://no-such-host.invalid:5550");
  EXPECT_NE(why.find("host 'no-such-host.invalid' does not resolve ("), std::string::npos) << why;
  EXPECT_NE(why.find("give the server's IP address"), std::string::npos) << why;
}

TEST(EndpointCheck, IpcPathLength) {
  EXPECT_EQ(MaxIpcPathBytes(), 107u);
  EXPECT_EQ(Why("ipc:///" + std::string(106, 'x')), "ok");
  const std::string why = Why("ipc:///" + std::string(107, 'x'));
  EXPECT_NE(why.find("the socket path is 108 bytes, over the 107"), std::string::npos) << why;
  EXPECT_NE(why.find("set TMPDIR"), std::string::npos) << why;
  EXPECT_NE(Why("ipc://").find("expected ipc://PATH"), std::string::npos);
}

// A server process listening on inproc:// could never be reached by a
// worker of another process: refused, naming the flag and the fix.
TEST(EndpointCheck, ListenAcrossProcessesRefusesInproc) {
  EXPECT_TRUE(CheckListenAcrossProcesses("tcp://127.0.0.1:0", "flag --listen").ok());
  EXPECT_TRUE(CheckListenAcrossProcesses("ipc:///tmp/s0", "flag --listen").ok());
  const Status st = CheckListenAcrossProcesses("inproc://x", "flag --listen");
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(st.message(),
            "flag --listen: endpoint 'inproc://x': an inproc:// endpoint is reached only from inside this process, "
            "and a server's workers run in processes of their own: listen on tcp://HOST:PORT or ipc://PATH (a "
            "one-process job: tether-launch --transport=inproc)");
}

}  // namespace
}  // namespace tether
