#include "server/reply_cache.h"

#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

namespace tether {
namespace {

using Verdict = ReplyCache::Verdict;

// A request id as a worker makes them: sequence << 32 | slot.
uint64_t Id(uint64_t sequence, uint32_t slot = 3) { return (sequence << 32) | slot; }

MessageHeader Request(MessageType type, uint64_t id, int rank = 1) {
  MessageHeader h;
  h.set_type(type);
  h.set_request_id(id);
  h.set_sender_rank(rank);
  return h;
}

Message Reply(MessageType type, uint64_t id, const std::string& keys = "", const std::string& values = "") {
  Message m;
  m.header.set_type(type);
  m.header.set_request_id(id);
  m.header.set_min_clock(7);
  m.keys = zmq::message_t(keys.data(), keys.size());
  m.values = zmq::message_t(values.data(), values.size());
  return m;
}

std::string Bytes(const zmq::message_t& f) { return std::string(static_cast<const char*>(f.data()), f.size()); }

// Take() for a message whose verdict is not kResend (the reply is unused).
Verdict TakeIn(ReplyCache* cache, const std::string& identity, const MessageHeader& h) {
  Message unused;
  int rank = -1;
  return cache->Take(identity, h, &unused, &rank);
}

TEST(ReplyCacheTest, NewIdsAreHandledAndKeptInOrder) {
  ReplyCache cache;
  EXPECT_EQ(TakeIn(&cache, "w1", Request(HELLO, Id(1))), Verdict::kHandle);
  EXPECT_EQ(TakeIn(&cache, "w1", Request(PUSH, Id(2))), Verdict::kHandle);
  EXPECT_EQ(TakeIn(&cache, "w0", Request(PULL, Id(2))), Verdict::kHandle);  // ids are per connection
  EXPECT_EQ(cache.Identities(), (std::vector<std::string>{"w0", "w1"}));
  const std::vector<ReplyCache::KeptId> kept = cache.Kept("w1");
  ASSERT_EQ(kept.size(), 2u);
  EXPECT_EQ(kept[0].id, Id(1));
  EXPECT_EQ(kept[0].type, HELLO);
  EXPECT_EQ(kept[1].id, Id(2));
  EXPECT_FALSE(kept[1].answered);
  EXPECT_EQ(cache.stats().resent + cache.stats().dropped_pending + cache.stats().handled_again, 0u);
}

TEST(ReplyCacheTest, AnAnsweredRequestGetsItsReplyAgainUnstamped) {
  ReplyCache cache;
  ASSERT_EQ(TakeIn(&cache, "w1", Request(PUSH, Id(4))), Verdict::kHandle);
  Message sent = Reply(PUSH_REPLY, Id(4), std::string(16, 'k'), std::string(40, 'v'));
  cache.Sent("w1", sent, 1);
  EXPECT_EQ(cache.num_replies(), 1u);
  EXPECT_EQ(cache.reply_bytes(), sent.header.ByteSizeLong() + 16 + 40 + ReplyCache::kReplyOverheadBytes);
  for (int again = 1; again <= 2; ++again) {
    Message reply;
    int rank = -1;
    ASSERT_EQ(cache.Take("w1", Request(PUSH, Id(4)), &reply, &rank), Verdict::kResend);
    EXPECT_EQ(rank, 1);
    EXPECT_EQ(reply.header.type(), PUSH_REPLY);
    EXPECT_EQ(reply.header.request_id(), Id(4));
    EXPECT_EQ(reply.header.min_clock(), 7);
    EXPECT_FALSE(reply.header.has_server_incarnation());
    EXPECT_EQ(Bytes(reply.keys), std::string(16, 'k'));
    EXPECT_EQ(Bytes(reply.values), std::string(40, 'v'));
    EXPECT_EQ(cache.stats().resent, static_cast<uint64_t>(again));
  }
}

TEST(ReplyCacheTest, UnansweredRequestsAreDroppedUntilAnswered) {
  ReplyCache cache;
  TakeIn(&cache, "w1", Request(PULL, Id(1)));     // deferred on the staleness bound
  TakeIn(&cache, "w1", Request(BARRIER, Id(2)));  // waits for the others
  TakeIn(&cache, "w1", Request(BYE, Id(3)));      // held until the job's outcome
  EXPECT_EQ(TakeIn(&cache, "w1", Request(PULL, Id(1))), Verdict::kDropPending);
  EXPECT_EQ(TakeIn(&cache, "w1", Request(BARRIER, Id(2))), Verdict::kDropPending);
  EXPECT_EQ(TakeIn(&cache, "w1", Request(BYE, Id(3))), Verdict::kDropPending);
  EXPECT_EQ(cache.stats().dropped_pending, 3u);
  // Answered: the read is handled again and never copied; the barrier's
  // reply is sent again.
  cache.Sent("w1", Reply(PULL_REPLY, Id(1), "", std::string(400, 'v')), 1);
  cache.Sent("w1", Reply(BARRIER_REPLY, Id(2)), 1);
  EXPECT_EQ(cache.num_replies(), 1u);
  EXPECT_EQ(TakeIn(&cache, "w1", Request(PULL, Id(1))), Verdict::kHandleAgain);
  EXPECT_EQ(TakeIn(&cache, "w1", Request(BARRIER, Id(2))), Verdict::kResend);
  EXPECT_EQ(cache.stats().handled_again, 1u);
  EXPECT_EQ(cache.stats().resent, 1u);
  const std::vector<ReplyCache::KeptId> kept = cache.Kept("w1");
  ASSERT_EQ(kept.size(), 3u);
  EXPECT_TRUE(kept[0].answered);
  EXPECT_FALSE(kept[0].has_reply);
  EXPECT_TRUE(kept[1].has_reply);
  EXPECT_FALSE(kept[2].answered);
}

TEST(ReplyCacheTest, StatsIsAReadAndAnErrorReplyIsCached) {
  ReplyCache cache;
  TakeIn(&cache, "w1", Request(STATS, Id(1)));
  cache.Sent("w1", Reply(STATS_REPLY, Id(1)), 1);
  TakeIn(&cache, "w1", Request(PUSH, Id(2)));
  cache.Sent("w1", Reply(ERROR_REPLY, Id(2)), 1);  // a refused push
  EXPECT_EQ(TakeIn(&cache, "w1", Request(STATS, Id(1))), Verdict::kHandleAgain);
  Message reply;
  int rank = -1;
  ASSERT_EQ(cache.Take("w1", Request(PUSH, Id(2)), &reply, &rank), Verdict::kResend);
  EXPECT_EQ(reply.header.type(), ERROR_REPLY);
}

TEST(ReplyCacheTest, ClocksAndAbortsWithoutReplyWereApplied) {
  ReplyCache cache;
  TakeIn(&cache, "w1", Request(CLOCK, Id(1)));  // a shard that answers no CLOCK
  TakeIn(&cache, "w1", Request(ABORT, Id(2)));
  TakeIn(&cache, "w1", Request(CLOCK, Id(3)));  // shard 0 answers its CLOCKs
  cache.Sent("w1", Reply(CLOCK_REPLY, Id(3)), 1);
  EXPECT_EQ(TakeIn(&cache, "w1", Request(CLOCK, Id(1))), Verdict::kDropApplied);
  EXPECT_EQ(TakeIn(&cache, "w1", Request(ABORT, Id(2))), Verdict::kDropApplied);
  EXPECT_EQ(TakeIn(&cache, "w1", Request(CLOCK, Id(3))), Verdict::kResend);
  EXPECT_EQ(cache.stats().dropped_applied, 2u);
  EXPECT_EQ(cache.stats().dropped_pending, 0u);
  EXPECT_EQ(cache.DescribeSentAgain(),
            "3 message(s) sent again: 1 answered from the reply cache, 0 read(s) handled again, 0 dropped while "
            "their answer was still to come, 2 dropped as applied before (no reply kept), 0 dropped as older than "
            "the request ids kept");
  EXPECT_EQ(ReplyCache().DescribeSentAgain(), "");
}

TEST(ReplyCacheTest, UntrackedMessagesAreAlwaysHandledAndNotKept) {
  ReplyCache cache;
  TakeIn(&cache, "w1", Request(PUSH, Id(9)));
  EXPECT_EQ(TakeIn(&cache, "w1", Request(HEARTBEAT, Id(2))), Verdict::kHandle);
  EXPECT_EQ(TakeIn(&cache, "w1", Request(PUSH, 0)), Verdict::kHandle);
  EXPECT_EQ(TakeIn(&cache, "", Request(SHARD_DECISION, Id(1))), Verdict::kHandle);
  EXPECT_EQ(TakeIn(&cache, "", Request(PUSH, Id(1))), Verdict::kHandle);
  EXPECT_EQ(TakeIn(&cache, "r1", Request(REPLICATE, Id(1))), Verdict::kHandle);
  EXPECT_EQ(TakeIn(&cache, "r1", Request(REPLICATE_ACK, Id(1))), Verdict::kHandle);
  EXPECT_EQ(TakeIn(&cache, "r1", Request(REPLICA_HELLO, Id(1))), Verdict::kHandle);
  EXPECT_EQ(cache.Identities(), (std::vector<std::string>{"w1"}));
  EXPECT_EQ(cache.Kept("w1").size(), 1u);
  // A reply to an id the cache never took in changes nothing.
  cache.Sent("w1", Reply(PUSH_REPLY, Id(5)), 1);
  cache.Sent("w7", Reply(PUSH_REPLY, Id(9)), 1);
  EXPECT_EQ(cache.num_replies(), 0u);
}

TEST(ReplyCacheTest, IdsPastTheBoundAreForgottenWithTheirReplies) {
  ReplyCacheOptions o;
  o.ids_per_identity = 4;
  ReplyCache cache(o);
  for (uint64_t s = 1; s <= 6; ++s) {
    ASSERT_EQ(TakeIn(&cache, "w1", Request(PUSH, Id(s))), Verdict::kHandle);
    cache.Sent("w1", Reply(PUSH_REPLY, Id(s)), 1);
  }
  EXPECT_EQ(cache.num_replies(), 4u);
  EXPECT_EQ(cache.Kept("w1").front().id, Id(3));
  EXPECT_EQ(TakeIn(&cache, "w1", Request(PUSH, Id(1))), Verdict::kDropForgotten);
  EXPECT_EQ(TakeIn(&cache, "w1", Request(PUSH, Id(2))), Verdict::kDropForgotten);
  EXPECT_EQ(TakeIn(&cache, "w1", Request(PUSH, Id(3))), Verdict::kResend);
  // An id between two kept ones that this connection never used.
  EXPECT_EQ(TakeIn(&cache, "w1", Request(PUSH, Id(4, 9))), Verdict::kDropForgotten);
  EXPECT_EQ(cache.stats().dropped_forgotten, 3u);
  // A late reply to a forgotten id is not kept.
  cache.Sent("w1", Reply(PUSH_REPLY, Id(1)), 1);
  EXPECT_EQ(cache.num_replies(), 4u);
}

TEST(ReplyCacheTest, RepliesPastTheByteBoundAreDroppedOldestFirst) {
  const std::string values(100, 'v');
  const uint64_t one = Reply(PUSH_REPLY, Id(1), "", values).header.ByteSizeLong() + values.size() +
                       ReplyCache::kReplyOverheadBytes;
  ReplyCacheOptions o;
  o.reply_bytes = 2 * one;
  ReplyCache cache(o);
  for (uint64_t s = 1; s <= 3; ++s) {
    TakeIn(&cache, "w1", Request(PUSH, Id(s)));
    cache.Sent("w1", Reply(PUSH_REPLY, Id(s), "", values), 1);
  }
  EXPECT_EQ(cache.num_replies(), 2u);
  EXPECT_EQ(cache.reply_bytes(), 2 * one);
  EXPECT_EQ(cache.stats().replies_evicted, 1u);
  EXPECT_EQ(TakeIn(&cache, "w1", Request(PUSH, Id(1))), Verdict::kDropApplied);
  EXPECT_EQ(TakeIn(&cache, "w1", Request(PUSH, Id(2))), Verdict::kResend);
  EXPECT_EQ(TakeIn(&cache, "w1", Request(PUSH, Id(3))), Verdict::kResend);
  // A reply larger than the bound alone is not kept.
  TakeIn(&cache, "w1", Request(PUSH, Id(4)));
  cache.Sent("w1", Reply(PUSH_REPLY, Id(4), "", std::string(3 * one, 'v')), 1);
  EXPECT_LE(cache.reply_bytes(), o.reply_bytes);
  EXPECT_EQ(TakeIn(&cache, "w1", Request(PUSH, Id(4))), Verdict::kDropApplied);
}

TEST(ReplyCacheTest, TheConnectionHeardFromLongestAgoIsForgottenFirst) {
  ReplyCacheOptions o;
  o.identities = 2;
  ReplyCache cache(o);
  TakeIn(&cache, "a", Request(PUSH, Id(1)));
  cache.Sent("a", Reply(PUSH_REPLY, Id(1)), 0);
  TakeIn(&cache, "b", Request(PUSH, Id(1)));
  cache.Sent("b", Reply(PUSH_REPLY, Id(1)), 1);
  TakeIn(&cache, "a", Request(PUSH, Id(2)));  // a is heard from again
  TakeIn(&cache, "c", Request(PUSH, Id(1)));
  EXPECT_EQ(cache.Identities(), (std::vector<std::string>{"a", "c"}));
  EXPECT_EQ(cache.stats().identities_evicted, 1u);
  EXPECT_EQ(cache.num_replies(), 1u);  // b's went with it
  EXPECT_EQ(TakeIn(&cache, "a", Request(PUSH, Id(1))), Verdict::kResend);
}

TEST(ReplyCacheTest, TheFirstReplyToAnIdIsTheOneKept) {
  ReplyCache cache;
  TakeIn(&cache, "w1", Request(CHECKPOINT, Id(1)));
  cache.Sent("w1", Reply(CHECKPOINT_REPLY, Id(1), "", "xyz"), 1);
  cache.Sent("w1", Reply(ERROR_REPLY, Id(1)), 1);
  EXPECT_EQ(cache.num_replies(), 1u);
  Message reply;
  int rank = -1;
  ASSERT_EQ(cache.Take("w1", Request(CHECKPOINT, Id(1)), &reply, &rank), Verdict::kResend);
  EXPECT_EQ(reply.header.type(), CHECKPOINT_REPLY);
  EXPECT_EQ(Bytes(reply.values), "xyz");
}

TEST(ReplyCacheTest, TheSameInputsMakeTheSameCache) {
  ReplyCacheOptions o;
  o.ids_per_identity = 3;
  ReplyCache a(o), b(o);
  for (ReplyCache* c : {&a, &b}) {
    for (uint64_t s = 1; s <= 5; ++s) {
      TakeIn(c, s % 2 ? "w0" : "w1", Request(s % 3 ? PUSH : PULL, Id(s)));
      c->Sent(s % 2 ? "w0" : "w1", Reply(s % 3 ? PUSH_REPLY : PULL_REPLY, Id(s), "", std::to_string(s)), 0);
    }
  }
  ASSERT_EQ(a.Identities(), b.Identities());
  for (const std::string& identity : a.Identities()) EXPECT_EQ(a.Kept(identity), b.Kept(identity));
  EXPECT_EQ(a.reply_bytes(), b.reply_bytes());
}

// A cache past each of its bounds: ids forgotten, replies evicted, a
// connection forgotten, reads, unanswered requests, messages sent again.
ReplyCacheOptions SmallOptions() {
  ReplyCacheOptions o;
  o.ids_per_identity = 3;
  o.identities = 2;
  o.reply_bytes = 3 * (Reply(PUSH_REPLY, Id(1), "", std::string(40, 'v')).header.ByteSizeLong() + 40 +
                       ReplyCache::kReplyOverheadBytes);
  return o;
}

void Fill(ReplyCache* c) {
  for (uint64_t s = 1; s <= 5; ++s) {
    TakeIn(c, "a", Request(s == 3 ? PULL : PUSH, Id(s)));
    c->Sent("a", Reply(s == 3 ? PULL_REPLY : PUSH_REPLY, Id(s), "k", std::string(40, 'v')), 0);
  }
  TakeIn(c, "b", Request(PUSH, Id(1), 1));
  c->Sent("b", Reply(PUSH_REPLY, Id(1), "", std::string(40, 'w')), 1);
  TakeIn(c, "b", Request(CLOCK, Id(2), 1));    // applied, no reply
  TakeIn(c, "b", Request(BARRIER, Id(3), 1));  // still to be answered
  TakeIn(c, "c", Request(PUSH, Id(1), 2));     // forgets "a", heard from longest ago
  c->Sent("c", Reply(PUSH_REPLY, Id(1), "", std::string(40, 'c')), 2);
  TakeIn(c, "b", Request(PUSH, Id(1), 1));     // sent again
  TakeIn(c, "b", Request(BARRIER, Id(3), 1));
}

ReplyCacheState Saved(const ReplyCache& c) {
  ReplyCacheState s;
  c.SaveState(&s);
  return s;
}

TEST(ReplyCacheStateTest, ARestoredCacheIsTheSameAndBehavesTheSame) {
  ReplyCache a(SmallOptions());
  Fill(&a);
  ASSERT_EQ(a.stats().identities_evicted, 1u);
  ASSERT_GT(a.stats().replies_evicted, 0u);
  const ReplyCacheState state = Saved(a);
  EXPECT_EQ(state.peers_size(), 2);
  ReplyCache b(SmallOptions());
  ASSERT_TRUE(b.RestoreState(state).ok());
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(state, Saved(b)));
  EXPECT_EQ(a.reply_bytes(), b.reply_bytes());
  EXPECT_EQ(a.DescribeSentAgain(), b.DescribeSentAgain());
  // The same messages get the same verdicts and replies, and the bounds
  // evict the same replies and connections on both.
  const std::vector<std::pair<std::string, MessageHeader>> more = {
      {"b", Request(PUSH, Id(1), 1)}, {"b", Request(BARRIER, Id(3), 1)}, {"b", Request(CLOCK, Id(2), 1)},
      {"c", Request(PUSH, Id(1), 2)}, {"a", Request(PUSH, Id(1))},       {"d", Request(PUSH, Id(1), 3)},
      {"c", Request(PUSH, Id(2), 2)}, {"c", Request(PUSH, Id(3), 2)},    {"c", Request(PUSH, Id(2), 2)},
      {"c", Request(PUSH, Id(4), 2)}};
  for (const auto& [identity, h] : more) {
    Message ra, rb;
    int rank_a = -1, rank_b = -1;
    const Verdict va = a.Take(identity, h, &ra, &rank_a), vb = b.Take(identity, h, &rb, &rank_b);
    EXPECT_EQ(va, vb) << identity << " " << h.request_id();
    EXPECT_EQ(ra.header.SerializeAsString(), rb.header.SerializeAsString());
    EXPECT_EQ(Bytes(ra.values), Bytes(rb.values));
    EXPECT_EQ(rank_a, rank_b);
    if (va == Verdict::kHandle) {
      a.Sent(identity, Reply(PUSH_REPLY, h.request_id(), "", std::string(40, 'x')), h.sender_rank());
      b.Sent(identity, Reply(PUSH_REPLY, h.request_id(), "", std::string(40, 'x')), h.sender_rank());
    }
  }
  EXPECT_EQ(a.Identities(), (std::vector<std::string>{"c", "d"}));
  EXPECT_EQ(a.stats().resent, 4u);
  EXPECT_EQ(a.stats().identities_evicted, 4u);
  EXPECT_EQ(a.stats().replies_evicted, 2u);  // one in Fill, one above (c's fourth reply)
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(Saved(a), Saved(b)));
}

TEST(ReplyCacheStateTest, AnEmptyCacheRoundTrips) {
  ReplyCache a, b;
  ASSERT_TRUE(b.RestoreState(Saved(a)).ok());
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(Saved(a), Saved(b)));
  EXPECT_EQ(TakeIn(&b, "w", Request(PUSH, Id(1))), Verdict::kHandle);
}

// Each kind of state a cache with these options cannot hold is refused
// with DataLoss naming the field.
TEST(ReplyCacheStateTest, MalformedStatesAreRefusedNamingTheField) {
  ReplyCache filled(SmallOptions());
  Fill(&filled);
  const ReplyCacheState good = Saved(filled);
  ASSERT_GT(good.replies_size(), 1);
  ASSERT_EQ(good.peers(0).identity(), "b");
  ASSERT_EQ(good.peers(0).entries(0).reply_seq(), good.replies(0).seq());
  const std::vector<std::pair<std::string, std::function<void(ReplyCacheState*)>>> cases = {
      {"replies.next_seq is 0", [](ReplyCacheState* s) { s->set_next_seq(0); }},
      {"replies.peers holds 3 connections, more than the 2 kept",
       [](ReplyCacheState* s) { s->add_peers()->set_identity("z"); }},
      {"replies.peers[1].identity is not after the one before it",
       [](ReplyCacheState* s) { s->mutable_peers(1)->set_identity("b"); }},
      {"replies.peers[0].identity is empty", [](ReplyCacheState* s) { s->mutable_peers(0)->clear_identity(); }},
      {"replies.peers[0].entries holds 4 ids, not 1 to 3",
       [](ReplyCacheState* s) { s->mutable_peers(0)->add_entries()->set_id(Id(9)); }},
      {"replies.peers[0].last_take ", [](ReplyCacheState* s) { s->mutable_peers(0)->set_last_take(1000); }},
      {"replies.peers[0].entries[1].id ",
       [](ReplyCacheState* s) { s->mutable_peers(0)->mutable_entries(1)->set_id(Id(1)); }},
      {"replies.peers[0].entries[2].id ", [](ReplyCacheState* s) { s->mutable_peers(0)->set_max_id(Id(2)); }},
      {"replies.peers[0].entries[1].type is not a type of request the cache keeps",
       [](ReplyCacheState* s) { s->mutable_peers(0)->mutable_entries(1)->set_type(REPLICATE); }},
      {"replies.peers[0].entries[1].reply_seq ",
       [](ReplyCacheState* s) { s->mutable_peers(0)->mutable_entries(1)->set_reply_seq(s->next_seq()); }},
      {"replies.peers[0].entries[0].reply_seq ",
       [](ReplyCacheState* s) { s->mutable_peers(0)->mutable_entries(0)->set_answered(false); }},
      {"is named by another id too",
       [](ReplyCacheState* s) {
         s->mutable_peers(0)->mutable_entries(1)->set_reply_seq(s->peers(0).entries(0).reply_seq());
         s->mutable_peers(0)->mutable_entries(1)->set_answered(true);
       }},
      {"replies.replies holds ", [](ReplyCacheState* s) { s->mutable_replies()->RemoveLast(); }},
      {"replies.replies[0] (seq ", [](ReplyCacheState* s) { s->mutable_replies(0)->set_id(Id(7)); }},
      {"replies.replies[0] (seq ", [](ReplyCacheState* s) { s->mutable_replies(0)->set_identity("c"); }},
      {"replies.replies[1].seq ",
       [](ReplyCacheState* s) { s->mutable_replies(1)->set_seq(s->replies(0).seq()); }},
      {"replies.replies[0].header is not a reply header to request id",
       [](ReplyCacheState* s) { s->mutable_replies(0)->set_header("\xff\xff\xff"); }},
      {"replies.replies[0].rank -7 is not a rank", [](ReplyCacheState* s) { s->mutable_replies(0)->set_rank(-7); }},
      {"takes the cached replies past reply_bytes",
       [](ReplyCacheState* s) { s->mutable_replies(0)->set_values(std::string(1000, 'v')); }},
  };
  for (const auto& [want, mutate] : cases) {
    SCOPED_TRACE(want);
    ReplyCacheState bad = good;
    mutate(&bad);
    ReplyCache fresh(SmallOptions());
    const Status st = fresh.RestoreState(bad);
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.code(), Status::Code::kDataLoss);
    EXPECT_NE(st.message().find("shard state: "), std::string::npos) << st.message();
    EXPECT_NE(st.message().find(want), std::string::npos) << st.message();
  }
}

}  // namespace
}  // namespace tether
