// Membership without sockets: the HELLO checks (each refusal's words), the
// wait for worker 0, one connection per rank, joins and rejoins at the
// slowest clock, the barrier's release, held BYEs, silence and the startup
// deadline, with exact counts.
#include "server/membership.h"

#include <gtest/gtest.h>

#include "server/testing/recording_outbox.h"

namespace tether {
namespace {

using testing::RecordingOutbox;
using Clock = std::chrono::steady_clock;

MembershipOptions Options(int initial = 2, int max = 4) {
  MembershipOptions o;
  o.shard = 1;
  o.num_shards = 2;
  o.job_id = "job";
  o.generation = 3;
  o.initial_workers = initial;
  o.max_workers = max;
  o.startup_timeout_ms = 1000;
  o.worker_timeout_ms = 5000;
  o.liveness_timeout_ms = 700;
  return o;
}

Message Hello(int rank) {
  Message m;
  m.header.set_type(HELLO);
  m.header.set_sender_rank(rank);
  m.header.set_request_id(100 + rank);
  m.header.set_protocol_version(kProtocolVersion);
  m.header.mutable_hello()->set_job_id("job");
  m.header.mutable_hello()->set_generation(3);
  m.header.mutable_hello()->set_shard(1);
  m.header.mutable_hello()->set_num_shards(2);
  m.header.mutable_hello()->set_staleness(2);
  return m;
}

class MembershipTest : public ::testing::Test {
 protected:
  MembershipTest() : clocks_(2, 2), members_(Options(), &clocks_, &stats_, &out_) {
    members_.set_endpoint("tcp://127.0.0.1:5555");
  }
  // A HELLO checked and admitted (tables defined).
  Membership::Admission Join(int rank, const std::string& identity, int64_t resume_clock = -1) {
    Message m = Hello(rank);
    members_.EnsureSlot(rank);
    EXPECT_EQ(members_.Check(identity, &m, /*tables_defined=*/true), Membership::Hello::kAdmit);
    return members_.Admit(rank, identity, resume_clock);
  }
  std::string Refusal(Message& m) {
    members_.EnsureSlot(m.header.sender_rank());
    EXPECT_EQ(members_.Check("w", &m, true), Membership::Hello::kRefused);
    return out_.last().header.error_reply().error();
  }

  ClockTracker clocks_;
  ServerStats stats_;
  RecordingOutbox out_;
  Membership members_;
};

TEST_F(MembershipTest, AHelloOfAnotherJobShardOrSettingIsRefusedNamingBoth) {
  Message m = Hello(0);
  m.header.set_protocol_version(kProtocolVersion + 1);
  EXPECT_NE(Refusal(m).find("protocol version differs: worker 0 speaks version"), std::string::npos);
  m = Hello(0);
  m.header.mutable_hello()->set_generation(4);
  EXPECT_EQ(Refusal(m), "[test] job differs: worker 0 is of job 'job' generation 4, server 1 serves job 'job' "
                        "generation 3 (cluster.job_id / cluster.generation, or the config's name)");
  m = Hello(0);
  m.header.mutable_hello()->set_shard(0);
  EXPECT_EQ(Refusal(m), "[test] server tcp://127.0.0.1:5555 is shard 1 of 2 but worker 0 lists it as shard 0 of 2 "
                        "in --server_addresses");
  m = Hello(0);
  m.header.mutable_hello()->set_consistency_model(AVERAGE);
  EXPECT_NE(Refusal(m).find("consistency model differs: worker 0 trains with AVERAGE, server 1 with SSP"),
            std::string::npos);
  m = Hello(0);
  m.header.mutable_hello()->set_staleness(0);
  EXPECT_NE(Refusal(m).find("staleness differs: worker 0 has"), std::string::npos);
  // The first HELLO that carries the data mode and epochs sets them.
  m = Hello(0);
  m.header.mutable_hello()->set_data_on_demand(true);
  m.header.mutable_hello()->set_train_epochs(5);
  EXPECT_EQ(members_.Check("w0", &m, true), Membership::Hello::kAdmit);
  m = Hello(1);
  m.header.mutable_hello()->set_data_on_demand(false);
  EXPECT_NE(Refusal(m).find("train.data_on_demand differs: worker 1 trains its static split, the job's workers so "
                            "far draws its rows on demand"),
            std::string::npos);
  m = Hello(1);
  m.header.mutable_hello()->set_train_epochs(4);
  EXPECT_NE(Refusal(m).find("train.epochs differs: worker 1 trains 4 epoch(s), the job's workers so far 5"),
            std::string::npos);
  EXPECT_EQ(out_.sent.size(), 7u);
  for (const auto& s : out_.sent) EXPECT_EQ(s.header.type(), ERROR_REPLY);
}

// A HELLO of protocol version 3 carries no body (its fields sit at numbers
// version 4 reserves): the version is checked first, and the refusal names
// both versions, in the body and at the error's old field number.
TEST_F(MembershipTest, AHelloOfTheOldProtocolIsRefusedNamingBothVersions) {
  Message m = Hello(0);
  m.header.clear_body();
  m.header.set_protocol_version(3);
  const std::string want = "[test] protocol version differs: worker 0 speaks version 3, server 1 speaks version " +
                           std::to_string(kProtocolVersion) + " (run the same Tether build on both sides)";
  EXPECT_EQ(Refusal(m), want);
  MessageHeader without_body = out_.last().header;
  without_body.clear_body();
  EXPECT_EQ(ErrorText(without_body), want);
  EXPECT_EQ(members_.InitialRanksRefused(), 1);
}

TEST_F(MembershipTest, OtherRanksWaitForWorkerZerosHello) {
  Message m1 = Hello(1);
  members_.EnsureSlot(1);
  EXPECT_EQ(members_.Check("w1", &m1, /*tables_defined=*/false), Membership::Hello::kWaiting);
  EXPECT_TRUE(members_.Waiting(1));
  EXPECT_TRUE(out_.sent.empty());
  Message m0 = Hello(0);
  EXPECT_EQ(members_.Check("w0", &m0, false), Membership::Hello::kAdmit);
  auto waiting = members_.TakeWaiting();
  ASSERT_EQ(waiting.size(), 1u);
  EXPECT_EQ(waiting[0].first, "w1");
  EXPECT_EQ(waiting[0].second.header.request_id(), 101u);
  EXPECT_FALSE(members_.Waiting(1));
}

TEST_F(MembershipTest, ASecondLiveConnectionForARankIsRefusedAndARestartedOneRejoins) {
  Join(0, "w0-a");
  Join(1, "w1");
  clocks_.Advance(0, 4);
  clocks_.Advance(1, 3);
  Message again = Hello(0);
  EXPECT_EQ(members_.Check("w0-b", &again, true), Membership::Hello::kRefused);
  EXPECT_NE(out_.last().header.error_reply().error().find("worker 0 is already connected to server 1 from another connection that "
                                            "is still live"),
            std::string::npos);
  EXPECT_NE(out_.last().header.error_reply().error().find("cluster.liveness_timeout_ms=700"), std::string::npos);
  // Once the old connection is gone, the new process rejoins at the
  // slowest clock of the others, told where it was.
  out_.gone.insert("w0-a");
  const Membership::Admission a = Join(0, "w0-b");
  EXPECT_TRUE(a.rejoined);
  EXPECT_EQ(a.start_clock, 3);
  EXPECT_EQ(a.rejoin_clock, 4);
  EXPECT_EQ(stats_.workers_rejoined, 1u);
  EXPECT_EQ(members_.worker(0).identity, "w0-b");
  EXPECT_EQ(members_.worker(0).joined_clock, 3);
}

TEST_F(MembershipTest, JoinersStartAtTheSlowestCountingClockAndCount) {
  Join(0, "w0", /*resume_clock=*/10);
  Join(1, "w1", 10);
  EXPECT_EQ(members_.worker(1).joined_clock, 10);
  clocks_.Advance(0, 14);
  clocks_.Advance(1, 12);
  const Membership::Admission a = Join(3, "w3", 10);
  EXPECT_FALSE(a.rejoined);
  EXPECT_EQ(a.start_clock, 12);
  EXPECT_EQ(stats_.workers_joined, 1u);
  EXPECT_EQ(members_.slots(), 4);
  EXPECT_TRUE(members_.Member(3));
  EXPECT_FALSE(members_.Member(2));  // a slot skipped over
  EXPECT_EQ(members_.StatsRanks(), 4);
  members_.Welcome("w3", Hello(3).header, a, 4096);
  EXPECT_EQ(out_.last().header.type(), HELLO_REPLY);
  EXPECT_EQ(out_.last().header.hello_reply().start_clock(), 12);
  EXPECT_EQ(out_.last().header.min_clock(), 12);
  EXPECT_EQ(out_.last().header.hello_reply().key_list_cache_bytes(), 4096u);
  EXPECT_FALSE(out_.last().header.hello_reply().has_rejoin_clock());
}

TEST_F(MembershipTest, TheBarrierIsReleasedOnceEveryMemberIsThereOrGone) {
  Join(0, "w0");
  Join(1, "w1");
  Join(2, "w2");
  MessageHeader b;
  b.set_type(BARRIER);
  b.mutable_barrier()->set_samples(70);
  b.set_request_id(9);
  members_.Arrive(1, "w1", b);
  members_.ReleaseBarrier(nullptr);
  EXPECT_TRUE(out_.sent.empty());  // 0 and 2 still train
  members_.Leave(2);
  members_.AnswerBye(2, "w2", b);  // left early: answered at once
  ASSERT_EQ(out_.sent.size(), 1u);
  EXPECT_EQ(out_.last().header.type(), BYE_REPLY);
  b.mutable_barrier()->set_samples(30);
  members_.Arrive(0, "w0", b);
  members_.ReleaseBarrier(nullptr);
  ASSERT_EQ(out_.sent.size(), 3u);
  for (size_t i = 1; i < 3; ++i) {
    EXPECT_EQ(out_.sent[i].header.type(), BARRIER_REPLY);
    EXPECT_EQ(out_.sent[i].header.barrier_reply().total_samples(), 100u);
    EXPECT_FALSE(out_.sent[i].header.barrier_reply().has_evaluator_rank());  // no coordinator here
  }
  // A finished worker's BYE waits for the job's outcome.
  members_.Leave(0);
  members_.AnswerBye(0, "w0", b);
  EXPECT_EQ(out_.sent.size(), 3u);
  EXPECT_EQ(members_.AnswerHeldByes(Status::Unavailable("the job failed")), 1);
  EXPECT_EQ(out_.last().header.type(), ERROR_REPLY);
  EXPECT_EQ(out_.last().header.error_reply().error(), "the job failed");
  EXPECT_FALSE(members_.JobFinished());  // rank 2 left before finishing
}

TEST_F(MembershipTest, TheEvaluatorIsTheCoordinatorsToFix) {
  RecordingOutbox coordinator_out;
  CoordinatorOptions o;
  o.initial_workers = 2;
  o.max_workers = 4;
  auto coordinator = MakeLocalCoordinator(o, &coordinator_out);
  Join(0, "w0");
  Join(1, "w1");
  MessageHeader b;
  b.set_type(BARRIER);
  members_.Arrive(1, "w1", b);
  members_.Leave(0);
  members_.ReleaseBarrier(coordinator.get());
  EXPECT_EQ(out_.last().header.barrier_reply().evaluator_rank(), 1);
  EXPECT_EQ(coordinator->Evaluator(0), 1);  // fixed by the first release
}

TEST_F(MembershipTest, ASilentWorkerIsRemovedAndToldOrFailsTheJob) {
  Join(0, "w0");
  Join(1, "w1");
  clocks_.Advance(0, 2);
  clocks_.Advance(1, 6);
  const auto later = Clock::now() + std::chrono::seconds(60);
  members_.Seen(0);
  StatusOr<Membership::Silent> s = members_.NextSilent(Clock::now());
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->rank, -1);  // nobody silent yet
  s = members_.NextSilent(later);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->rank, 0);
  EXPECT_TRUE(members_.worker(0).dead);
  EXPECT_EQ(out_.last().header.type(), REMOVED);
  EXPECT_NE(out_.last().header.removed().reason().find("worker 0 removed: silent for"), std::string::npos);
  EXPECT_TRUE(members_.RemoveSilent(*s));  // the slowest left: min clock 2 → 6
  EXPECT_EQ(clocks_.min_clock(), 6);
  EXPECT_EQ(stats_.workers_timed_out, 1u);
  s = members_.NextSilent(later);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->rank, 1);
  EXPECT_EQ(members_.Removed(), "0, 1");
  EXPECT_TRUE(members_.AllGone());

  ClockTracker clocks(1, 0);
  MembershipOptions o = Options(1, 1);
  o.on_worker_timeout = FAIL_JOB;
  Membership strict(o, &clocks, &stats_, &out_);
  Message m = Hello(0);
  m.header.mutable_hello()->set_staleness(0);
  ASSERT_EQ(strict.Check("w0", &m, true), Membership::Hello::kAdmit);
  strict.Admit(0, "w0", -1);
  const StatusOr<Membership::Silent> fail = strict.NextSilent(later);
  ASSERT_FALSE(fail.ok());
  EXPECT_EQ(fail.status().code(), Status::Code::kUnavailable);
  EXPECT_NE(fail.status().message().find("on_worker_timeout: FAIL_JOB"), std::string::npos);
}

TEST_F(MembershipTest, TheStartupDeadlineNamesTheRanksMissingAndWhy) {
  Message m = Hello(1);
  m.header.mutable_hello()->set_generation(9);
  Refusal(m);
  Join(0, "w0");
  const auto t0 = Clock::now();
  ASSERT_TRUE(members_.CheckStartup(true, t0).ok());
  ASSERT_TRUE(members_.CheckStartup(true, t0 + std::chrono::milliseconds(900)).ok());
  const Status st = members_.CheckStartup(true, t0 + std::chrono::milliseconds(1100));
  EXPECT_EQ(st.code(), Status::Code::kDeadlineExceeded);
  EXPECT_NE(st.message().find("the job cannot run: worker 1 (refused: job differs: worker 1 is of job 'job' "
                              "generation 9"),
            std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("cluster.startup_timeout_ms=1000"), std::string::npos);
  EXPECT_EQ(members_.MissingInitial(), 1);
  EXPECT_EQ(members_.InitialRanksRefused(), 1);
}

TEST(HandshakeFailuresTest, CountsEveryFailureAndLogsAtPowersOfTen) {
  HandshakeFailures f;
  for (int i = 0; i < 12; ++i) f.Record(ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL, 0x10000003, "tcp://x", "[test] ");
  f.Record(ZMQ_EVENT_HANDSHAKE_FAILED_AUTH, 400, "tcp://x", "[test] ");
  EXPECT_EQ(f.refused(), 13u);
  EXPECT_EQ(f.failures(), 12u);  // refused keys are the ZAP handler's to log
}

}  // namespace
}  // namespace tether
