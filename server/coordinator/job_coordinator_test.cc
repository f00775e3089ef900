// The job coordinator without sockets: its answers on the wire (through a
// recording Outbox), and Snapshot/Restore: a coordinator restored from a
// snapshot answers every later event exactly as the original does, on
// random schedules of joins, clocks, chunk requests, evaluation gathers,
// barriers, checkpoint rounds, leaves and removals.
#include "server/coordinator/job_coordinator.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>
#include <vector>

#include "core/net/eval_frames.h"

namespace tether {
namespace {

// What a coordinator sent: each message as (identity, rank, header bytes,
// values bytes).
class RecordingOutbox final : public Outbox {
 public:
  RecordingOutbox() : Outbox("[test] ") {}
  void Send(const std::string& identity, Message* reply, int rank) override {
    sent.push_back(identity + "|" + std::to_string(rank) + "|" + reply->header.SerializeAsString() + "|" +
                   std::string(static_cast<const char*>(reply->values.data()), reply->values.size()));
    headers.push_back(reply->header);
    EvalPartialsOf(reply);
  }
  void EvalPartialsOf(Message* reply) {
    partials.clear();
    if (reply->header.type() == EVAL_GATHER_REPLY) (void)UnpackEvalPartials(*reply, "test", &partials);
  }
  std::vector<std::string> sent;
  std::vector<MessageHeader> headers;
  std::vector<EvalPartial> partials;  // of the last EVAL_GATHER_REPLY
};

CoordinatorOptions Options(int initial = 3, int max = 5) {
  CoordinatorOptions o;
  o.initial_workers = initial;
  o.max_workers = max;
  o.log_prefix = "[test] ";
  return o;
}

Message Gather(int rank, int64_t round, EvalGatherBody::EvalWant want, uint64_t request_id, int64_t rows) {
  Message m;
  m.header.set_type(EVAL_GATHER);
  m.header.set_sender_rank(rank);
  m.header.set_request_id(request_id);
  m.header.mutable_eval_gather()->set_round(round);
  m.header.mutable_eval_gather()->set_want(want);
  EvalPartial p;
  p.set_rank(rank);
  p.set_rows(rows);
  EXPECT_TRUE(PackEvalPartials({p}, &m).ok());
  return m;
}

MessageHeader ChunkRequest(int rank, uint64_t request_id, uint64_t completed_id = 0, int64_t rows = 0) {
  MessageHeader h;
  h.set_type(CHUNK_NEXT);
  h.set_sender_rank(rank);
  h.set_request_id(request_id);
  DataOnDemandChunk* c = h.mutable_chunk_next();
  c->set_train_rows(200);
  c->set_chunk_rows(16);
  c->set_epochs(2);
  c->set_seed(3);
  c->set_completed_id(completed_id);
  c->set_completed_rows(rows);
  return h;
}

AdaptiveBatchClock Adaptive(int64_t rows) {
  AdaptiveBatchClock r;
  r.set_rows(rows);
  r.set_batch_size(32);
  r.set_minibatch_size(32);
  r.mutable_config()->set_enabled(true);
  r.mutable_config()->set_b_min(8);
  r.mutable_config()->set_b_max(128);
  r.mutable_config()->set_warmup_clocks(1);
  r.mutable_config()->set_window_clocks(2);
  r.mutable_config()->set_smoothing(0.5);
  return r;
}

std::chrono::steady_clock::time_point At(int64_t ms) {
  return std::chrono::steady_clock::time_point(std::chrono::milliseconds(ms));
}

TEST(JobCoordinatorTest, ClockPicksTheCheckpointClockAndTheBatchSize) {
  RecordingOutbox out;
  auto c = MakeLocalCoordinator(Options(2, 2), &out);
  ClockReport r;
  r.rank = 1;
  r.want_checkpoint = true;
  r.latest_clock = 9;
  ClockReplyBody reply;
  ASSERT_TRUE(c->Clock(r, &reply).ok());
  EXPECT_EQ(reply.checkpoint_clock(), 11);
  EXPECT_FALSE(reply.has_batch_size());
  // Every later CLOCK is told the same clock until a round reaches it.
  r.want_checkpoint = false;
  const AdaptiveBatchClock a = Adaptive(32);
  r.adaptive = &a;
  reply.Clear();
  ASSERT_TRUE(c->Clock(r, &reply).ok());
  EXPECT_EQ(reply.checkpoint_clock(), 11);
  EXPECT_EQ(reply.batch_size(), 32);
  c->RoundEnded(11, true, "ckpt-11", {});
  reply.Clear();
  ASSERT_TRUE(c->Clock(r, &reply).ok());
  EXPECT_FALSE(reply.has_checkpoint_clock());
  // Other settings are refused.
  AdaptiveBatchClock other = Adaptive(32);
  other.mutable_config()->set_b_max(64);
  r.adaptive = &other;
  EXPECT_EQ(c->Clock(r, &reply).code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(out.sent.empty());  // the host replies to a CLOCK
}

TEST(JobCoordinatorTest, TheFirstEvaluatorStays) {
  RecordingOutbox out;
  auto c = MakeLocalCoordinator(Options(), &out);
  EXPECT_EQ(c->Evaluator(1), 1);
  EXPECT_EQ(c->Evaluator(0), 1);
  EXPECT_EQ(c->Snapshot().evaluator_rank(), 1);
}

TEST(JobCoordinatorTest, AWaitingGatherIsAnsweredWhenTheLastRankLeaves) {
  RecordingOutbox out;
  auto c = MakeLocalCoordinator(Options(3, 3), &out);
  for (int r = 0; r < 3; ++r) c->WorkerJoined(r, false);
  ASSERT_TRUE(c->EvalGather("w0", Gather(0, 1, EvalGatherBody::EVAL_WAIT, 5, 10)).ok());
  ASSERT_TRUE(c->EvalGather("w1", Gather(1, 1, EvalGatherBody::EVAL_ACK, 6, 20)).ok());
  ASSERT_EQ(out.headers.size(), 1u);  // the ACK's answer only
  EXPECT_FALSE(out.headers[0].eval_gather_reply().complete());
  c->WorkerLeft(2);  // rank 2 owes nothing now: the round is complete
  ASSERT_EQ(out.headers.size(), 2u);
  EXPECT_EQ(out.headers[1].request_id(), 5u);
  EXPECT_TRUE(out.headers[1].eval_gather_reply().complete());
  ASSERT_EQ(out.partials.size(), 2u);
  EXPECT_EQ(out.partials[0].rows() + out.partials[1].rows(), 30);
  // A partial of another rank is refused.
  Message m = Gather(1, 2, EvalGatherBody::EVAL_POLL, 7, 1);
  m.header.set_sender_rank(0);
  EXPECT_EQ(c->EvalGather("w0", m).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(out.headers.back().type(), ERROR_REPLY);
}

TEST(JobCoordinatorTest, FailWaitingTellsEveryParkedGather) {
  RecordingOutbox out;
  auto c = MakeLocalCoordinator(Options(2, 2), &out);
  ASSERT_TRUE(c->EvalGather("w0", Gather(0, 1, EvalGatherBody::EVAL_WAIT, 5, 10)).ok());
  ASSERT_TRUE(c->EvalGather("w0", Gather(0, 2, EvalGatherBody::EVAL_WAIT, 6, 10)).ok());
  EXPECT_EQ(c->FailWaiting("the job failed"), 2);
  ASSERT_EQ(out.headers.size(), 2u);
  EXPECT_EQ(out.headers[1].type(), ERROR_REPLY);
  EXPECT_EQ(out.headers[1].error_reply().error(), "the job failed");
  EXPECT_EQ(c->FailWaiting("again"), 0);
}

TEST(JobCoordinatorTest, WorkersWaitingAtRoundsThatCannotCompleteAreFailedAtOnce) {
  // Worker 0 waits at the validation after epoch 8, worker 1 (restarted at
  // epoch 6) at epoch 6's: neither round can complete.
  RecordingOutbox out;
  auto c = MakeLocalCoordinator(Options(2, 2), &out);
  for (int r = 0; r < 2; ++r) c->WorkerJoined(r, false);
  ASSERT_TRUE(c->EvalGather("w0", Gather(0, kValidationEvalRound + 8, EvalGatherBody::EVAL_WAIT, 5, 10)).ok());
  EXPECT_TRUE(out.headers.empty());  // worker 1 still trains: it may reach round 8
  ASSERT_TRUE(c->EvalGather("w1", Gather(1, kValidationEvalRound + 6, EvalGatherBody::EVAL_WAIT, 6, 10)).ok());
  ASSERT_EQ(out.headers.size(), 2u);
  for (const MessageHeader& h : out.headers) {
    EXPECT_EQ(h.type(), ERROR_REPLY);
    EXPECT_EQ(h.error_reply().error().rfind("no evaluation round can complete: worker 0 at the validation after "
                                            "epoch 8, worker 1 at the validation after epoch 6 (workers at different "
                                            "epochs",
                                            0),
              0u)
        << h.error_reply().error();
  }
  EXPECT_EQ(c->FailWaiting("again"), 0);
}

TEST(JobCoordinatorTest, ARestartedRanksOldWaitIsForgotten) {
  RecordingOutbox out;
  auto c = MakeLocalCoordinator(Options(2, 2), &out);
  for (int r = 0; r < 2; ++r) c->WorkerJoined(r, false);
  ASSERT_TRUE(c->EvalGather("w1", Gather(1, kValidationEvalRound + 6, EvalGatherBody::EVAL_WAIT, 6, 10)).ok());
  c->WorkerJoined(1, true);  // a new process for rank 1: the old one waits no more
  ASSERT_TRUE(c->EvalGather("w0", Gather(0, kValidationEvalRound + 7, EvalGatherBody::EVAL_WAIT, 5, 10)).ok());
  EXPECT_TRUE(out.headers.empty());  // the new rank 1 trains on: nothing is failed
  EXPECT_EQ(c->FailWaiting("stop"), 1);
}

TEST(JobCoordinatorTest, ChunksOfALeavingRankAreDealtAgain) {
  RecordingOutbox out;
  auto c = MakeLocalCoordinator(Options(2, 2), &out);
  ASSERT_TRUE(c->ChunkNext("w0", ChunkRequest(0, 1), 0).ok());
  ASSERT_EQ(out.headers.back().type(), CHUNK_REPLY);
  const uint64_t first = out.headers.back().chunk_reply().id();
  c->WorkerLeft(0);
  ASSERT_TRUE(c->ChunkNext("w1", ChunkRequest(1, 2), 0).ok());
  EXPECT_TRUE(out.headers.back().chunk_reply().redealt());
  EXPECT_NE(out.headers.back().chunk_reply().id(), first);
  ShardStats stats;
  c->FillStats(&stats);
  EXPECT_EQ(stats.chunks_dealt(), 2u);
  EXPECT_EQ(stats.chunks_redealt(), 1u);
  // A request of another shape is refused.
  MessageHeader other = ChunkRequest(1, 3);
  other.mutable_chunk_next()->set_train_rows(201);
  EXPECT_EQ(c->ChunkNext("w1", other, 0).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(out.headers.back().type(), ERROR_REPLY);
}

TEST(JobCoordinatorTest, AStateOfAnotherFormatOrMalformedIsRefusedAndChangesNothing) {
  RecordingOutbox out;
  auto c = MakeLocalCoordinator(Options(), &out);
  EXPECT_EQ(c->Evaluator(2), 2);
  CoordinatorState s = c->Snapshot();
  s.set_format_version(kCoordinatorStateFormatVersion + 1);
  EXPECT_EQ(c->Restore(s).code(), Status::Code::kInvalidArgument);
  s.set_format_version(kCoordinatorStateFormatVersion);
  s.set_evaluator_rank(0);
  s.add_ranks()->set_rank(-1);
  EXPECT_EQ(c->Restore(s).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(c->Snapshot().evaluator_rank(), 2);
}

// Drives two coordinators with the same random events: `a` from the start,
// `b` restored from a's snapshot at step `copy_at`. From then on every
// message each sends, every status and every reply field it sets must be
// the same, and so must their snapshots. `b` is copied again from `a` now
// and then, so that copies are taken in many states.
class Schedule {
 public:
  Schedule(uint32_t seed, int copy_at) : rng_(seed), copy_at_(copy_at) {}

  void Run(int steps) {
    a_ = MakeLocalCoordinator(Options(), &out_a_);
    for (int r = 0; r < 3; ++r) Both([&](JobCoordinator* c) { c->WorkerJoined(r, false); return Status::OK(); });
    for (step_ = 0; step_ < steps; ++step_) {
      if (step_ == copy_at_ || (step_ > copy_at_ && step_ % 97 == 0)) {  // copied again now and then
        b_ = MakeLocalCoordinator(Options(), &out_b_);
        ASSERT_TRUE(b_->Restore(a_->Snapshot()).ok());
        ASSERT_EQ(b_->Snapshot().SerializeAsString(), a_->Snapshot().SerializeAsString());
      }
      Step();
      if (b_) {
        ASSERT_EQ(out_b_.sent, out_a_.sent) << "step " << step_;
        ASSERT_EQ(b_->Snapshot().SerializeAsString(), a_->Snapshot().SerializeAsString()) << "step " << step_;
      }
      out_a_.sent.clear();
      out_b_.sent.clear();
    }
    ASSERT_TRUE(b_ != nullptr);
    for (const auto& [kind, n] : counts_) ::testing::Test::RecordProperty(kind, n);
    // The schedule reached every kind of event often enough to mean something.
    for (const char* kind : {"clock", "chunk", "gather", "barrier", "leave", "remove", "join", "round", "evaluator"})
      EXPECT_GT(counts_[kind], 3) << kind;
  }

 private:
  // Applies `f` to a, then to b (when copied), with the same result.
  template <typename F>
  void Both(F f) {
    const Status sa = f(a_.get());
    if (b_) {
      const Status sb = f(b_.get());
      EXPECT_EQ(sb.code(), sa.code()) << "step " << step_ << ": " << sa.message() << " / " << sb.message();
      EXPECT_EQ(sb.message(), sa.message());
    }
  }

  void Step() {
    const int rank = static_cast<int>(rng_() % 5);
    const std::string id = "w" + std::to_string(rank) + "-" + std::to_string(incarnation_[rank]);
    const uint64_t request = ++request_id_;
    switch (rng_() % 12) {
      case 0:
      case 1: return ClockEvent(rank);
      case 2:
      case 3: return ChunkEvent(rank, id, request);
      case 4:
      case 5: return GatherEvent(rank, id, request);
      case 6: return BarrierEvent(rank);
      case 7: return LeaveEvent(rank);
      case 8: return JoinEvent(rank);
      case 9: return RoundEvent();
      case 10: return EvaluatorEvent();
      default: return StatsEvent();
    }
  }

  void ClockEvent(int rank) {
    ++counts_["clock"];
    clock_[rank] += 1;
    ClockReport r;
    r.rank = rank;
    r.want_checkpoint = rng_() % 9 == 0;
    const AdaptiveBatchClock report = Adaptive(16 + rng_() % 64);
    r.adaptive = rng_() % 4 != 0 ? &report : nullptr;
    r.latest_clock = clock_[rank];
    r.bound_wait_s = 0.001 * (wait_ms_[rank] += rng_() % 5);
    r.now = At(now_ms_ += 1 + rng_() % 20);
    ClockReplyBody ra, rb;
    Both([&](JobCoordinator* c) { return c->Clock(r, c == a_.get() ? &ra : &rb); });
    if (b_) {
      EXPECT_EQ(rb.SerializeAsString(), ra.SerializeAsString()) << "step " << step_;
    }
  }

  // CHUNK_NEXT, completing what the rank holds.
  void ChunkEvent(int rank, const std::string& id, uint64_t request) {
    ++counts_["chunk"];
    const uint64_t done = held_[rank];
    MessageHeader h = ChunkRequest(rank, request, done, done != 0 ? 10 + rng_() % 6 : 0);
    const int64_t max_clock = static_cast<int64_t>(rng_() % 30);
    Both([&](JobCoordinator* c) { return c->ChunkNext(id, h, max_clock); });
    const MessageHeader& last = out_a_.headers.back();
    held_[rank] = last.type() == CHUNK_REPLY && last.chunk_reply().kind() == DataOnDemandChunk::CHUNK ? last.chunk_reply().id() : 0;
  }

  void GatherEvent(int rank, const std::string& id, uint64_t request) {
    ++counts_["gather"];
    const int64_t round = static_cast<int64_t>(rng_() % 3);
    const auto want = static_cast<EvalGatherBody::EvalWant>(rng_() % 3);
    Message m = Gather(rank, round, want, request, 1 + rng_() % 100);
    Both([&](JobCoordinator* c) {
      Message copy;
      copy.header = m.header;
      copy.values.copy(m.values);
      return c->EvalGather(id, copy);
    });
  }

  void BarrierEvent(int rank) {
    ++counts_["barrier"];
    CheckpointWorker entry;
    entry.set_final_loss(0.01 * (rng_() % 100));
    const uint64_t samples = rng_() % 1000;
    Both([&](JobCoordinator* c) {
      c->WorkerFinished(rank, samples, entry);
      return Status::OK();
    });
  }

  // A BYE or a removal for silence.
  void LeaveEvent(int rank) {
    const bool bye = rng_() % 2 == 0;
    ++counts_[bye ? "leave" : "remove"];
    Both([&](JobCoordinator* c) {
      bye ? c->WorkerLeft(rank) : c->WorkerRemoved(rank);
      return Status::OK();
    });
    held_[rank] = 0;
  }

  // A HELLO: a join, or a restarted process.
  void JoinEvent(int rank) {
    ++counts_["join"];
    const bool rejoined = joined_[rank];
    joined_[rank] = true;
    ++incarnation_[rank];
    Both([&](JobCoordinator* c) {
      c->WorkerJoined(rank, rejoined);
      return Status::OK();
    });
    held_[rank] = 0;
  }

  // A checkpoint round ends: written, failed or abandoned.
  void RoundEvent() {
    ++counts_["round"];
    std::map<int, CheckpointFile> files;
    for (int r = 0; r < 5; ++r) {
      if (rng_() % 2) continue;
      files[r].set_name("worker-" + std::to_string(r) + ".state");
      files[r].set_bytes(rng_() % 5000);
    }
    const int64_t at = static_cast<int64_t>(rng_() % 40);
    const int how = static_cast<int>(rng_() % 3);
    const std::string dir = "ckpt-" + std::to_string(at);
    google::protobuf::RepeatedPtrField<CheckpointWorker> ea, eb;
    ChunkCoordinatorState ca, cb;
    Both([&](JobCoordinator* c) {
      const bool a = c == a_.get();
      c->ManifestEntries(files, a ? &ea : &eb);
      (void)c->ChunkState(at, a ? &ca : &cb);
      if (how == 2) {
        c->RoundAbandoned(at);
      } else {
        c->RoundEnded(at, how == 0, dir, files);
      }
      return Status::OK();
    });
    if (!b_) return;
    ASSERT_EQ(ea.size(), eb.size());
    for (int i = 0; i < ea.size(); ++i) EXPECT_EQ(eb[i].SerializeAsString(), ea[i].SerializeAsString());
    EXPECT_EQ(cb.SerializeAsString(), ca.SerializeAsString());
  }

  // The barrier's release.
  void EvaluatorEvent() {
    ++counts_["evaluator"];
    const int lowest = static_cast<int>(rng_() % 3);
    int ea = -1;
    Both([&](JobCoordinator* c) {
      const int e = c->Evaluator(lowest);
      if (c == a_.get()) {
        ea = e;
      } else {
        EXPECT_EQ(e, ea);
      }
      return Status::OK();
    });
  }

  void StatsEvent() {
    ShardStats sa, sb;
    Both([&](JobCoordinator* c) {
      c->FillStats(c == a_.get() ? &sa : &sb);
      return Status::OK();
    });
    if (!b_) return;
    EXPECT_EQ(sb.SerializeAsString(), sa.SerializeAsString());
    EXPECT_EQ(b_->DataDone(), a_->DataDone());
  }

  std::mt19937 rng_;
  int copy_at_;
  int step_ = 0;
  RecordingOutbox out_a_, out_b_;
  std::unique_ptr<JobCoordinator> a_, b_;
  std::map<std::string, int> counts_;
  std::map<int, int64_t> clock_, wait_ms_;
  std::map<int, uint64_t> held_;
  std::map<int, bool> joined_ = {{0, true}, {1, true}, {2, true}};
  std::map<int, int> incarnation_;
  int64_t now_ms_ = 1000;
  uint64_t request_id_ = 0;
};

TEST(JobCoordinatorTest, ARestoredCoordinatorAnswersExactlyAsTheOriginal) {
  for (uint32_t seed = 1; seed <= 6; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Schedule(seed, /*copy_at=*/static_cast<int>(seed * 37 % 150)).Run(600);
  }
}

}  // namespace
}  // namespace tether
