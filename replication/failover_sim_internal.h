// The simulation behind replication/failover_sim.h: simulated server
// processes, workers and the FIFO links between them, delivered in a random
// order. Only the simulation's sources include it.
#pragma once

#include <algorithm>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "replication/chain_view.h"
#include "replication/commit_waiters.h"
#include "replication/replication_log.h"
#include "replication/update_dedup.h"
#include "replication/failover_sim.h"
#include "replication/update_window.h"

namespace tether::failover_sim {

inline constexpr int kWorkerBase = 1000;  // endpoint ids: servers 0.., workers 1000 + rank

// A worker's update to one shard: a push of +1 to its own row, or a clock.
struct Update {
  int rank = 0;
  uint64_t seq = 0;
  bool clock = false;
};

inline std::string Encode(const Update& u) {
  std::string s(sizeof(Update), '\0');
  std::memcpy(s.data(), &u, sizeof(Update));
  return s;
}
inline Update Decode(const std::string& s) {
  Update u;
  std::memcpy(&u, s.data(), sizeof(Update));
  return u;
}

inline uint64_t Mix(uint64_t digest, const Update& u) {
  return digest * 1000003u + (static_cast<uint64_t>(u.rank) << 40) + (u.seq << 1) + (u.clock ? 1 : 0);
}

// The state machine every member of a shard holds.
struct ShardState {
  std::vector<int64_t> rows;    // per rank: pushes applied
  std::vector<int64_t> clocks;  // per rank
  UpdateDedup dedup;
  std::vector<Update> order;  // every update applied, in order
  std::vector<uint64_t> digests{0};  // digest after each prefix of `order`

  explicit ShardState(int workers = 0) : rows(workers, 0), clocks(workers, 0) {}
  void Apply(const Update& u, uint64_t log_seq) {
    ASSERT_EQ(dedup.Check(u.rank, u.seq), UpdateDedup::Verdict::kNew)
        << "rank " << u.rank << " update " << u.seq << " applied out of order or twice";
    dedup.Applied(u.rank, u.seq, log_seq);
    (u.clock ? clocks : rows)[u.rank] += 1;
    order.push_back(u);
    digests.push_back(Mix(digests.back(), u));
  }
  int64_t MinClock() const { return *std::min_element(clocks.begin(), clocks.end()); }
};

struct Msg {
  enum Kind { kUpdate, kPull, kAck, kPullReply, kView, kQuery, kForward, kChainAck, kState, kJoin, kCaughtUp };
  Kind kind = kView;
  int shard = 0;
  ChainView view;  // the sender's view of the shard
  Update update;
  uint64_t id = 0;        // pull id
  int64_t clock = 0;      // pull clock
  uint64_t value = 0;     // kAck: updates up to; kChainAck: committed; kState: seq
  std::vector<LogEntry> entries;
  std::shared_ptr<const ShardState> state;  // kPullReply (as read), kState
  bool answer = false;                       // kView: the answer to a kQuery
};

inline Msg Make(Msg::Kind kind, int shard, const ChainView& view) {
  Msg m;
  m.kind = kind;
  m.shard = shard;
  m.view = view;
  return m;
}

struct Member {
  explicit Member(int self, int workers) : log(self), state(workers) {}
  ReplicationLog log;
  ShardState state;
  CommitWaiters waiters;
  struct Held {
    int worker;
    Msg reply;
  };
  std::map<uint64_t, Held> held;          // by waiter id
  std::vector<std::pair<int, Msg>> pulls;  // (worker, pull) waiting for the bound
  bool caught_up_sent = false;
  // A primary that sends to each replica itself (fan-out): per replica, the
  // last entry sent and acknowledged.
  std::map<int, uint64_t> sent, acked;
};

enum class Status { kLive, kPaused, kDead };

struct Proc {
  Status status = Status::kLive;
  // Woken from a pause, it hears the chain out before it may suspect
  // anyone (core/stall_watch.h): it asks every process for its views and
  // waits for the answers of those not dead (answers_due, per process).
  bool hearing_out = false;
  std::map<int, int> answers_due;
  std::vector<ChainView> views;                // the newest view of each shard it knows
  std::map<int, std::unique_ptr<Member>> members;  // shards it is in (member or learner)
};

struct WorkerSim {
  int rank = 0;
  int64_t clock = 0;
  std::vector<ChainView> views;
  std::vector<ChainView> queried;  // the view it last asked about, per shard
  std::vector<UpdateWindow<Update>> windows;
  std::vector<int64_t> sent_pushes;  // per shard
  bool pulling = false;
  int pull_shard = 0;
  uint64_t pull_id = 0;
};

using Counts = ScheduleCounts;

class Sim {
 public:
  Sim(int processes, int replicas, int workers, int64_t staleness, uint32_t seed, bool fan_out)
      : shards_(processes),
        replicas_(replicas),
        workers_(workers),
        staleness_(staleness),
        fan_out_(fan_out),
        rng_(seed) {
    for (int p = 0; p < processes; ++p) AddProcess();
    for (int s = 0; s < shards_; ++s) {
      const ChainView v = InitialChain(s, processes, replicas);
      for (int p = 0; p < processes; ++p) procs_[p].views[s] = v;
      for (int m : v.members) {
        procs_[m].members[s] = std::make_unique<Member>(m, workers_);
        procs_[m].members[s]->log.Adopt(MemberView(v, m));
      }
    }
    for (int r = 0; r < workers_; ++r) {
      WorkerSim w;
      w.rank = r;
      for (int s = 0; s < shards_; ++s) w.views.push_back(InitialChain(s, processes, replicas));
      w.windows.resize(shards_);
      w.queried.resize(shards_);
      w.sent_pushes.assign(shards_, 0);
      ws_.push_back(std::move(w));
    }
  }

  void Run(int steps, bool pauses, bool joins);
  void Quiesce();
  void Check();
  const Counts& counts() const { return counts_; }

 private:
  int AddProcess() {
    Proc p;
    p.views.resize(shards_);
    procs_.push_back(std::move(p));
    return static_cast<int>(procs_.size()) - 1;
  }
  bool Up(int p) const { return procs_[p].status == Status::kLive; }
  void Send(int from, int to, Msg m) {
    if (to < kWorkerBase && procs_[to].status == Status::kDead) return;
    links_[{from, to}].push_back(std::move(m));
  }
  bool DeliverOne();
  void Deliver(int from, int to, const Msg& m);
  void OnServer(int p, int from, const Msg& m);
  void OnWorker(WorkerSim& w, int from, const Msg& m);
  // Server side.
  void LearnView(int p, int shard, const ChainView& v);
  void Announce(int p, int shard, const ChainView& v);
  void AfterChange(int p, int shard);
  void Primary(int p, int from, const Msg& m);
  void ServePulls(int p, int shard);
  void ReleaseCommitted(int p, int shard);
  void Suspect(int p);
  void Query(int from, int shard);
  void Resume(int p);
  // Worker side.
  // A push and a clock on every shard, or (may_pull) a pull of one shard.
  void WorkerStep(WorkerSim& w, bool may_pull);
  // A worker whose primary of a shard is dead asks everyone, once per view.
  void WorkerQuery(WorkerSim& w);
  void SendUpdate(WorkerSim& w, int shard, const Update& u);
  void CheckRead(const WorkerSim& w, const Msg& m);
  std::vector<int> GoneOf(const ChainView& v, int observer) const;
  void Kill();
  // Counts the places `p` holds in the shards' newest views.
  void CountKill(int p);
  void Join();
  // Fan-out (failover_sim_fanout.cc): the view a member's log holds (a
  // replica's own: the primary, then itself, so that it takes entries from
  // the primary), the primary's sends and the replicas' acknowledgements,
  // the claim that leaves the later copies out, and their join again.
  ChainView MemberView(const ChainView& v, int p) const;
  void FanOut(int p, int shard);
  void OnFanOutAck(int p, int from, const Msg& m);
  ChainView ClaimView(const ChainView& v, std::vector<int> gone, int p) const;
  void Rejoin(int p, int shard, const ChainView& v);

  int shards_, replicas_, workers_;
  int64_t staleness_;
  bool fan_out_;
  std::mt19937 rng_;
  std::vector<Proc> procs_;
  std::vector<WorkerSim> ws_;
  std::map<std::pair<int, int>, std::deque<Msg>> links_;
  uint64_t next_id_ = 1;
  std::vector<std::vector<std::pair<size_t, uint64_t>>> reads_;  // per shard: (length, digest) seen
  Counts counts_;
  std::string trace_;  // views made and states copied, for failure messages
};

}  // namespace tether::failover_sim
