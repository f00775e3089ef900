// A replicated shard's copy that claimed the shard takes in, again, the
// messages its workers send it once more (every one the former primary had
// not answered, byte-identical), and applies each of them once: its reply
// cache (server/reply_cache.h) answers them from the replies kept, drops
// those already applied or still waiting, and handles reads again.
//
// A real job trains on Bibtex with every shard's inputs recorded
// (tests/testing/recorded_job.h). Its shards run unreplicated: a replicated
// primary takes in the same messages, but holds its replies until a replica
// acknowledges them (server/replica_link.h), and none runs here. For each
// shard, two copies made with cluster.replicas = 1 replay the inputs: one
// every input once; the other the inputs up to a cut, then the pushes,
// pulls and clocks of the stretch before the cut a second time, in their
// order (as a worker sends its unanswered messages again), then the rest.
// Both end with the same tables, clocks, coordinator state and reply
// cache, and the verdicts on the messages sent again are exactly those
// their types and the shard call for.
#include <gtest/gtest.h>
#include <google/protobuf/util/message_differencer.h>

#include <string>
#include <vector>

#include "server/server.h"
#include "server/shard_input.h"
#include "tests/testing/recorded_job.h"
#include "tests/testing/temp_dir.h"

namespace tether {
namespace {

// The messages of [begin, end) sent again, by kind.
struct SentAgain {
  uint64_t pushes = 0, pulls = 0;
  uint64_t clocks_answered = 0;    // CLOCKs the shard answered (shard 0's, not parking)
  uint64_t clocks_unanswered = 0;  // CLOCKs no shard answers
};

// Replays the pushes, pulls and clocks of inputs [begin, end) into `copy`
// a second time, in their order.
SentAgain SendAgain(const std::vector<std::string>& inputs, size_t begin, size_t end, ServerShard* copy) {
  SentAgain again;
  for (size_t i = begin; i < end; ++i) {
    ShardInput in;
    if (!DecodeShardInput(inputs[i], "recorded input", &in).ok()) {
      ADD_FAILURE() << "input " << i << " does not decode";
      continue;
    }
    const MessageHeader& h = in.message.header;
    if (h.type() == PUSH) {
      ++again.pushes;
    } else if (h.type() == PULL) {
      ++again.pulls;
    } else if (h.type() == CLOCK) {
      const bool answered = copy->coordinator() != nullptr && !h.clock_report().has_parked();
      ++(answered ? again.clocks_answered : again.clocks_unanswered);
    } else {
      continue;  // answered long ago (or a heartbeat): a worker keeps no copy
    }
    const Status st = copy->Replay(in.identity, &in.message);
    EXPECT_TRUE(st.ok()) << "input " << i << " sent again: " << st.ToString();
  }
  return again;
}

TEST(ResendAfterClaimTest, MessagesSentAgainAreAppliedOnce) {
  const JobConfig primary = testing::SmallBibtexJob();
  testing::RecordedJob job = testing::RunRecordedJob(primary);
  for (const Status& st : job.workers) EXPECT_TRUE(st.ok()) << st.ToString();
  JobConfig c = primary;
  c.mutable_cluster()->set_replicas(1);
  testing::ScopedTempDir tmp;
  for (int s = 0; s < c.cluster().num_servers(); ++s) {
    const std::vector<std::string>& inputs = job.inputs[s];
    SCOPED_TRACE("shard " + std::to_string(s) + ", " + std::to_string(inputs.size()) + " inputs");
    ASSERT_GT(inputs.size(), 400u);
    // A stretch mid-training, longer than a worker's window of 64 requests.
    const size_t cut = inputs.size() / 2, from = cut - 150;
    ServerShard once(c, s), twice(c, s);
    ASSERT_TRUE(testing::ReplayInputs(inputs, 0, inputs.size(), s, &once));
    ASSERT_TRUE(testing::ReplayInputs(inputs, 0, cut, s, &twice));
    ASSERT_NE(twice.reply_cache(), nullptr);
    const ReplyCache::Stats before = twice.reply_cache()->stats();
    const uint64_t muted_before = twice.replies_muted();
    const SentAgain again = SendAgain(inputs, from, cut, &twice);
    const ReplyCache::Stats after = twice.reply_cache()->stats();
    EXPECT_GT(again.pushes, 20u);
    EXPECT_GT(again.pulls, 20u);
    EXPECT_GT(again.clocks_answered + again.clocks_unanswered, 5u);
    // Every push and every answered CLOCK gets its reply again, from the
    // cache; a CLOCK nobody answers is dropped; a pull is read again, or
    // dropped while it still waits on the staleness bound.
    EXPECT_EQ(after.resent - before.resent, again.pushes + again.clocks_answered);
    EXPECT_EQ(after.dropped_applied - before.dropped_applied, again.clocks_unanswered);
    EXPECT_EQ((after.handled_again - before.handled_again) + (after.dropped_pending - before.dropped_pending),
              again.pulls);
    EXPECT_EQ(after.dropped_forgotten, before.dropped_forgotten);
    EXPECT_EQ(after.replies_evicted, 0u);
    // One reply each for those sent again and those read again, no more.
    EXPECT_EQ(twice.replies_muted() - muted_before,
              (after.resent - before.resent) + (after.handled_again - before.handled_again));
    ASSERT_TRUE(testing::ReplayInputs(inputs, cut, inputs.size(), s, &twice));

    const std::string dir = tmp.File("shard" + std::to_string(s));
    const testing::ShardDigest a = testing::DigestShard(once, c, s, dir + "/once");
    const testing::ShardDigest b = testing::DigestShard(twice, c, s, dir + "/twice");
    EXPECT_GT(a.table_bytes, 0u);
    EXPECT_TRUE(a == b) << "tables " << a.tables << "/" << b.tables << ", min clock " << a.min_clock << "/"
                        << b.min_clock;
    EXPECT_EQ(once.stats().updates_applied, twice.stats().updates_applied);
    EXPECT_EQ(once.stats().pushes, twice.stats().pushes);
    if (once.coordinator() != nullptr && twice.coordinator() != nullptr) {
      EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(once.coordinator()->Snapshot(),
                                                                     twice.coordinator()->Snapshot()));
    }
    EXPECT_GT(testing::ExpectSameReplyCache(once, twice), 100u);
  }
}

TEST(ResendAfterClaimTest, UnreplicatedShardsKeepNoCache) {
  JobConfig c = testing::SmallBibtexJob();
  ServerShard shard(c, 0);
  EXPECT_EQ(shard.reply_cache(), nullptr);
  c.mutable_cluster()->set_replicas(1);
  ServerShard replicated(c, 0);
  ASSERT_NE(replicated.reply_cache(), nullptr);
  EXPECT_GE(replicated.reply_cache()->options().ids_per_identity, 512);
}

}  // namespace
}  // namespace tether
