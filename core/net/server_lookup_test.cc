// ServerLookup (core/net/server_lookup.h) against a fake store: a changed
// entry is reported once, an unchanged one never, an unreadable or invalid
// one keeps the endpoint known; reads are bounded by the interval and back
// off while they fail. Also one read through a real directory rendezvous.
#include "core/net/server_lookup.h"

#include <gtest/gtest.h>

#include <map>

#include "core/net/rendezvous.h"
#include "tests/testing/temp_dir.h"

namespace tether {
namespace {

using Clock = ServerLookup::Clock;
using std::chrono::milliseconds;

// Entries by shard; a shard without one fails its read with IOError.
struct FakeStore {
  std::map<int, std::string> entries;
  std::map<int, int> reads;
  ServerLookup::ReadEntry Reader() {
    return [this](int shard) -> StatusOr<std::string> {
      ++reads[shard];
      auto it = entries.find(shard);
      if (it == entries.end()) return Status::IOError("store down");
      return it->second;
    };
  }
};

ServerLookup::Options TestOptions() {
  ServerLookup::Options o;
  o.interval_ms = 500;
  o.max_interval_ms = 2000;
  o.source = "rendezvous fake";
  return o;
}

TEST(ServerLookupTest, ChangedEntryIsReportedOnce) {
  FakeStore store;
  store.entries = {{0, "tcp://127.0.0.1:1"}, {1, "tcp://127.0.0.1:2"}};
  ServerLookup lookup({"tcp://127.0.0.1:1", "tcp://127.0.0.1:2"}, store.Reader(), TestOptions());
  const Clock::time_point t0 = Clock::now();
  EXPECT_EQ(lookup.Poll(0, t0), std::nullopt);  // the first ask starts the clock
  EXPECT_EQ(store.reads[0], 0);

  store.entries[0] = "tcp://127.0.0.1:5555";
  EXPECT_EQ(lookup.Poll(0, t0 + milliseconds(100)), std::nullopt);  // within the interval: no read
  EXPECT_EQ(store.reads[0], 0);
  EXPECT_EQ(lookup.Poll(0, t0 + milliseconds(500)), std::optional<std::string>("tcp://127.0.0.1:5555"));
  EXPECT_EQ(lookup.endpoint(0), "tcp://127.0.0.1:5555");
  EXPECT_EQ(lookup.Poll(0, t0 + milliseconds(1000)), std::nullopt);  // the same again: nothing
  EXPECT_EQ(store.reads[0], 2);

  // Shard 1 keeps its endpoint; it is read on its own schedule.
  EXPECT_EQ(lookup.Poll(1, t0 + milliseconds(1000)), std::nullopt);
  EXPECT_EQ(lookup.Poll(1, t0 + milliseconds(1500)), std::nullopt);
  EXPECT_EQ(lookup.endpoint(1), "tcp://127.0.0.1:2");
  EXPECT_EQ(store.reads[1], 1);
  EXPECT_EQ(lookup.reads(), 3u);
}

TEST(ServerLookupTest, UnchangedEntryReportsNothingAndReadsAreBounded) {
  FakeStore store;
  store.entries = {{0, "tcp://127.0.0.1:1"}};
  ServerLookup lookup({"tcp://127.0.0.1:1"}, store.Reader(), TestOptions());
  const Clock::time_point t0 = Clock::now();
  // Asked every 10 ms for 5 s (as a waiting channel asks): one read per
  // 500 ms, from 500 ms on.
  for (int ms = 0; ms <= 5000; ms += 10) EXPECT_EQ(lookup.Poll(0, t0 + milliseconds(ms)), std::nullopt);
  EXPECT_EQ(store.reads[0], 10);
  EXPECT_EQ(lookup.endpoint(0), "tcp://127.0.0.1:1");
}

TEST(ServerLookupTest, UnreadableEntryKeepsTheEndpointAndBacksOff) {
  FakeStore store;  // no entries: every read fails
  ServerLookup lookup({"tcp://127.0.0.1:7"}, store.Reader(), TestOptions());
  const Clock::time_point t0 = Clock::now();
  for (int ms = 0; ms <= 10000; ms += 10) EXPECT_EQ(lookup.Poll(0, t0 + milliseconds(ms)), std::nullopt);
  EXPECT_EQ(lookup.endpoint(0), "tcp://127.0.0.1:7");
  // Reads at 500, 1500 (the interval doubled to 1000), 3500, 5500, 7500,
  // 9500 (capped at max_interval_ms = 2000).
  EXPECT_EQ(store.reads[0], 6);
  EXPECT_EQ(lookup.interval_ms(0), 2000);

  // The store answers again: the new entry is taken, the interval reset.
  store.entries[0] = "tcp://127.0.0.1:8";
  EXPECT_EQ(lookup.Poll(0, t0 + milliseconds(11500)), std::optional<std::string>("tcp://127.0.0.1:8"));
  EXPECT_EQ(lookup.interval_ms(0), 500);
}

TEST(ServerLookupTest, ValueThatIsNoEndpointKeepsTheOldOne) {
  FakeStore store;
  store.entries = {{0, "garbage"}};
  ServerLookup lookup({"tcp://127.0.0.1:7"}, store.Reader(), TestOptions());
  const Clock::time_point t0 = Clock::now();
  EXPECT_EQ(lookup.Poll(0, t0), std::nullopt);
  EXPECT_EQ(lookup.Poll(0, t0 + milliseconds(500)), std::nullopt);
  EXPECT_EQ(lookup.endpoint(0), "tcp://127.0.0.1:7");
  EXPECT_EQ(lookup.interval_ms(0), 1000);
  store.entries[0] = "inproc://server-0";  // not reachable from another process
  EXPECT_EQ(lookup.Poll(0, t0 + milliseconds(1500)), std::nullopt);
  EXPECT_EQ(lookup.interval_ms(0), 2000);
  store.entries[0] = "tcp://127.0.0.1:9";
  EXPECT_EQ(lookup.Poll(0, t0 + milliseconds(3500)), std::optional<std::string>("tcp://127.0.0.1:9"));
  EXPECT_EQ(store.reads[0], 3);
}

TEST(ServerLookupTest, ReadsADirectoryRendezvous) {
  const testing::ScopedTempDir tmp;
  const std::string& dir = tmp.path();
  auto writer = Rendezvous::Open("file:" + dir);
  ASSERT_TRUE(writer.ok());
  ASSERT_TRUE((*writer)->Set(RendezvousKey{"job", 2, ServerEntryName(0)}, "tcp://127.0.0.1:1", 1000).ok());
  auto reader = Rendezvous::Open("file:" + dir);
  ASSERT_TRUE(reader.ok());
  auto lookup = ServerLookup::FromRendezvous(std::move(*reader), "job", 2, {"tcp://127.0.0.1:1", "tcp://127.0.0.1:2"},
                                             TestOptions());
  const Clock::time_point t0 = Clock::now();
  EXPECT_EQ(lookup->Poll(0, t0), std::nullopt);
  EXPECT_EQ(lookup->Poll(0, t0 + milliseconds(500)), std::nullopt);
  ASSERT_TRUE((*writer)->Set(RendezvousKey{"job", 2, ServerEntryName(0)}, "tcp://127.0.0.1:6000", 1000).ok());
  EXPECT_EQ(lookup->Poll(0, t0 + milliseconds(1000)), std::optional<std::string>("tcp://127.0.0.1:6000"));
  // Shard 1 has no entry (its server removed it): the endpoint stays.
  EXPECT_EQ(lookup->Poll(1, t0), std::nullopt);
  EXPECT_EQ(lookup->Poll(1, t0 + milliseconds(500)), std::nullopt);
  EXPECT_EQ(lookup->endpoint(1), "tcp://127.0.0.1:2");
  EXPECT_EQ(lookup->reads(), 3u);
}

}  // namespace
}  // namespace tether
