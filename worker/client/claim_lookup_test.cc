// ClaimLookup: which rendezvous entries of a shard whose chain ran out are
// a claimant to follow, and how often the entry is read. The reader is a
// scripted one (the values it returns in turn, the shards it was asked);
// the clock is the test's.
#include "worker/client/claim_lookup.h"

#include <gtest/gtest.h>

#include <chrono>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/net/rendezvous.h"
#include "tests/testing/temp_dir.h"

namespace tether {
namespace {

using Clock = ClaimLookup::Clock;
using std::chrono::milliseconds;

class ClaimLookupTest : public ::testing::Test {
 protected:
  std::unique_ptr<ClaimLookup> Make(int num_shards, int interval_ms = 100) {
    ClaimLookup::Options o;
    o.interval_ms = interval_ms;
    o.source = "rendezvous file:/r";
    o.log_prefix = "[worker 0] ";
    return std::make_unique<ClaimLookup>(
        num_shards,
        [this](int shard) -> StatusOr<std::string> {
          asked_.push_back(shard);
          if (values_.empty()) return Status::NotFound("no entry server-" + std::to_string(shard));
          StatusOr<std::string> v = values_.front();
          values_.pop_front();
          return v;
        },
        o);
  }
  std::deque<StatusOr<std::string>> values_;
  std::vector<int> asked_;
  const Clock::time_point t0_ = Clock::now();
};

// The entry names the primary, then the first claimant (both known: the
// worker was at them), then the process that claimed the shard since: only
// that one is followed, once; an entry read again that names it is no news.
TEST_F(ClaimLookupTest, OnlyAnEndpointTheWorkerWasNotAtIsTheClaimant) {
  auto lookup = Make(3);
  lookup->Known(0, "tcp://127.0.0.1:1000");  // the primary joined
  lookup->Known(0, "tcp://127.0.0.1:1001");  // the first claimant, followed
  lookup->Known(0, "tcp://127.0.0.1:1002");  // the learner's old port, followed
  values_ = {std::string("tcp://127.0.0.1:1000"), std::string("tcp://127.0.0.1:1001"),
             std::string("tcp://127.0.0.1:1003"), std::string("tcp://127.0.0.1:1003")};
  EXPECT_EQ(lookup->Poll(0, t0_), std::nullopt);
  EXPECT_EQ(lookup->Poll(0, t0_ + milliseconds(100)), std::nullopt);
  EXPECT_EQ(lookup->Poll(0, t0_ + milliseconds(200)), std::optional<std::string>("tcp://127.0.0.1:1003"));
  EXPECT_EQ(lookup->Poll(0, t0_ + milliseconds(300)), std::nullopt) << "reported once";
  EXPECT_EQ(lookup->reads(), 4u);
  EXPECT_EQ(asked_, (std::vector<int>{0, 0, 0, 0}));
}

// One read per interval at most, the first at once; each shard keeps its
// own clock and its own known endpoints.
TEST_F(ClaimLookupTest, ReadsTheEntryAtMostOncePerIntervalPerShard) {
  auto lookup = Make(2, 100);
  lookup->Known(0, "tcp://127.0.0.1:1000");
  values_ = {std::string("tcp://127.0.0.1:1000"), std::string("tcp://127.0.0.1:1000"),
             std::string("tcp://127.0.0.1:1000"), std::string("tcp://127.0.0.1:1000")};
  EXPECT_EQ(lookup->Poll(0, t0_), std::nullopt);
  EXPECT_EQ(lookup->Poll(0, t0_ + milliseconds(1)), std::nullopt);
  EXPECT_EQ(lookup->Poll(0, t0_ + milliseconds(99)), std::nullopt);
  EXPECT_EQ(lookup->reads(), 1u);
  EXPECT_EQ(lookup->Poll(0, t0_ + milliseconds(100)), std::nullopt);
  EXPECT_EQ(lookup->reads(), 2u);
  // Shard 1 has its own clock, and the primary's endpoint is new to it.
  EXPECT_EQ(lookup->Poll(1, t0_ + milliseconds(101)), std::optional<std::string>("tcp://127.0.0.1:1000"));
  EXPECT_EQ(lookup->Poll(0, t0_ + milliseconds(150)), std::nullopt);
  EXPECT_EQ(lookup->Poll(0, t0_ + milliseconds(200)), std::nullopt);
  EXPECT_EQ(lookup->reads(), 4u);
  EXPECT_EQ(asked_, (std::vector<int>{0, 0, 1, 0}));
}

// A missing entry (withdrawn at a clean exit), a store that does not
// answer and a value that is no endpoint are failed reads: nothing is
// followed, and the next interval reads again.
TEST_F(ClaimLookupTest, FailedReadsFollowNothingAndAreTriedAgain) {
  auto lookup = Make(1, 50);
  lookup->Known(0, "tcp://127.0.0.1:1000");
  values_ = {Status::NotFound("no entry"), Status::DeadlineExceeded("store"), std::string("inproc://x"),
             std::string("tcp://127.0.0.1:1004")};
  for (int i = 0; i < 3; ++i) EXPECT_EQ(lookup->Poll(0, t0_ + milliseconds(50 * i)), std::nullopt) << i;
  EXPECT_EQ(lookup->Poll(0, t0_ + milliseconds(150)), std::optional<std::string>("tcp://127.0.0.1:1004"));
  EXPECT_EQ(lookup->reads(), 4u);
}

TEST_F(ClaimLookupTest, AShardOutsideTheJobIsNeverRead) {
  auto lookup = Make(2);
  lookup->Known(5, "tcp://127.0.0.1:1000");
  EXPECT_EQ(lookup->Poll(2, t0_), std::nullopt);
  EXPECT_EQ(lookup->Poll(-1, t0_), std::nullopt);
  EXPECT_EQ(lookup->reads(), 0u);
  EXPECT_TRUE(asked_.empty());
}

// The reader of a file rendezvous: the entry a claiming copy publishes
// (PublishServer) is the one reported.
TEST_F(ClaimLookupTest, ReadsWhatAClaimingCopyPublishedInAFileRendezvous) {
  testing::ScopedTempDir dir;
  auto rdzv = Rendezvous::Open("file:" + dir.path());
  ASSERT_TRUE(rdzv.ok()) << rdzv.status().ToString();
  std::shared_ptr<Rendezvous> store(std::move(*rdzv));
  ASSERT_TRUE(PublishServer(store.get(), "job", 0, 1, "tcp://127.0.0.1:2000", 1000).ok());
  ClaimLookup::Options o;
  o.source = "rendezvous file:" + dir.path();
  ClaimLookup lookup(2, ReadServerEntry(store, "job", 0), o);
  lookup.Known(1, "tcp://127.0.0.1:2000");
  EXPECT_EQ(lookup.Poll(1, t0_), std::nullopt);
  ASSERT_TRUE(PublishServer(store.get(), "job", 0, 1, "tcp://127.0.0.1:2001", 1000, "", "tcp://127.0.0.1:2000").ok());
  EXPECT_EQ(lookup.Poll(1, t0_ + milliseconds(100)), std::optional<std::string>("tcp://127.0.0.1:2001"));
  EXPECT_EQ(lookup.Poll(0, t0_), std::nullopt) << "shard 0 has no entry";
  EXPECT_EQ(lookup.reads(), 3u);
}

}  // namespace
}  // namespace tether
