// Membership without sockets: the HELLO checks (each refusal's words), the
// wait for worker 0, one connection per rank, joins and rejoins at the
// slowest clock, the barrier's release, held BYEs, silence and the startup
// deadline, with exact counts.
#include "server/membership.h"

#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include "proto/shard_state.pb.h"
#include "server/shard_input.h"
#include "server/testing/recording_outbox.h"
#include "tests/testing/log_capture.h"

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

// Workers started with another --checkpoint_dir: the first admitted
// worker's folder is the job's, and a worker with another, or none, is
// refused at HELLO naming both (not at the first checkpoint, mid-training).
TEST_F(MembershipTest, AHelloWithAnotherCheckpointFolderIsRefusedNamingBoth) {
  Message m = Hello(0);
  m.header.mutable_hello()->set_checkpoint_dir("/shared/ckA");
  EXPECT_EQ(members_.Check("w0", &m, true), Membership::Hello::kAdmit);
  m = Hello(1);
  m.header.mutable_hello()->set_checkpoint_dir("/shared/ckB");
  EXPECT_EQ(Refusal(m), "[test] checkpoint.dir differs: worker 1 writes its checkpoints to /shared/ckB, the job's "
                        "workers so far to /shared/ckA (give every worker the same --checkpoint_dir, as one path on "
                        "a shared file system: each checkpoint gathers every process's files in one folder)");
  m = Hello(1);
  m.header.mutable_hello()->set_checkpoint_dir("");
  EXPECT_NE(Refusal(m).find("checkpoint.dir differs: worker 1 writes no checkpoints, the job's workers so far to "
                            "/shared/ckA"),
            std::string::npos);
  m = Hello(1);  // a tool's client says nothing: not checked
  members_.EnsureSlot(1);
  EXPECT_EQ(members_.Check("w1", &m, true), Membership::Hello::kAdmit);
}

// Workers started by hand with other split files: the first HELLO that
// carries data digests sets them; a later one whose digest of a field both
// name differs is refused naming the field; one without digests (a tool's
// client) or naming other fields only is not compared.
TEST_F(MembershipTest, AWorkerReadingOtherDataIsRefusedNamingTheField) {
  const auto with = [](int rank, std::vector<std::pair<std::string, uint64_t>> digests) {
    Message m = Hello(rank);
    for (const auto& [field, digest] : digests) {
      DataDigest* d = m.header.mutable_hello()->add_data_digests();
      d->set_field(field);
      d->set_digest(digest);
    }
    return m;
  };
  Message m = with(0, {{"data.train_file", 11}, {"data.validation_split", 22}});
  members_.EnsureSlot(0);
  EXPECT_EQ(members_.Check("w0", &m, true), Membership::Hello::kAdmit);
  m = with(1, {{"data.train_file", 11}, {"data.validation_split", 23}});
  EXPECT_EQ(Refusal(m), "[test] the data differs: worker 1's 'data.validation_split' files are not the job's "
                        "(worker 0's, or the first admitted worker's: their sizes or contents differ; paths and "
                        "times are not compared): give every worker the same data files and split files");
  m = Hello(1);  // no digests
  EXPECT_EQ(members_.Check("w1", &m, true), Membership::Hello::kAdmit);
  m = with(1, {{"data.train_file", 11}, {"data.test_split", 99}});
  EXPECT_EQ(members_.Check("w1", &m, true), Membership::Hello::kAdmit);
  // A copy of the shard's state (a replica's) refuses the same HELLO.
  MembershipState state;
  members_.SaveState(&state, Clock::now());
  ASSERT_EQ(state.data_digests_size(), 2);
  EXPECT_EQ(state.data_digests(1).field(), "data.validation_split");
  EXPECT_EQ(state.data_digests(1).digest(), 22u);
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

TEST(MembershipStartupTest, TheStartupDeadlineNamesTheRanksMissingAndWhy) {
  ClockTracker clocks(3, 2);
  ServerStats stats;
  RecordingOutbox out;
  Membership members(Options(/*initial=*/3), &clocks, &stats, &out);
  Message m = Hello(1);
  m.header.mutable_hello()->set_generation(9);
  ASSERT_EQ(members.Check("w1-77-1", &m, true), Membership::Hello::kRefused);
  m = Hello(0);
  ASSERT_EQ(members.Check("w0", &m, true), Membership::Hello::kAdmit);
  members.Admit(0, "w0", -1);
  // Worker 2 may still come: the deadline, not the refusal, ends the wait.
  const auto t0 = Clock::now();
  ASSERT_TRUE(members.CheckStartup(true, t0).ok());
  ASSERT_TRUE(members.CheckStartup(true, t0 + std::chrono::milliseconds(900)).ok());
  const Status st = members.CheckStartup(true, t0 + std::chrono::milliseconds(1100));
  EXPECT_EQ(st.code(), Status::Code::kDeadlineExceeded);
  EXPECT_EQ(st.message(),
            "[test] the job cannot run: worker 1 (refused: job differs: worker 1 is of job 'job' generation 9, "
            "server 1 serves job 'job' generation 3 (cluster.job_id / cluster.generation, or the config's name); "
            "connection 'w1-77-1'); worker 2 did not join within cluster.startup_timeout_ms=1000 of the first "
            "worker's HELLO");
  EXPECT_EQ(members.MissingInitial(), 2);
  EXPECT_EQ(members.InitialRanksRefused(), 1);
}

// While the shard waits for workers it says which and how long of its
// limit passed: 3 s after its start, every 10 s after, and over again from
// the first HELLO (as the limit counts); never once every rank joined.
TEST(MembershipStartupTest, TheWaitForWorkersIsLoggedNamingTheRanksMissing) {
  ClockTracker clocks(3, 2);
  ServerStats stats;
  RecordingOutbox out;
  Membership members(Options(/*initial=*/3), &clocks, &stats, &out);
  testing::LogCapture log;
  const std::vector<std::string> waiting = {"[test] waiting for worker"};
  const auto t0 = Clock::now();
  using std::chrono::milliseconds;
  members.ReportJoinWait(t0, t0 + milliseconds(2999));
  EXPECT_EQ(log.Matching(waiting).size(), 0u);
  members.ReportJoinWait(t0, t0 + milliseconds(3000));
  members.ReportJoinWait(t0, t0 + milliseconds(9999));
  EXPECT_EQ(log.Matching(waiting),
            std::vector<std::string>{"[test] waiting for workers 0, 1, 2 (of 3) to join: 3 s of "
                                     "cluster.startup_timeout_ms=1000"});
  Message m = Hello(1);
  m.header.mutable_hello()->set_generation(9);
  ASSERT_EQ(members.Check("w1-77-1", &m, true), Membership::Hello::kRefused);
  m = Hello(0);
  ASSERT_EQ(members.Check("w0", &m, true), Membership::Hello::kAdmit);
  members.Admit(0, "w0", -1);
  const auto t1 = t0 + milliseconds(9999);
  ASSERT_TRUE(members.CheckStartup(true, t1).ok());
  members.ReportJoinWait(t0, t1 + milliseconds(2999));  // the wait starts over at the first HELLO
  EXPECT_EQ(log.Matching(waiting).size(), 1u);
  members.ReportJoinWait(t0, t1 + milliseconds(3000));
  ASSERT_EQ(log.Matching(waiting).size(), 2u);
  EXPECT_EQ(log.Matching(waiting)[1],
            "[test] waiting for workers 1 (refused: job differs: worker 1 is of job 'job' generation 9, server 1 "
            "serves job 'job' generation 3 (cluster.job_id / cluster.generation, or the config's name); connection "
            "'w1-77-1'), 2 (of 3) to join: 3 s of cluster.startup_timeout_ms=1000");
}

// Every initial rank's worker refused for its settings: the wait ends at
// once, naming each rank, the mismatch and the connection.
TEST_F(MembershipTest, EveryRankRefusedForItsSettingsFailsAtOnce) {
  const auto t0 = Clock::now();
  Message m = Hello(1);
  m.header.mutable_hello()->set_staleness(3);
  ASSERT_EQ(members_.Check("w1-4242-1", &m, true), Membership::Hello::kRefused);
  ASSERT_TRUE(members_.CheckStartup(true, t0).ok());  // worker 0 is still to come
  m = Hello(0);
  m.header.mutable_hello()->set_staleness(3);
  ASSERT_EQ(members_.Check("w0-4241-1", &m, false), Membership::Hello::kRefused);
  const Status st = members_.CheckStartup(true, t0);
  EXPECT_EQ(st.code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(st.message(),
            "[test] the job cannot run: worker 0 (refused: staleness differs: worker 0 has 3 (SSP), server 1 has 2 "
            "(SSP); connection 'w0-4241-1'); worker 1 (refused: staleness differs: worker 1 has 3 (SSP), server 1 "
            "has 2 (SSP); connection 'w1-4242-1'); every one of its 2 initial worker(s) was refused, so no worker is "
            "left to come (not waiting out cluster.startup_timeout_ms=1000)");
}

// While a rank joined, a refused one may be started again with the right
// flags within cluster.startup_timeout_ms: no early end.
TEST_F(MembershipTest, AJoinedRankKeepsTheWaitForARefusedOne) {
  Join(0, "w0");
  Message m = Hello(1);
  m.header.mutable_hello()->set_train_epochs(3);
  m.header.mutable_hello()->set_staleness(0);
  ASSERT_EQ(members_.Check("w1-old", &m, true), Membership::Hello::kRefused);
  EXPECT_TRUE(members_.CheckRefusals().ok());
  Join(1, "w1");
  EXPECT_TRUE(members_.CheckRefusals().ok());
}

// A peer of another build, job or shard is refused, but is no rank's
// answer: it never ends the job (a stray peer must not).
TEST_F(MembershipTest, APeerOfAnotherJobCountsForNoRank) {
  for (int rank : {0, 1}) {
    Message m = Hello(rank);
    m.header.mutable_hello()->set_job_id("other");
    ASSERT_EQ(members_.Check("w" + std::to_string(rank), &m, true), Membership::Hello::kRefused);
  }
  EXPECT_TRUE(members_.CheckRefusals().ok());
  // Rank 1's worker of this job, refused for its settings, still leaves
  // rank 0 to come.
  Message m = Hello(1);
  m.header.mutable_hello()->set_staleness(0);
  ASSERT_EQ(members_.Check("w1-2", &m, true), Membership::Hello::kRefused);
  EXPECT_TRUE(members_.CheckRefusals().ok());
  m = Hello(0);
  m.header.mutable_hello()->set_staleness(0);
  ASSERT_EQ(members_.Check("w0-2", &m, true), Membership::Hello::kRefused);
  EXPECT_EQ(members_.CheckRefusals().code(), Status::Code::kFailedPrecondition);
}

TEST_F(MembershipTest, ARefusedRankWaitingForWorkerZeroIsNotCountedRefused) {
  Message m = Hello(1);
  m.header.mutable_hello()->set_staleness(0);
  ASSERT_EQ(members_.Check("w1-old", &m, true), Membership::Hello::kRefused);
  // Worker 1 again, right this time: it waits for worker 0's tables.
  m = Hello(1);
  ASSERT_EQ(members_.Check("w1", &m, /*tables_defined=*/false), Membership::Hello::kWaiting);
  m = Hello(0);
  m.header.mutable_hello()->set_staleness(0);
  ASSERT_EQ(members_.Check("w0", &m, false), Membership::Hello::kRefused);
  EXPECT_TRUE(members_.CheckRefusals().ok());
}

// Servers started for 2 workers, workers for 3: the first such HELLO is
// refused naming both counts and the job cannot run; every rank the
// workers' count names is told (a rank past the job's, refused before
// Check, too), and then the job ends at once, long before
// cluster.startup_timeout_ms.
TEST_F(MembershipTest, AWorkerStartedForAnotherNumberOfWorkersEndsTheJobOnceEveryRankIsTold) {
  const auto t0 = Clock::now();
  const auto larger = [](int rank) {
    Message m = Hello(rank);
    m.header.mutable_hello()->set_num_workers(3);
    return m;
  };
  Message m = larger(1);
  members_.EnsureSlot(1);
  ASSERT_EQ(members_.Check("w1-7-1", &m, true), Membership::Hello::kRefused);
  EXPECT_EQ(out_.last().header.error_reply().error(),
            "[test] cluster.num_workers differs: worker 1 has 3, server 1 has 2 (--num_workers must be the same on "
            "every server and worker)");
  ASSERT_TRUE(members_.cannot_run());
  EXPECT_TRUE(members_.CheckStartup(true, t0).ok());  // ranks 0 and 2 still to tell
  m = larger(0);
  members_.RefuseAtStart("w0-7-0", m);
  EXPECT_EQ(out_.last().header.error_reply().error(),
            "[test] cluster.num_workers differs: worker 0 has 3, server 1 has 2 (--num_workers must be the same on "
            "every server and worker)");
  EXPECT_TRUE(members_.CheckStartup(true, t0 + std::chrono::milliseconds(10)).ok());
  m = larger(2);
  members_.RefusedBeforeCheck("w2-7-2", m.header, "rank 2 is past the job's");
  const Status st = members_.CheckStartup(true, t0 + std::chrono::milliseconds(20));
  EXPECT_EQ(st.code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(st.message(),
            "[test] the job cannot run: worker 1 (refused: cluster.num_workers differs: worker 1 has 3, server 1 has "
            "2 (--num_workers must be the same on every server and worker); connection 'w1-7-1') (not waiting out "
            "cluster.startup_timeout_ms=1000)");
  EXPECT_EQ(out_.sent.size(), 2u);  // RefusedBeforeCheck sends nothing: its caller did
}

// Workers started for 1 worker, servers for 2: rank 1 never comes, and the
// job ends kCannotRunLingerMs after the shard first saw it cannot run,
// naming the rank nobody told.
TEST_F(MembershipTest, ARankThatNeverComesHoldsAJobThatCannotRunOnlyForTheLinger) {
  Message m = Hello(0);
  m.header.mutable_hello()->set_num_workers(1);
  members_.EnsureSlot(0);
  ASSERT_EQ(members_.Check("w0-9-0", &m, true), Membership::Hello::kRefused);
  const auto t0 = Clock::now();
  EXPECT_TRUE(members_.CheckStartup(true, t0).ok());
  const auto linger = std::chrono::milliseconds(Membership::kCannotRunLingerMs);
  EXPECT_TRUE(members_.CheckStartup(true, t0 + linger).ok());
  const Status st = members_.CheckStartup(true, t0 + linger + std::chrono::milliseconds(1));
  EXPECT_EQ(st.code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(st.message(),
            "[test] the job cannot run: worker 0 (refused: cluster.num_workers differs: worker 0 has 1, server 1 has "
            "2 (--num_workers must be the same on every server and worker); connection 'w0-9-0'); worker(s) 1 not "
            "told (none came within 3000 ms) (not waiting out cluster.startup_timeout_ms=1000)");
}

// A disagreement between servers (cluster.replicas), found before any
// worker joined: the HELLO waiting for worker 0's and every later one are
// refused with it (a peer of another job with its own reason, counted for
// no rank), and the job ends once every initial rank was told.
TEST_F(MembershipTest, AServersDisagreementRefusesEveryWorkerAndEndsTheJob) {
  const std::string why = "shard 1 runs without replicas (cluster.replicas=0 here), but server process 0 holds a "
                          "copy of it with cluster.replicas=1: start every server with the same --replicas";
  Message m = Hello(1);
  members_.EnsureSlot(1);
  ASSERT_EQ(members_.Check("w1", &m, /*tables_defined=*/false), Membership::Hello::kWaiting);
  ASSERT_TRUE(members_.CannotRun(why));
  EXPECT_FALSE(members_.Waiting(1));
  EXPECT_EQ(out_.last().header.error_reply().error(), "[test] the job cannot run: " + why);
  EXPECT_EQ(out_.last().header.request_id(), 101u);
  m = Hello(0);
  m.header.mutable_hello()->set_job_id("other");
  members_.RefuseAtStart("stray", m);
  EXPECT_NE(out_.last().header.error_reply().error().find("job differs: worker 0 is of job 'other'"),
            std::string::npos);
  const auto t0 = Clock::now();
  EXPECT_TRUE(members_.CheckStartup(false, t0).ok());  // rank 0 was not told: the stray is not rank 0's worker
  m = Hello(0);
  members_.RefuseAtStart("w0", m);
  EXPECT_EQ(out_.last().header.error_reply().error(), "[test] the job cannot run: " + why);
  const Status st = members_.CheckStartup(false, t0);
  EXPECT_EQ(st.code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(st.message(), "[test] the job cannot run: " + why + " (not waiting out cluster.startup_timeout_ms=1000)");
  EXPECT_EQ(out_.sent.size(), 3u);
}

// Once a worker joined, the job runs: a disagreement found then is no
// reason to end it (the caller only refuses its peer), and a worker of
// another count is refused alone. A HELLO that names no count (a tool's
// client) is not compared.
TEST_F(MembershipTest, AJobThatRunsIsNotEndedByALateDisagreement) {
  Message m = Hello(0);  // no num_workers
  members_.EnsureSlot(0);
  ASSERT_EQ(members_.Check("w0", &m, true), Membership::Hello::kAdmit);
  members_.Admit(0, "w0", -1);
  EXPECT_FALSE(members_.CannotRun("shard 1 runs without replicas"));
  m = Hello(1);
  m.header.mutable_hello()->set_num_workers(5);
  EXPECT_EQ(Refusal(m), "[test] cluster.num_workers differs: worker 1 has 5, server 1 has 2 (--num_workers must be "
                        "the same on every server and worker)");
  EXPECT_FALSE(members_.cannot_run());
  EXPECT_TRUE(members_.CheckStartup(true, Clock::now()).ok());
  m = Hello(1);
  m.header.mutable_hello()->set_num_workers(2);
  EXPECT_EQ(members_.Check("w1", &m, true), Membership::Hello::kAdmit);
}

TEST(HandshakeFailuresTest, CountsEveryFailureAndLogsAtPowersOfTen) {
  HandshakeFailures f;
  for (int i = 0; i < 12; ++i) f.Record(ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL, 0x10000003, "tcp://x", "[test] ");
  f.Record(ZMQ_EVENT_HANDSHAKE_FAILED_AUTH, 400, "tcp://x", "[test] ");
  EXPECT_EQ(f.refused(), 13u);
  EXPECT_EQ(f.failures(), 12u);  // refused keys are the ZAP handler's to log
}

// A membership with its clocks, stats and outbox, made as a shard makes it.
struct Room {
  Room() : clocks(2, 2), members(Options(), &clocks, &stats, &out) { members.set_endpoint("tcp://127.0.0.1:5555"); }
  ClockTracker clocks;
  ServerStats stats;
  RecordingOutbox out;
  Membership members;
};

// Worker 0 joined (its HELLO set the data mode and epochs), worker 1 was
// refused once and now waits for the tables, worker 3 joined the running
// job (slot 2 skipped over), reached the barrier and said BYE (held), and
// the startup deadline runs from `t0`.
void BusyMembership(Room* r, Clock::time_point t0) {
  Message m = Hello(0);
  m.header.mutable_hello()->set_data_on_demand(true);
  m.header.mutable_hello()->set_train_epochs(5);
  ASSERT_EQ(r->members.Check("w0", &m, true), Membership::Hello::kAdmit);
  r->members.Admit(0, "w0", -1);
  m = Hello(1);
  m.header.mutable_hello()->set_generation(9);
  ASSERT_EQ(r->members.Check("w1-old", &m, true), Membership::Hello::kRefused);
  m = Hello(1);
  ASSERT_EQ(r->members.Check("w1", &m, /*tables_defined=*/false), Membership::Hello::kWaiting);
  m = Hello(3);
  r->members.EnsureSlot(3);
  ASSERT_EQ(r->members.Check("w3", &m, true), Membership::Hello::kAdmit);
  r->members.Admit(3, "w3", -1);
  r->clocks.Advance(0, 4);
  r->clocks.Advance(3, 2);
  MessageHeader b;
  b.set_type(BARRIER);
  b.set_request_id(77);
  b.mutable_barrier()->set_samples(40);
  b.mutable_barrier()->set_data_done(true);
  b.mutable_barrier()->mutable_worker_stats()->set_rank(3);
  r->members.Arrive(3, "w3", b);
  r->members.Leave(3);
  b.set_type(BYE);
  b.set_request_id(78);
  r->members.AnswerBye(3, "w3", b);
  ASSERT_TRUE(r->members.CheckStartup(true, t0).ok());
}

// A copy restored into a fresh room (its clocks first) holds the same
// state and, from then on, sends what the original sends.
TEST(MembershipStateTest, ARestoredCopyHoldsTheSameStateAndActsTheSame) {
  const auto start = Clock::now();
  Room a;
  BusyMembership(&a, start);
  const auto t0 = Clock::now();  // after every time the room took
  ClockTrackerState clocks;
  a.clocks.SaveState(&clocks);
  MembershipState saved;
  a.members.SaveState(&saved, t0);
  ASSERT_EQ(saved.workers_size(), 4);
  EXPECT_FALSE(saved.workers(2).has_last_seen_age_ns());  // never heard from
  EXPECT_EQ(saved.waiting_size(), 1);
  EXPECT_EQ(saved.held_byes_size(), 1);
  EXPECT_EQ(saved.refusals_size(), 1);
  EXPECT_EQ(saved.first_hello_age_ns(), std::chrono::duration_cast<std::chrono::nanoseconds>(t0 - start).count());
  Room b;
  ASSERT_TRUE(b.clocks.RestoreState(clocks).ok());
  ASSERT_TRUE(b.members.RestoreState(saved, t0).ok());
  MembershipState again;
  b.members.SaveState(&again, t0);
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(saved, again)) << again.DebugString();
  EXPECT_EQ(b.members.worker(3).stats.rank(), 3);
  EXPECT_TRUE(b.members.AnyDataDone());

  const size_t before = a.out.sent.size();
  std::vector<std::string> startup;
  for (Room* r : {&a, &b}) {
    EXPECT_TRUE(r->members.Waiting(1));
    startup.push_back(r->members.CheckStartup(true, start + std::chrono::milliseconds(1100)).message());
    StatusOr<Membership::Silent> silent = r->members.NextSilent(t0 + std::chrono::seconds(60));
    ASSERT_TRUE(silent.ok());
    EXPECT_EQ(silent->rank, 0);
    EXPECT_EQ(r->members.AnswerHeldByes(Status::OK()), 1);
    auto waiting = r->members.TakeWaiting();
    ASSERT_EQ(waiting.size(), 1u);
    EXPECT_EQ(waiting[0].first, "w1");
    EXPECT_EQ(waiting[0].second.header.request_id(), 101u);
    // Another HELLO of the job that carries another data mode is refused.
    Message m = Hello(2);
    m.header.mutable_hello()->set_data_on_demand(false);
    EXPECT_EQ(r->members.Check("w2", &m, true), Membership::Hello::kRefused);
  }
  EXPECT_EQ(startup[0], startup[1]);
  EXPECT_NE(startup[1].find("worker 1 (refused: job differs: worker 1 is of job 'job' generation 9"), std::string::npos)
      << startup[1];
  ASSERT_EQ(a.out.sent.size() - before, b.out.sent.size());
  for (size_t i = 0; i < b.out.sent.size(); ++i) {
    const auto& x = a.out.sent[before + i];
    const auto& y = b.out.sent[i];
    EXPECT_EQ(x.identity, y.identity);
    EXPECT_EQ(x.rank, y.rank);
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(x.header, y.header)) << y.header.DebugString();
  }
  EXPECT_EQ(b.out.sent[0].header.type(), REMOVED);
  EXPECT_EQ(b.out.sent[1].header.type(), BYE_REPLY);
  EXPECT_EQ(b.out.sent[1].header.request_id(), 78u);
  MembershipState sa, sb;
  a.members.SaveState(&sa, t0 + std::chrono::seconds(60));
  b.members.SaveState(&sb, t0 + std::chrono::seconds(60));
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(sa, sb));
}

// Restores `s` into a fresh room: the DataLoss message.
std::string Refused(const MembershipState& s) {
  Room fresh;
  const Status st = fresh.members.RestoreState(s, Clock::now());
  EXPECT_EQ(st.code(), Status::Code::kDataLoss) << st.message();
  return st.message();
}

TEST(MembershipStateTest, MalformedSlotsAreRefusedNamingTheField) {
  Room a;
  BusyMembership(&a, Clock::now());
  MembershipState good;
  a.members.SaveState(&good, Clock::now());
  MembershipState s = good;
  s.clear_workers();
  s.add_workers();
  EXPECT_EQ(Refused(s), "shard state: members.workers: 1 slots, this job's shard holds 2 to 4 "
                        "(cluster.num_workers to cluster.max_workers)");
  s = good;
  s.add_workers();
  EXPECT_EQ(Refused(s), "shard state: members.workers: 5 slots, this job's shard holds 2 to 4 "
                        "(cluster.num_workers to cluster.max_workers)");
  s = good;
  s.mutable_workers(1)->set_identity(std::string(256, 'x'));
  EXPECT_EQ(Refused(s), "shard state: members.workers[1].identity: 256 bytes, a connection's is at most 255");
  s = good;
  s.mutable_workers(3)->set_last_seen_age_ns(-5);
  EXPECT_EQ(Refused(s), "shard state: members.workers[3].last_seen_age_ns: -5 ns, not in [0, 100 years]");
  s = good;
  s.mutable_workers(0)->set_joined_clock(-2);
  EXPECT_EQ(Refused(s), "shard state: members.workers[0].joined_clock: -2 (≥ -1)");
  // The tracker holds more slots than the membership.
  Room fresh;
  fresh.clocks.Join(3, 0);
  s = good;
  s.mutable_workers()->RemoveLast();
  const Status st = fresh.members.RestoreState(s, Clock::now());
  EXPECT_EQ(st.message(), "shard state: members.workers: 3 slots, fewer than the clocks' 4");
}

TEST(MembershipStateTest, MalformedHeldMessagesAreRefusedNamingTheField) {
  Room a;
  BusyMembership(&a, Clock::now());
  MembershipState good;
  a.members.SaveState(&good, Clock::now());
  MembershipState s = good;
  s.set_waiting(0, "xyz");
  EXPECT_EQ(Refused(s), "shard state: members.waiting[0]: shard input from the primary: version 120, this build "
                        "reads 1");
  Message m = Hello(2);
  m.header.set_type(BARRIER);
  s.set_waiting(0, EncodeShardInput("w2", m));
  EXPECT_EQ(Refused(s), "shard state: members.waiting[0]: a BARRIER, not a HELLO");
  s.set_waiting(0, EncodeShardInput("w0", Hello(0)));
  EXPECT_EQ(Refused(s), "shard state: members.waiting[0]: worker 0's HELLO, not a rank in (0, 4) (rank order, "
                        "worker 0's never waits)");
  s = good;
  s.add_waiting(good.waiting(0));
  EXPECT_EQ(Refused(s), "shard state: members.waiting[1]: worker 1's HELLO, not a rank in (1, 4) (rank order, "
                        "worker 0's never waits)");
  s = good;
  s.mutable_held_byes(0)->set_rank(4);
  EXPECT_EQ(Refused(s), "shard state: members.held_byes[0].rank: 4, not in [0, 4)");
  s = good;
  s.mutable_held_byes(0)->set_identity(std::string(300, 'y'));
  EXPECT_EQ(Refused(s), "shard state: members.held_byes[0].identity: 300 bytes, a connection's is at most 255");
  s = good;
  s.set_first_hello_age_ns(int64_t{1} << 62);
  EXPECT_EQ(Refused(s), "shard state: members.first_hello_age_ns: 4611686018427387904 ns, not in [0, 100 years]");
  s = good;
  s.mutable_refusals(0)->set_rank(2);
  EXPECT_EQ(Refused(s), "shard state: members.refusals[0].rank: 2, not an initial rank in (-1, 2) (rank order)");
  s = good;
  *s.add_refusals() = good.refusals(0);
  EXPECT_EQ(Refused(s), "shard state: members.refusals[1].rank: 1, not an initial rank in (1, 2) (rank order)");
}

}  // namespace
}  // namespace tether
