#include "telemetry/metrics_endpoint.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>

#include "telemetry/prometheus.h"

namespace tether {
namespace {

TEST(MetricsEndpointTest, ServesRenderedTextOnAFreePort) {
  std::atomic<int> calls{0};
  auto ep = MetricsEndpoint::Start("127.0.0.1", 0, [&] {
    ++calls;
    return std::string("# HELP x X.\n# TYPE x gauge\nx 1\n");
  });
  ASSERT_TRUE(ep.ok()) << ep.status().ToString();
  ASSERT_GT((*ep)->port(), 0);
  EXPECT_EQ((*ep)->url(), "http://127.0.0.1:" + std::to_string((*ep)->port()) + "/metrics");
  httplib::Client client("127.0.0.1", (*ep)->port());
  client.set_connection_timeout(5);
  client.set_read_timeout(5);
  for (int i = 0; i < 2; ++i) {
    auto res = client.Get("/metrics");
    ASSERT_TRUE(res) << httplib::to_string(res.error());
    EXPECT_EQ(res->status, 200);
    EXPECT_EQ(res->body, "# HELP x X.\n# TYPE x gauge\nx 1\n");
    EXPECT_EQ(res->get_header_value("Content-Type"), kPrometheusContentType);
  }
  EXPECT_EQ(calls.load(), 2);
  EXPECT_EQ((*ep)->scrapes(), 2u);
  auto missing = client.Get("/nope");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  auto root = client.Get("/");
  ASSERT_TRUE(root);
  EXPECT_EQ(root->status, 200);
  EXPECT_EQ(calls.load(), 2);
}

TEST(MetricsEndpointTest, ATakenPortIsAnErrorNamingIt) {
  auto first = MetricsEndpoint::Start("127.0.0.1", 0, [] { return std::string(); });
  ASSERT_TRUE(first.ok());
  const int port = (*first)->port();
  auto second = MetricsEndpoint::Start("127.0.0.1", port, [] { return std::string(); });
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), Status::Code::kIOError);
  EXPECT_NE(second.status().message().find("127.0.0.1:" + std::to_string(port)), std::string::npos)
      << second.status().message();
}

TEST(MetricsEndpointTest, BadArgumentsAndImmediateStop) {
  EXPECT_EQ(MetricsEndpoint::Start("127.0.0.1", 70000, [] { return std::string(); }).status().code(),
            Status::Code::kInvalidArgument);
  EXPECT_EQ(MetricsEndpoint::Start("", 0, [] { return std::string(); }).status().code(),
            Status::Code::kInvalidArgument);
  // Destroyed before its accept loop may have started: must not hang.
  for (int i = 0; i < 20; ++i) {
    auto ep = MetricsEndpoint::Start("127.0.0.1", 0, [] { return std::string(); });
    ASSERT_TRUE(ep.ok());
  }
}

}  // namespace
}  // namespace tether
