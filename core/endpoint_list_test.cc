// NormalEndpoint and CheckDistinctEndpoints (core/endpoint_list.h).
#include "core/endpoint_list.h"

#include <gtest/gtest.h>

#include <string>

namespace tether {
namespace {

TEST(EndpointList, NormalEndpointOneSpellingPerPlace) {
  EXPECT_EQ(NormalEndpoint("TCP://LocalHost:05550"), "tcp://localhost:5550");
  EXPECT_EQ(NormalEndpoint("tcp://127.0.0.1:5550"), "tcp://127.0.0.1:5550");
  EXPECT_EQ(NormalEndpoint("tcp://[::1]:5550"), "tcp://[::1]:5550");
  EXPECT_EQ(NormalEndpoint("tcp://[FE80::1]:0070"), "tcp://[fe80::1]:70");
  EXPECT_EQ(NormalEndpoint("IPC:///tmp/A"), "ipc:///tmp/A");
  EXPECT_EQ(NormalEndpoint("127.0.0.1:5550"), "127.0.0.1:5550");
}

TEST(EndpointList, DistinctEndpointsPass) {
  EXPECT_TRUE(CheckDistinctEndpoints({}, "flag --server_addresses").ok());
  EXPECT_TRUE(CheckDistinctEndpoints({"tcp://127.0.0.1:5550", "tcp://127.0.0.1:5551", "tcp://localhost:5550",
                                      "ipc:///tmp/a", "ipc:///tmp/A", "inproc://a"},
                                     "flag --server_addresses")
                  .ok());
}

TEST(EndpointList, RepeatedEndpointIsRefusedNamingBothEntries) {
  const Status st = CheckDistinctEndpoints({"tcp://127.0.0.1:5550", "tcp://127.0.0.1:5551", "TCP://127.0.0.1:05550"},
                                           "flag --server_addresses");
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(st.message(),
            "flag --server_addresses: names tcp://127.0.0.1:5550 twice (entries 1 and 3 of "
            "'tcp://127.0.0.1:5550,tcp://127.0.0.1:5551,TCP://127.0.0.1:05550'): each server shard needs an "
            "endpoint of its own");
  EXPECT_EQ(CheckDistinctEndpoints({"ipc:///tmp/s", "ipc:///tmp/s"}, "x").code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(CheckDistinctEndpoints({"tcp://[::1]:5550", "tcp://::1:5550"}, "x").code(),
            Status::Code::kInvalidArgument);
}

}  // namespace
}  // namespace tether
