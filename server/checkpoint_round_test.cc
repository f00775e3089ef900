// This shard's part of a checkpoint without sockets: the round is written
// once every counting worker joined it (and not before), answered with the
// shard file, the coordinator's chunks.state and the manifest entries;
// abandoned when a rank restarted past the cut; a CHECKPOINT of another
// round refused; a failed write answered with the error; a resume that
// cannot load recorded as the shard's refusal.
#include "server/checkpoint_round.h"

#include <gtest/gtest.h>

#include <google/protobuf/util/message_differencer.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "checkpoint/chunk_state.h"
#include "server/testing/recording_outbox.h"
#include "tests/testing/temp_dir.h"

namespace tether {
namespace {

using testing::RecordingOutbox;

MessageHeader Checkpoint(int rank, int64_t clock, const std::string& dir, uint64_t request_id) {
  MessageHeader h;
  h.set_type(CHECKPOINT);
  h.set_sender_rank(rank);
  h.set_request_id(request_id);
  h.mutable_checkpoint()->set_clock(clock);
  h.mutable_checkpoint()->set_dir(dir);
  CheckpointFile* f = h.mutable_checkpoint()->mutable_state_file();
  f->set_name("worker-" + std::to_string(rank) + ".state");
  f->set_bytes(10 + rank);
  return h;
}

class CheckpointRoundTest : public ::testing::Test {
 protected:
  CheckpointRoundTest()
      : clocks_(2, 0),
        members_(Options(), &clocks_, &stats_, &out_),
        kv_(0, 1, &clocks_, &stats_, &out_),
        coordinator_(MakeLocalCoordinator({2, 2, "[test] "}, &out_)),
        round_(0, 1, {&kv_, &clocks_, &members_, coordinator_.get()}, &stats_, &out_) {
    google::protobuf::RepeatedPtrField<TableSpec> specs;
    TableSpec* t = specs.Add();
    t->set_id(0);
    t->set_name("w");
    t->set_dim(2);
    t->mutable_optimizer()->set_type(SGD);
    kv_.DefineTables(specs);
    for (int r = 0; r < 2; ++r) {
      members_.Admit(r, "w" + std::to_string(r), -1);
      coordinator_->WorkerJoined(r, false);
    }
  }
  static MembershipOptions Options() {
    MembershipOptions o;
    o.initial_workers = 2;
    o.max_workers = 2;
    return o;
  }
  std::string Dir(int64_t clock) const { return tmp_.path() + "/ckpt-" + std::to_string(clock); }

  ::tether::testing::ScopedTempDir tmp_;
  ClockTracker clocks_;
  ServerStats stats_;
  RecordingOutbox out_;
  Membership members_;
  KvService kv_;
  std::unique_ptr<JobCoordinator> coordinator_;
  CheckpointRound round_;
};

TEST_F(CheckpointRoundTest, TheRoundIsWrittenOnceEveryCountingWorkerJoinedIt) {
  clocks_.Advance(0, 4);
  clocks_.Advance(1, 3);
  round_.Join("w0", Checkpoint(0, 4, Dir(4), 7));
  EXPECT_TRUE(out_.sent.empty());
  EXPECT_FALSE(std::filesystem::exists(Dir(4) + "/shard-0.tables"));
  clocks_.Advance(1, 4);
  round_.Join("w1", Checkpoint(1, 4, Dir(4), 8));
  ASSERT_EQ(out_.sent.size(), 2u);
  EXPECT_TRUE(std::filesystem::exists(Dir(4) + "/shard-0.tables"));
  for (const auto& s : out_.sent) {
    EXPECT_EQ(s.header.type(), CHECKPOINT_REPLY);
    EXPECT_EQ(s.header.checkpoint_reply().clock(), 4);
    ASSERT_EQ(s.header.checkpoint_reply().files_size(), 1);  // no chunk was dealt: no chunks.state
    EXPECT_EQ(s.header.checkpoint_reply().files(0).name(), "shard-0.tables");
    EXPECT_EQ(s.header.checkpoint_reply().files(0).bytes(), std::filesystem::file_size(Dir(4) + "/shard-0.tables"));
    ASSERT_EQ(s.header.checkpoint_reply().workers_size(), 2);
    EXPECT_EQ(s.header.checkpoint_reply().workers(1).kind(), CheckpointWorker::TRAINING);
    EXPECT_EQ(s.header.checkpoint_reply().workers(1).file().bytes(), 11u);
  }
  EXPECT_EQ(out_.sent[0].header.request_id(), 7u);
  EXPECT_EQ(round_.last_clock(), 4);
}

TEST_F(CheckpointRoundTest, ACopysRoundWritesNothingAndItsAnswersAbandonIt) {
  // A replica's copy (ServerShard::Replay): the round ends at the cut as its
  // primary's does, writes no files, and what it would answer abandons the
  // round, should a worker send the CHECKPOINT again once the copy serves.
  round_.set_writes_files(false);
  clocks_.Advance(0, 4);
  clocks_.Advance(1, 4);
  round_.Join("w0", Checkpoint(0, 4, Dir(4), 7));
  round_.Join("w1", Checkpoint(1, 4, Dir(4), 8));
  EXPECT_FALSE(std::filesystem::exists(Dir(4)));
  ASSERT_EQ(out_.sent.size(), 2u);
  for (const auto& s : out_.sent) {
    EXPECT_EQ(s.header.type(), CHECKPOINT_REPLY);
    EXPECT_EQ(s.header.checkpoint_reply().clock(), 4);
    EXPECT_TRUE(s.header.checkpoint_reply().abandoned());
    EXPECT_EQ(s.header.checkpoint_reply().files_size(), 0);
    EXPECT_EQ(s.header.checkpoint_reply().abandoned_why(),
              "checkpoint at clock 4 abandoned: shard 0 failed over while its primary wrote its files");
  }
  EXPECT_EQ(out_.sent[1].header.request_id(), 8u);
  EXPECT_EQ(round_.last_clock(), 4);
}

TEST_F(CheckpointRoundTest, AFinishedWorkerIsNotWaitedForAndTheChunkStateIsWritten) {
  MessageHeader chunk;
  chunk.set_sender_rank(0);
  chunk.mutable_chunk_next()->set_train_rows(100);
  chunk.mutable_chunk_next()->set_chunk_rows(10);
  chunk.mutable_chunk_next()->set_epochs(1);
  ASSERT_TRUE(coordinator_->ChunkNext("w0", chunk, 0).ok());
  out_.sent.clear();
  clocks_.Advance(0, 2);
  clocks_.Remove(1);  // worker 1 finished (barrier)
  round_.Join("w0", Checkpoint(0, 2, Dir(2), 1));
  ASSERT_EQ(out_.sent.size(), 1u);
  ASSERT_EQ(out_.last().header.checkpoint_reply().files_size(), 2);
  EXPECT_EQ(out_.last().header.checkpoint_reply().files(1).name(), kChunkStateName);
  EXPECT_TRUE(std::filesystem::exists(Dir(2) + "/" + kChunkStateName));
}

TEST_F(CheckpointRoundTest, ARoundOfAnotherClockIsRefusedWhileOneIsOpen) {
  clocks_.Advance(0, 8);
  round_.Join("w0", Checkpoint(0, 8, Dir(8), 1));
  round_.Join("w1", Checkpoint(1, 12, Dir(12), 2));
  ASSERT_EQ(out_.sent.size(), 1u);
  EXPECT_EQ(out_.last().header.type(), ERROR_REPLY);
  EXPECT_EQ(out_.last().header.error_reply().error(), "[test] CHECKPOINT from worker 1 at clock 12 (" + Dir(12) +
                                            ") while the one at clock 8 (" + Dir(8) + ") is in progress");
  EXPECT_EQ(stats_.bad_messages, 1u);
}

TEST_F(CheckpointRoundTest, ARoundThatCannotCompleteIsAbandoned) {
  clocks_.Advance(0, 8);
  round_.Join("w0", Checkpoint(0, 8, Dir(8), 1));
  EXPECT_TRUE(out_.sent.empty());
  // Worker 1 passed the cut without a CHECKPOINT (its process restarted).
  clocks_.Advance(1, 9);
  round_.MaybeWrite();
  ASSERT_EQ(out_.sent.size(), 1u);
  EXPECT_EQ(out_.last().header.type(), CHECKPOINT_REPLY);
  EXPECT_TRUE(out_.last().header.checkpoint_reply().abandoned());
  EXPECT_EQ(out_.last().header.checkpoint_reply().abandoned_why(),
            "checkpoint at clock 8 abandoned: worker 1 was restarted before it wrote its state (its process started "
            "at clock 0)");
  EXPECT_FALSE(std::filesystem::exists(Dir(8)));
  EXPECT_EQ(round_.last_clock(), -1);
}

TEST_F(CheckpointRoundTest, AFailedWriteIsAnsweredWithItsError) {
  std::ofstream(tmp_.path() + "/file") << "x";
  clocks_.Remove(1);
  round_.Join("w0", Checkpoint(0, 0, tmp_.path() + "/file/ckpt-0", 3));
  ASSERT_EQ(out_.sent.size(), 1u);
  EXPECT_EQ(out_.last().header.type(), ERROR_REPLY);
  EXPECT_NE(out_.last().header.error_reply().error().find("checkpoint at clock 0: "), std::string::npos);
  EXPECT_EQ(round_.last_clock(), 0);  // counted as the last, as a written one
}

TEST_F(CheckpointRoundTest, AResumeThatCannotLoadIsTheShardsRefusal) {
  HelloBody hello;
  round_.set_resume_from(tmp_.path() + "/none");
  EXPECT_TRUE(round_.Resuming(hello));
  EXPECT_EQ(round_.Resume(hello), "server 0 resumes from " + tmp_.path() +
                                      "/none (--resume_from) but worker 0 starts afresh: give worker 0 the same "
                                      "--resume_from");
  EXPECT_TRUE(round_.load_failed().ok());  // the worker's mistake, not the shard's
  hello.set_resume_from(tmp_.path() + "/none");
  const std::string why = round_.Resume(hello);
  EXPECT_FALSE(why.empty());
  EXPECT_EQ(round_.load_failed().code(), Status::Code::kDataLoss);
  EXPECT_EQ(round_.load_failed_why(), why);
  EXPECT_EQ(round_.resume_clock(), -1);
}

// A shard's rooms as ServerShard makes them for a 2-worker job (one table),
// with the round over them: one side of the state tests.
struct RoundShard {
  explicit RoundShard(int workers)
      : clocks(workers, 0),
        members(Options(workers), &clocks, &stats, &out),
        kv(0, 1, &clocks, &stats, &out),
        coordinator(MakeLocalCoordinator({workers, workers, "[test] "}, &out)),
        round(0, 1, {&kv, &clocks, &members, coordinator.get()}, &stats, &out) {
    google::protobuf::RepeatedPtrField<TableSpec> specs;
    TableSpec* t = specs.Add();
    t->set_id(0);
    t->set_name("w");
    t->set_dim(2);
    t->mutable_optimizer()->set_type(SGD);
    kv.DefineTables(specs);
    for (int r = 0; r < workers; ++r) {
      members.Admit(r, "w" + std::to_string(r), -1);
      coordinator->WorkerJoined(r, false);
    }
    round.set_writes_files(false);  // a replica's copy
  }
  static MembershipOptions Options(int workers) {
    MembershipOptions o;
    o.initial_workers = workers;
    o.max_workers = workers;
    return o;
  }
  CheckpointRoundState Saved(std::chrono::steady_clock::time_point now) const {
    CheckpointRoundState s;
    round.SaveState(&s, now);
    return s;
  }
  ClockTracker clocks;
  ServerStats stats;
  RecordingOutbox out;
  Membership members;
  KvService kv;
  std::unique_ptr<JobCoordinator> coordinator;
  CheckpointRound round;
};

// A round in progress (3 workers, 2 waiting), an earlier one ended, a
// failed load: restored into a fresh round, the state is the same, and the
// round ends the same once the third worker joins.
TEST(CheckpointRoundStateTest, ARestoredRoundIsTheSameAndEndsTheSame) {
  ::tether::testing::ScopedTempDir tmp;
  RoundShard a(3), b(3);
  for (int r = 0; r < 3; ++r) a.clocks.Advance(r, 2);
  for (int r = 0; r < 3; ++r) a.round.Join("w" + std::to_string(r), Checkpoint(r, 2, tmp.path() + "/c2", 10 + r));
  for (int r = 0; r < 3; ++r) a.clocks.Advance(r, 4);
  a.round.Join("w2", Checkpoint(2, 4, tmp.path() + "/c4", 20));
  a.round.Join("w0", Checkpoint(0, 4, tmp.path() + "/c4", 21));
  a.round.set_resume_from(tmp.path() + "/none");
  HelloBody hello;
  hello.set_resume_from(tmp.path() + "/none");
  ASSERT_FALSE(a.round.Resume(hello).empty());
  ASSERT_FALSE(a.round.load_failed().ok());
  ASSERT_EQ(a.out.sent.size(), 3u);  // the round at clock 2
  const auto now = std::chrono::steady_clock::now();
  const CheckpointRoundState state = a.Saved(now);
  EXPECT_EQ(state.clock(), 4);
  EXPECT_EQ(state.waiting_size(), 2);
  EXPECT_EQ(state.files_size(), 2);
  EXPECT_EQ(state.last_clock(), 2);
  EXPECT_GE(state.load_failed_age_ns(), 0);
  for (int r = 0; r < 3; ++r) b.clocks.Advance(r, 4);
  ASSERT_TRUE(b.round.RestoreState(state, now).ok());
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(state, b.Saved(now)));
  EXPECT_EQ(b.round.load_failed().code(), Status::Code::kDataLoss);
  EXPECT_EQ(b.round.load_failed().message(), a.round.load_failed().message());
  EXPECT_EQ(b.round.load_failed_why(), a.round.load_failed_why());
  EXPECT_EQ(b.round.load_failed_at(), a.round.load_failed_at());
  EXPECT_EQ(b.round.resume_clock(), -1);
  EXPECT_TRUE(b.round.Resuming(HelloBody()));  // --resume_from carried
  // Worker 1 joins: both end the round alike (a copy's: abandoned answers).
  a.out.sent.clear();
  a.round.Join("w1", Checkpoint(1, 4, tmp.path() + "/c4", 22));
  b.round.Join("w1", Checkpoint(1, 4, tmp.path() + "/c4", 22));
  ASSERT_EQ(a.out.sent.size(), 3u);
  ASSERT_EQ(b.out.sent.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(a.out.sent[i].identity, b.out.sent[i].identity);
    EXPECT_EQ(a.out.sent[i].rank, b.out.sent[i].rank);
    EXPECT_EQ(a.out.sent[i].header.SerializeAsString(), b.out.sent[i].header.SerializeAsString());
  }
  EXPECT_EQ(b.out.sent[0].header.request_id(), 21u);
  EXPECT_EQ(b.round.last_clock(), 4);
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(a.Saved(now), b.Saved(now)));
}

// Each kind of state the round cannot hold is refused with DataLoss
// naming the field.
TEST(CheckpointRoundStateTest, MalformedStatesAreRefusedNamingTheField) {
  const auto now = std::chrono::steady_clock::now();
  RoundShard a(2);
  a.round.Join("w0", Checkpoint(0, 4, "/nowhere/c4", 1));
  CheckpointRoundState good = a.Saved(now);
  ASSERT_EQ(good.waiting_size(), 1);
  ASSERT_EQ(good.files_size(), 1);
  CheckpointRoundWaiting* w1 = good.add_waiting();
  w1->set_rank(1);
  w1->set_identity("w1");
  w1->set_request_id(2);
  good.add_files()->set_rank(1);
  good.mutable_load_failed()->set_code(static_cast<int>(Status::Code::kDataLoss));
  good.set_load_failed_age_ns(5);
  good.mutable_fatal()->set_code(static_cast<int>(Status::Code::kIOError));
  {
    RoundShard b(2);
    ASSERT_TRUE(b.round.RestoreState(good, now).ok());
    EXPECT_EQ(b.round.fatal().code(), Status::Code::kIOError);
    EXPECT_EQ(now - b.round.load_failed_at(), std::chrono::nanoseconds(5));
  }
  const std::vector<std::pair<std::string, std::function<void(CheckpointRoundState*)>>> cases = {
      {"round.waiting[1].rank 2 is not a rank of the 2 slots",
       [](CheckpointRoundState* s) { s->mutable_waiting(1)->set_rank(2); }},
      {"round.waiting[0].rank -1 is not a rank", [](CheckpointRoundState* s) { s->mutable_waiting(0)->set_rank(-1); }},
      {"round.waiting[1].rank 0 is not a rank of the 2 slots above the one before it",
       [](CheckpointRoundState* s) { s->mutable_waiting(1)->set_rank(0); }},
      {"round.files[1].rank 7 is not a rank", [](CheckpointRoundState* s) { s->mutable_files(1)->set_rank(7); }},
      {"round.load_failed.code 0 is no error's code",
       [](CheckpointRoundState* s) { s->mutable_load_failed()->set_code(0); }},
      {"round.load_failed_age_ns -3 is negative", [](CheckpointRoundState* s) { s->set_load_failed_age_ns(-3); }},
      {"round.fatal.code 99 is no error's code", [](CheckpointRoundState* s) { s->mutable_fatal()->set_code(99); }},
  };
  for (const auto& [want, mutate] : cases) {
    SCOPED_TRACE(want);
    CheckpointRoundState bad = good;
    mutate(&bad);
    RoundShard fresh(2);
    const Status st = fresh.round.RestoreState(bad, now);
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.code(), Status::Code::kDataLoss);
    EXPECT_NE(st.message().find("shard state: " + want), std::string::npos) << st.message();
  }
}

}  // namespace
}  // namespace tether
