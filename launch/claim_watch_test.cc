#include "launch/claim_watch.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "tests/testing/temp_dir.h"

namespace tether {
namespace {

const std::string kE0 = "tcp://127.0.0.1:7000";
const std::string kE1 = "tcp://127.0.0.1:7001";
const std::string kE2 = "tcp://127.0.0.1:7002";
const std::string kCopy1 = "tcp://127.0.0.1:41441";  // server 1's copy of shard 0, claimed
const std::string kCopy2 = "tcp://127.0.0.1:41519";  // server 2's copy of shard 1, claimed

ClaimWatch ThreeServers() {
  ClaimWatch w(3);
  w.Watch(0, 0, kE0);
  w.Watch(1, 1, kE1);
  w.Watch(2, 2, kE2);
  return w;
}

std::vector<std::pair<int, std::string>> Found(const std::vector<SupersededServer>& v) {
  std::vector<std::pair<int, std::string>> out;
  for (const SupersededServer& s : v) out.emplace_back(s.process, s.claimant);
  return out;
}

const std::vector<bool> kAllRun = {true, true, true};

// Server 0 stopped: server 1's copy claims shard 0 and publishes its port
// there while server 0 still runs.
TEST(ClaimWatchTest, AShardClaimedFromARunningProcessSupersedesIt) {
  ClaimWatch w = ThreeServers();
  EXPECT_TRUE(w.Check({kE0, kE1, kE2}, kAllRun).empty());
  const std::vector<SupersededServer> s = w.Check({kCopy1, kE1, kE2}, kAllRun);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].process, 0);
  EXPECT_EQ(s[0].shard, 0);
  EXPECT_EQ(s[0].endpoint, kE0);
  EXPECT_EQ(s[0].claimant, kCopy1);
  // Once over the watch.
  EXPECT_TRUE(w.Check({kCopy1, kE1, kE2}, kAllRun).empty());
}

// A process that died is the launcher's already (its reaped exit).
TEST(ClaimWatchTest, ADeadProcessIsNotSuperseded) {
  ClaimWatch w = ThreeServers();
  EXPECT_TRUE(w.Check({kE0, kE1, kE2}, kAllRun).empty());
  EXPECT_TRUE(w.Check({kCopy1, kE1, kE2}, {false, true, true}).empty());
  EXPECT_TRUE(w.Check({kCopy1, kE1, kE2}, {false}).empty());  // short: not running
}

// Server 1 claimed shard 0 and serves it at its copy's port: that is its
// shard now, not a sign against it; server 0 is dead.
TEST(ClaimWatchTest, AProcessServingAShardItClaimedIsNotSuperseded) {
  ClaimWatch w = ThreeServers();
  EXPECT_TRUE(w.Check({kE0, kE1, kE2}, kAllRun).empty());
  EXPECT_TRUE(w.Check({kCopy1, kE1, kE2}, {false, true, true}).empty());
  EXPECT_TRUE(w.Check({kCopy1, kE1, kE2}, {false, true, true}).empty());
  // Then server 1 stops and server 2's copy claims shard 1 from it.
  EXPECT_EQ(Found(w.Check({kCopy1, kCopy2, kE2}, {false, true, true})),
            (std::vector<std::pair<int, std::string>>{{1, kCopy2}}));
}

// Published again at its own endpoint, withdrawn at a clean exit, or a
// value that is no endpoint: nobody claimed the shard.
TEST(ClaimWatchTest, RepublishedAbsentOrNoEndpointIsNoClaim) {
  ClaimWatch w = ThreeServers();
  EXPECT_TRUE(w.Check({kE0, kE1, kE2}, kAllRun).empty());
  EXPECT_TRUE(w.Check({kE0, kE1, kE2}, kAllRun).empty());
  EXPECT_TRUE(w.Check({"", "", ""}, kAllRun).empty());
  EXPECT_TRUE(w.Check({"garbage", "127.0.0.1:9", "tcp:/x"}, kAllRun).empty());
  EXPECT_TRUE(w.Check({kE0, kE1, kE2}, kAllRun).empty());
  // Seen published before: a later claim still counts.
  EXPECT_EQ(Found(w.Check({kE0, kE1, kCopy1}, kAllRun)), (std::vector<std::pair<int, std::string>>{{2, kCopy1}}));
}

// An entry left by an earlier run under the same job id and generation
// names another endpoint before the server published its own: not trusted.
TEST(ClaimWatchTest, AnEntryIsTrustedOnlyOnceItNamedTheWatchedEndpoint) {
  ClaimWatch w = ThreeServers();
  const std::string stale = "tcp://127.0.0.1:6999";
  EXPECT_TRUE(w.Check({stale, "", ""}, kAllRun).empty());
  EXPECT_TRUE(w.Check({stale, kE1, kE2}, kAllRun).empty());
  EXPECT_TRUE(w.Check({kE0, kE1, kE2}, kAllRun).empty());
  EXPECT_EQ(Found(w.Check({kCopy1, kE1, kE2}, kAllRun)), (std::vector<std::pair<int, std::string>>{{0, kCopy1}}));
}

// Two processes superseded at once come in the order watched; a shard
// past the entries given is not looked at.
TEST(ClaimWatchTest, SeveralAtOnceInTheOrderWatched) {
  ClaimWatch w = ThreeServers();
  EXPECT_TRUE(w.Check({kE0, kE1, kE2}, kAllRun).empty());
  EXPECT_EQ(Found(w.Check({kCopy1, kE1, kCopy2}, kAllRun)),
            (std::vector<std::pair<int, std::string>>{{0, kCopy1}, {2, kCopy2}}));
  ClaimWatch short_entries = ThreeServers();
  EXPECT_TRUE(short_entries.Check({kE0}, kAllRun).empty());
  EXPECT_EQ(Found(short_entries.Check({kCopy1}, kAllRun)), (std::vector<std::pair<int, std::string>>{{0, kCopy1}}));
}

// The entries as the servers publish them, in a rendezvous folder.
TEST(ClaimPollTest, ReadsTheRendezvousAtItsInterval) {
  testing::ScopedTempDir dir;
  const std::string spec = "file:" + dir.path();
  auto writer = Rendezvous::Open(spec);
  ASSERT_TRUE(writer.ok());
  auto reader = Rendezvous::Open(spec);
  ASSERT_TRUE(reader.ok());
  ClaimWatch watch(2);
  watch.Watch(0, 0, kE0);
  watch.Watch(1, 1, kE1);
  ClaimPoll poll(std::move(*reader), "job-a", 3, std::move(watch));
  const std::vector<bool> both = {true, true};
  using Clock = ClaimPoll::Clock;
  // Nothing published yet: absent entries, read at once.
  EXPECT_LE(poll.next(), Clock::now());
  EXPECT_TRUE(poll.Poll(Clock::now(), both).empty());
  EXPECT_EQ(poll.interval(), ClaimPoll::kInterval);
  ASSERT_TRUE(PublishServer(writer->get(), "job-a", 3, 0, kE0, 1000).ok());
  ASSERT_TRUE(PublishServer(writer->get(), "job-a", 3, 1, kE1, 1000).ok());
  EXPECT_TRUE(poll.Poll(poll.next(), both).empty());
  // Shard 0 claimed (the Set a claimant's PublishServer makes once the
  // stopped primary no longer answers); another job's entry is not read.
  ASSERT_TRUE((*writer)->Set(RendezvousKey{"job-a", 3, ServerEntryName(0)}, kCopy1, 1000).ok());
  ASSERT_TRUE((*writer)->Set(RendezvousKey{"job-a", 4, ServerEntryName(1)}, kCopy2, 1000).ok());
  // Not due yet: nothing read.
  EXPECT_TRUE(poll.Poll(poll.next() - std::chrono::milliseconds(1), both).empty());
  const std::vector<SupersededServer> s = poll.Poll(poll.next(), both);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].process, 0);
  EXPECT_EQ(s[0].shard, 0);
  EXPECT_EQ(s[0].endpoint, kE0);
  EXPECT_EQ(s[0].claimant, kCopy1);
  EXPECT_TRUE(poll.Poll(poll.next(), both).empty());
}

// A store that does not answer: the poll gives up within about a second
// and asks half as often.
TEST(ClaimPollTest, AStoreThatDoesNotAnswerIsAskedLessOften) {
  auto rdzv = Rendezvous::Open("tcp://127.0.0.1:1");
  ASSERT_TRUE(rdzv.ok());
  ClaimWatch watch(2);
  watch.Watch(0, 0, kE0);
  ClaimPoll poll(std::move(*rdzv), "job-a", 0, std::move(watch));
  const auto start = ClaimPoll::Clock::now();
  EXPECT_TRUE(poll.Poll(start, {true, true}).empty());
  const auto took = ClaimPoll::Clock::now() - start;
  EXPECT_LT(took, std::chrono::seconds(3));
  EXPECT_EQ(poll.interval(), 2 * ClaimPoll::kInterval);
  EXPECT_GE(poll.next() - ClaimPoll::Clock::now(), ClaimPoll::kInterval);
}

}  // namespace
}  // namespace tether
