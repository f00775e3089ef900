// Chain replication (replication/) carrying a real shard: the inputs a
// shard took in while Bibtex trained are appended at a primary, forwarded
// down the chain and replayed (ServerShard::Replay) into each member's own
// copy of the shard, under random schedules of deliveries, acknowledgements,
// member kills, a paused primary that wakes after it was replaced, and
// learners that copy the tail's state and join the chain.
//
// Links are FIFO and lose what is in flight only when their sender dies;
// a view change reaches every live, unpaused process at once (lost
// announcements are replication/failover_schedule_test.cc's). After a
// failover the new primary goes on from the inputs it has (a worker
// resends what was never acknowledged, in its order).
//
// Checked, with exact counts: no member ever replays an input twice or out
// of order (each kApply is the next input; a resend is kDuplicate); every
// acknowledged input survives each failover (every member of the new view
// has applied it); a woken former primary commits nothing; at the end every
// live member has replayed each input exactly once and its copy is bit for
// bit the state of one copy that replayed every input in order (the tables
// as a checkpoint writes them, budget state, clocks).
#include <gtest/gtest.h>

#include <deque>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "replication/chain_view.h"
#include "replication/replication_log.h"
#include "server/server.h"
#include "server/shard_input.h"
#include "tests/testing/recorded_job.h"
#include "tests/testing/temp_dir.h"

namespace tether {
namespace {

// A server process holding (or copying) the shard.
struct Process {
  explicit Process(int slot) : log(slot) {}
  ReplicationLog log;
  std::unique_ptr<ServerShard> copy;
  bool alive = true, paused = false;
  uint64_t replays = 0, base = 0;  // inputs replayed into copy; the seq its state started at
};

struct Msg {
  bool ack = false;
  ChainView view;
  LogEntry entry;          // a forward's
  uint64_t committed = 0;  // an acknowledgement's
};

struct Counts {
  int failovers = 0, pauses = 0, joins = 0, state_copies = 0, duplicates = 0, stale = 0, deposed_appends = 0;
};

class Schedule {
 public:
  Schedule(const JobConfig& c, int shard, const std::vector<std::string>& inputs, uint32_t seed)
      : c_(c), shard_(shard), inputs_(inputs), rng_(seed) {}

  // Runs to the end; returns the live members of the final view.
  std::vector<Process*> Run();
  const Counts& counts() const { return n_; }
  uint64_t acknowledged() const { return acknowledged_; }

 private:
  bool Chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  int Pick(int n) { return static_cast<int>(rng_() % n); }
  Process& P(int slot) { return *procs_[slot]; }
  bool Up(int slot) { return slot >= 0 && P(slot).alive && !P(slot).paused; }
  void Start(int members);
  void Replay(Process& p, const std::string& input);
  void Announce(const ChainView& v);
  void Append();
  void Forward(int slot);
  void Ack(int slot);
  bool Deliver();
  void Receive(int from, int to, const Msg& m);
  void Kill(int slot);
  void PausePrimary();
  void Wake();
  void Join();
  void CopyToLearner();
  bool Quiet();

  const JobConfig& c_;
  int shard_;
  const std::vector<std::string>& inputs_;
  std::mt19937 rng_;
  std::vector<std::unique_ptr<Process>> procs_;
  std::map<std::pair<int, int>, std::deque<Msg>> links_;
  ChainView view_;
  uint64_t acknowledged_ = 0;
  int paused_ = -1;
  Counts n_;
};

void Schedule::Replay(Process& p, const std::string& input) {
  ShardInput in;
  ASSERT_TRUE(DecodeShardInput(input, "the chain", &in).ok());
  ASSERT_TRUE(p.copy->Replay(in.identity, &in.message).ok());
  ++p.replays;
}

void Schedule::Start(int members) {
  for (int s = 0; s < members; ++s) {
    procs_.push_back(std::make_unique<Process>(s));
    procs_.back()->copy = std::make_unique<ServerShard>(c_, shard_);
  }
  view_ = InitialChain(0, members, members - 1);
  Announce(view_);
}

void Schedule::Announce(const ChainView& v) {
  view_ = v;
  for (auto& p : procs_)
    if (p->alive && !p->paused) p->log.Adopt(v);
  // Nothing acknowledged is lost: every member has applied it.
  for (int m : v.members) EXPECT_GE(P(m).log.applied(), acknowledged_) << v.ToString();
}

void Schedule::Append() {
  Process& p = P(view_.primary());
  const uint64_t next = p.log.applied();
  if (next >= inputs_.size()) return;
  EXPECT_EQ(p.log.Append(inputs_[next]), next + 1);
  Replay(p, inputs_[next]);
}

void Schedule::Forward(int slot) {
  Process& p = P(slot);
  if (slot == view_.tail() && view_.learner >= 0 && p.log.successor() < 0) CopyToLearner();
  const int to = p.log.successor();
  if (to < 0) return;
  for (LogEntry& e : p.log.TakeForward()) {
    Msg m;
    m.view = p.log.view();
    m.entry = std::move(e);
    links_[{slot, to}].push_back(std::move(m));
  }
}

void Schedule::Ack(int slot) {
  Process& p = P(slot);
  const int to = p.log.view().Predecessor(slot);
  if (to < 0) return;
  Msg m;
  m.ack = true;
  m.view = p.log.view();
  m.committed = p.log.AckValue();
  links_[{slot, to}].push_back(std::move(m));
}

bool Schedule::Deliver() {
  std::vector<std::pair<int, int>> ready;
  for (auto& [link, q] : links_)
    if (!q.empty() && Up(link.second)) ready.push_back(link);
  if (ready.empty()) return false;
  const auto link = ready[Pick(static_cast<int>(ready.size()))];
  Msg m = std::move(links_[link].front());
  links_[link].pop_front();
  Receive(link.first, link.second, m);
  return true;
}

void Schedule::Receive(int from, int to, const Msg& m) {
  Process& p = P(to);
  if (m.ack) {
    p.log.OnAck(from, m.view, m.committed);
  } else {
    switch (p.log.Receive(from, m.view, m.entry)) {
      case ReplicationLog::Receipt::kApply:
        ASSERT_EQ(m.entry.seq, p.base + p.replays + 1) << "an input out of order";
        ASSERT_EQ(m.entry.payload, inputs_[m.entry.seq - 1]);
        Replay(p, m.entry.payload);
        break;
      case ReplicationLog::Receipt::kDuplicate: ++n_.duplicates; break;
      case ReplicationLog::Receipt::kGap: ADD_FAILURE() << "a gap on a FIFO link"; break;
      case ReplicationLog::Receipt::kStale:
      case ReplicationLog::Receipt::kNotMine:
        ++n_.stale;
        // The sender learns the view that replaced its own; a process left
        // out of it exits (its copy goes).
        if (Up(from) && P(from).log.Adopt(p.log.view()) && P(from).log.role() == ReplicationLog::Role::kOut)
          P(from).alive = false;
        break;
    }
  }
  if (to == view_.primary()) acknowledged_ = std::max(acknowledged_, p.log.commit());
}

void Schedule::Kill(int slot) {
  P(slot).alive = false;
  for (auto& [link, q] : links_)
    if (link.first == slot) q.clear();  // in flight from it: lost with it
  ++n_.failovers;
  Announce(Without(view_, {slot}));
}

void Schedule::PausePrimary() {
  paused_ = view_.primary();
  P(paused_).paused = true;
  ++n_.pauses;
  Announce(Without(view_, {paused_}));  // silent past the liveness timeout: gone
}

void Schedule::Wake() {
  Process& p = P(paused_);
  p.paused = false;
  // It still takes itself for the primary: a worker's push reaches it, it
  // applies and forwards it; its old successor refuses it.
  if (p.log.role() == ReplicationLog::Role::kPrimary && p.log.applied() < inputs_.size()) {
    const uint64_t commit = p.log.commit();
    p.log.Append(inputs_[p.log.applied()]);
    ++n_.deposed_appends;
    Forward(paused_);
    EXPECT_EQ(p.log.commit(), commit);
  }
  paused_ = -1;
}

void Schedule::Join() {
  const int slot = static_cast<int>(procs_.size());
  procs_.push_back(std::make_unique<Process>(slot));
  Announce(WithLearner(view_, slot));
  ++n_.joins;
}

void Schedule::CopyToLearner() {
  // The tail's state as of applied() (here: its inputs replayed in order
  // into a fresh copy), again whenever the tail changed under a learner.
  Process& tail = P(view_.tail());
  Process& learner = P(view_.learner);
  const uint64_t at = tail.log.applied();
  learner.copy = std::make_unique<ServerShard>(c_, shard_);
  for (uint64_t i = 0; i < at; ++i) Replay(learner, inputs_[i]);
  learner.replays = 0;
  learner.base = at;
  learner.log.ResetTo(at);
  tail.log.StartLearnerAt(at);
  ++n_.state_copies;
}

bool Schedule::Quiet() {
  for (auto& [link, q] : links_)
    if (!q.empty() && Up(link.second)) return false;
  for (int m : view_.members)
    if (P(m).log.applied() < inputs_.size() || P(m).log.commit() < inputs_.size()) return false;
  return view_.learner < 0;
}

std::vector<Process*> Schedule::Run() {
  Start(3);
  for (int step = 0; step < 200000 && !Quiet(); ++step) {
    const int live = static_cast<int>(view_.members.size());
    if (Chance(0.004) && n_.failovers < 3 && live > 1) {
      Kill(view_.members[Pick(live)]);
    } else if (Chance(0.002) && paused_ < 0 && n_.pauses < 1 && live > 1) {
      PausePrimary();
    } else if (paused_ >= 0 && Chance(0.01)) {
      Wake();
    } else if (Chance(0.004) && view_.learner < 0 && n_.joins < 3) {
      Join();
    } else if (view_.learner >= 0 && P(view_.tail()).log.LearnerCaughtUp() && Chance(0.05)) {
      Announce(WithLearnerAppended(view_));
    } else if (Chance(0.35)) {
      Append();
    } else if (Chance(0.3)) {
      Forward(view_.members[Pick(live)]);
      if (view_.learner >= 0) Forward(view_.tail());
    } else if (Chance(0.3)) {
      const int who = Pick(live + (view_.learner >= 0 ? 1 : 0));
      Ack(who < live ? view_.members[who] : view_.learner);
    } else {
      Deliver();
    }
    if (::testing::Test::HasFatalFailure()) return {};
  }
  if (paused_ >= 0) Wake();
  EXPECT_TRUE(Quiet()) << "the schedule did not settle: " << view_.ToString();
  std::vector<Process*> live;
  for (int m : view_.members) live.push_back(&P(m));
  return live;
}

class ReplicatedShardScheduleTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    config_ = new JobConfig(testing::SmallBibtexJob());
    job_ = new testing::RecordedJob(testing::RunRecordedJob(*config_));
  }
  static void TearDownTestSuite() {
    delete job_;
    delete config_;
  }
  static JobConfig* config_;
  static testing::RecordedJob* job_;
};
JobConfig* ReplicatedShardScheduleTest::config_ = nullptr;
testing::RecordedJob* ReplicatedShardScheduleTest::job_ = nullptr;

TEST_F(ReplicatedShardScheduleTest, EveryLiveMemberEndsAsOneInOrderReplay) {
  for (const Status& st : job_->workers) ASSERT_TRUE(st.ok()) << st.ToString();
  const int shard = 1;
  const std::vector<std::string>& inputs = job_->inputs[shard];
  ASSERT_GT(inputs.size(), 500u);
  testing::ScopedTempDir tmp;
  const testing::ShardDigest want =
      testing::DigestShard(job_->shards[shard]->shard(), *config_, shard, tmp.File("primary"));
  Counts total;
  for (uint32_t seed = 1; seed <= 12; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Schedule schedule(*config_, shard, inputs, seed);
    const std::vector<Process*> live = schedule.Run();
    ASSERT_FALSE(::testing::Test::HasFatalFailure());
    ASSERT_FALSE(live.empty());
    EXPECT_EQ(schedule.acknowledged(), inputs.size());
    for (size_t i = 0; i < live.size(); ++i) {
      EXPECT_EQ(live[i]->base + live[i]->replays, inputs.size()) << "an input replayed twice or never";
      EXPECT_TRUE(testing::DigestShard(*live[i]->copy, *config_, shard,
                           tmp.File("s" + std::to_string(seed) + "m" + std::to_string(i))) == want);
    }
    const Counts& n = schedule.counts();
    total.failovers += n.failovers;
    total.pauses += n.pauses;
    total.joins += n.joins;
    total.state_copies += n.state_copies;
    total.duplicates += n.duplicates;
    total.stale += n.stale;
    total.deposed_appends += n.deposed_appends;
  }
  // The schedules exercised what they claim to.
  std::printf("12 schedules over %zu inputs: %d failovers, %d pauses (%d deposed appends), %d joins (%d state copies), "
              "%d duplicate resends, %d stale refusals\n",
              inputs.size(), total.failovers, total.pauses, total.deposed_appends, total.joins, total.state_copies,
              total.duplicates, total.stale);
  EXPECT_GT(total.failovers, 0);
  EXPECT_GT(total.joins, 0);
  EXPECT_GT(total.duplicates, 0);
}

}  // namespace
}  // namespace tether
