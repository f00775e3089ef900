#include "core/wait_report.h"

#include <gtest/gtest.h>

namespace tether {
namespace {

using std::chrono::milliseconds;

const WaitReport::Clock::time_point kT0 = WaitReport::Clock::time_point{} + milliseconds(50000);

TEST(WaitReportTest, SaysNothingBeforeStartOrAfterStop) {
  WaitReport r;
  EXPECT_FALSE(r.running());
  EXPECT_FALSE(r.Due(kT0 + milliseconds(60000)));
  r.Start(kT0);
  r.Stop();
  EXPECT_FALSE(r.Due(kT0 + milliseconds(60000)));
}

TEST(WaitReportTest, FirstLineSoonThenEveryTenSeconds) {
  WaitReport r;  // 3 s, then every 10 s
  r.Start(kT0);
  int64_t waited = -1;
  EXPECT_FALSE(r.Due(kT0 + milliseconds(2999), &waited));
  EXPECT_EQ(waited, -1);
  EXPECT_TRUE(r.Due(kT0 + milliseconds(3000), &waited));
  EXPECT_EQ(waited, 3000);
  EXPECT_FALSE(r.Due(kT0 + milliseconds(3100)));
  EXPECT_FALSE(r.Due(kT0 + milliseconds(9999)));
  EXPECT_TRUE(r.Due(kT0 + milliseconds(10050), &waited));
  EXPECT_EQ(waited, 10050);
  EXPECT_FALSE(r.Due(kT0 + milliseconds(19999)));
  EXPECT_TRUE(r.Due(kT0 + milliseconds(20000), &waited));
  EXPECT_EQ(waited, 20000);
}

TEST(WaitReportTest, LateWakeUpSaysOneLineNotOnePerMissedTick) {
  WaitReport r(WaitReport::Options{2000, 10000});
  r.Start(kT0);
  int64_t waited = 0;
  EXPECT_TRUE(r.Due(kT0 + milliseconds(35000), &waited));
  EXPECT_EQ(waited, 35000);
  EXPECT_FALSE(r.Due(kT0 + milliseconds(35001)));
  EXPECT_FALSE(r.Due(kT0 + milliseconds(39999)));
  EXPECT_TRUE(r.Due(kT0 + milliseconds(40000)));
}

TEST(WaitReportTest, StartAgainBeginsANewWait) {
  WaitReport r(WaitReport::Options{2000, 10000});
  r.Start(kT0);
  EXPECT_TRUE(r.Due(kT0 + milliseconds(2000)));
  r.Start(kT0 + milliseconds(5000));
  EXPECT_FALSE(r.Due(kT0 + milliseconds(6999)));
  int64_t waited = 0;
  EXPECT_TRUE(r.Due(kT0 + milliseconds(7000), &waited));
  EXPECT_EQ(waited, 2000);
}

TEST(WaitReportTest, SecondsAndLists) {
  EXPECT_EQ(WaitReport::Seconds(0), "0 s");
  EXPECT_EQ(WaitReport::Seconds(10999), "10 s");
  EXPECT_EQ(WaitReport::Seconds(-5), "0 s");
  EXPECT_EQ(WaitReport::List({"1"}), "1");
  EXPECT_EQ(WaitReport::List({"0", "1", "2", "3", "4", "5", "6"}), "0, 1, 2, 3, 4 and 2 more");
}

TEST(WaitReportTest, Lines) {
  EXPECT_EQ(WaitingForShardsLine({"1 at tcp://127.0.0.1:25591"}, 10400, 60000),
            "waiting for server shard 1 at tcp://127.0.0.1:25591 (no connection yet; 10 s of "
            "cluster.startup_timeout_ms=60000)");
  EXPECT_EQ(WaitingForShardsLine({"0 at tcp://a:1", "1 at tcp://a:2"}, 3000, 60000),
            "waiting for server shards 0 at tcp://a:1, 1 at tcp://a:2 (no connection yet; 3 s of "
            "cluster.startup_timeout_ms=60000)");
  EXPECT_EQ(WaitingForRepliesLine({"0", "1"}, 2, 5000, 120000),
            "waiting for server shards 0, 1 to answer 2 request(s) (5 s; a server holds its answer while a worker "
            "of the job has not joined or is behind the staleness bound: the servers' logs name it; gives up after "
            "cluster.request_timeout_ms=120000)");
  EXPECT_EQ(WaitingForWorkersLine({"1"}, 2, 10000, 60000),
            "waiting for worker 1 (of 2) to join: 10 s of cluster.startup_timeout_ms=60000");
  EXPECT_EQ(WaitingForWorkersLine({"0", "1 (refused: staleness 0, the servers' 2)"}, 2, 20000, 60000),
            "waiting for workers 0, 1 (refused: staleness 0, the servers' 2) (of 2) to join: 20 s of "
            "cluster.startup_timeout_ms=60000");
}

}  // namespace
}  // namespace tether
