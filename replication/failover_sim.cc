// The simulation of replication/failover_sim.h: processes, workers and
// the links between them, each a FIFO queue delivered in a random order.
#include "replication/failover_sim_internal.h"

#include <algorithm>
#include <iterator>

#include <gtest/gtest.h>

namespace tether {
namespace failover_sim {

// The members of `v` that `observer` finds gone: dead or paused, and
// silent: everything they sent it has arrived (a liveness timeout passes
// only after the last message; what a dead process had in flight may also
// be lost, Kill).
std::vector<int> Sim::GoneOf(const ChainView& v, int observer) const {
  auto gone_to = [&](int q) {
    if (Up(q)) return false;
    const auto it = links_.find({q, observer});
    return it == links_.end() || it->second.empty();
  };
  std::vector<int> gone;
  for (int m : v.members)
    if (gone_to(m)) gone.push_back(m);
  if (v.learner >= 0 && gone_to(v.learner)) gone.push_back(v.learner);
  return gone;
}

bool Sim::DeliverOne() {
  std::vector<std::pair<int, int>> ready;
  for (const auto& [link, q] : links_) {
    if (q.empty()) continue;
    const int to = link.second;
    if (to < kWorkerBase && procs_[to].status != Status::kLive) continue;
    ready.push_back(link);
  }
  if (ready.empty()) return false;
  const auto link = ready[rng_() % ready.size()];
  Msg m = std::move(links_[link].front());
  links_[link].pop_front();
  Deliver(link.first, link.second, m);
  return true;
}

void Sim::Deliver(int from, int to, const Msg& m) {
  if (to >= kWorkerBase) {
    OnWorker(ws_[to - kWorkerBase], from, m);
  } else {
    OnServer(to, from, m);
  }
}

void Sim::LearnView(int p, int shard, const ChainView& v) {
  Proc& proc = procs_[p];
  if (!Newer(v, proc.views[shard])) return;
  proc.views[shard] = v;
  auto it = proc.members.find(shard);
  const bool in = v.Contains(p) || v.learner == p;
  if (it == proc.members.end()) {
    if (!in) return;
    it = proc.members.emplace(shard, std::make_unique<Member>(p, workers_)).first;
  }
  Member& mem = *it->second;
  const bool was_primary = mem.log.role() == ReplicationLog::Role::kPrimary;
  mem.log.Adopt(MemberView(v, p));
  if (fan_out_) {
    // Each replica is sent again what is kept: entries sent under the
    // older view may be refused as stale.
    mem.sent.clear();
    for (auto it2 = mem.acked.begin(); it2 != mem.acked.end();)
      it2 = v.Contains(it2->first) ? std::next(it2) : mem.acked.erase(it2);
  }
  if (!in) {
    // Left out: everything held is answered with the newer view, and the
    // state goes (it can come back only as a learner, from a copy).
    if (was_primary) ++counts_.deposed;
    for (uint64_t id : mem.waiters.DropAll()) {
      Msg view = Make(Msg::kView, shard, v);
      Send(p, mem.held[id].worker + kWorkerBase, view);
    }
    for (auto& [w, pull] : mem.pulls) Send(p, w + kWorkerBase, Make(Msg::kView, shard, v));
    proc.members.erase(it);
    if (fan_out_) Rejoin(p, shard, v);
    return;
  }
  mem.caught_up_sent = false;
  AfterChange(p, shard);
}

// After a view change or new entries: give the learner its copy, forward,
// acknowledge up the chain, release what the commit point allows.
void Sim::AfterChange(int p, int shard) {
  Member& mem = *procs_[p].members.at(shard);
  ReplicationLog& log = mem.log;
  const ChainView& v = log.view();
  if (v.tail() == p && v.learner >= 0 && log.successor() < 0) {
    Msg st = Make(Msg::kState, shard, v);
    st.value = log.applied();
    st.state = std::make_shared<ShardState>(mem.state);
    trace_ += "[" + std::to_string(p) + " copies shard " + std::to_string(shard) + " at " +
              std::to_string(st.value) + " to " + std::to_string(v.learner) + "] ";
    Send(p, v.learner, st);
    log.StartLearnerAt(log.applied());
  }
  if (fan_out_ && log.role() == ReplicationLog::Role::kPrimary && v.members.size() > 1) {
    FanOut(p, shard);
  } else if (const std::vector<LogEntry> out = log.TakeForward(); !out.empty()) {
    Msg f = Make(Msg::kForward, shard, v);
    f.entries = out;
    Send(p, log.successor(), f);
  }
  const int pred = v.Predecessor(p);
  if (pred >= 0) {
    Msg a = Make(Msg::kChainAck, shard, v);
    a.value = log.AckValue();
    Send(p, pred, a);
  }
  if (v.tail() == p && log.LearnerCaughtUp() && !mem.caught_up_sent) {
    mem.caught_up_sent = true;
    Send(p, v.primary(), Make(Msg::kCaughtUp, shard, v));
  }
  if (log.role() == ReplicationLog::Role::kPrimary) {
    ServePulls(p, shard);
    ReleaseCommitted(p, shard);
  }
}

void Sim::Announce(int p, int shard, const ChainView& v) {
  trace_ += "[" + std::to_string(p) + " makes shard " + std::to_string(shard) + " " + v.ToString() + "] ";
  for (int q = 0; q < static_cast<int>(procs_.size()); ++q)
    if (q != p) Send(p, q, Make(Msg::kView, shard, v));
  for (int r = 0; r < workers_; ++r) Send(p, r + kWorkerBase, Make(Msg::kView, shard, v));
  LearnView(p, shard, v);
}

void Sim::ServePulls(int p, int shard) {
  Member& mem = *procs_[p].members.at(shard);
  std::vector<std::pair<int, Msg>> still;
  for (auto& [w, pull] : mem.pulls) {
    if (staleness_ >= 0 && mem.state.MinClock() < pull.clock - staleness_) {
      still.emplace_back(w, pull);
      continue;
    }
    Msg reply = Make(Msg::kPullReply, shard, mem.log.view());
    reply.id = pull.id;
    reply.clock = pull.clock;
    reply.state = std::make_shared<ShardState>(mem.state);
    const uint64_t id = next_id_++;
    mem.held[id] = Member::Held{w, reply};
    mem.waiters.Hold(mem.log.applied(), id);
  }
  mem.pulls = std::move(still);
}

void Sim::ReleaseCommitted(int p, int shard) {
  Member& mem = *procs_[p].members.at(shard);
  for (uint64_t id : mem.waiters.Release(mem.log.commit())) {
    Member::Held h = std::move(mem.held[id]);
    mem.held.erase(id);
    h.reply.view = mem.log.view();
    Send(p, h.worker + kWorkerBase, h.reply);
  }
}

// A worker's update or pull at the process it takes for the primary.
void Sim::Primary(int p, int from, const Msg& m) {
  const int shard = m.shard;
  auto it = procs_[p].members.find(shard);
  if (it == procs_[p].members.end() || it->second->log.role() != ReplicationLog::Role::kPrimary) {
    Send(p, from, Make(Msg::kView, shard, procs_[p].views[shard]));
    return;
  }
  Member& mem = *it->second;
  const int rank = from - kWorkerBase;
  if (m.kind == Msg::kPull) {
    mem.pulls.emplace_back(rank, m);
    ServePulls(p, shard);
    ReleaseCommitted(p, shard);
    return;
  }
  switch (mem.state.dedup.Check(rank, m.update.seq)) {
    case UpdateDedup::Verdict::kGap:
      ADD_FAILURE() << "rank " << rank << " update " << m.update.seq << " reached process " << p << " ("
                    << mem.log.view().ToString() << ", applied " << mem.log.applied() << ", last of that rank "
                    << mem.state.dedup.last(rank) << ") after a gap; " << trace_;
      return;
    case UpdateDedup::Verdict::kDuplicate:
      ++counts_.duplicates;
      break;
    case UpdateDedup::Verdict::kNew: {
      const uint64_t seq = mem.log.Append(Encode(m.update));
      mem.state.Apply(m.update, seq);
      break;
    }
  }
  Msg ack = Make(Msg::kAck, shard, mem.log.view());
  ack.value = m.update.seq;
  const uint64_t id = next_id_++;
  mem.held[id] = Member::Held{rank, ack};
  mem.waiters.Hold(mem.log.applied(), id);
  AfterChange(p, shard);
}

void Sim::OnServer(int p, int from, const Msg& m) {
  LearnView(p, m.shard, m.view);
  if (Newer(procs_[p].views[m.shard], m.view) && m.kind != Msg::kUpdate && m.kind != Msg::kPull &&
      m.kind != Msg::kQuery)
    Send(p, from, Make(Msg::kView, m.shard, procs_[p].views[m.shard]));
  auto it = procs_[p].members.find(m.shard);
  Member* mem = it == procs_[p].members.end() ? nullptr : it->second.get();
  switch (m.kind) {
    case Msg::kUpdate:
    case Msg::kPull:
      Primary(p, from, m);
      return;
    case Msg::kView:
      if (m.answer && procs_[p].answers_due[from] > 0) --procs_[p].answers_due[from];
      return;  // learned above
    case Msg::kQuery: {
      Msg answer = Make(Msg::kView, m.shard, procs_[p].views[m.shard]);
      answer.answer = true;
      Send(p, from, answer);
      return;
    }
    case Msg::kForward: {
      if (!mem) return;
      for (const LogEntry& e : m.entries) {
        const auto receipt = mem->log.Receive(from, m.view, e);
        if (receipt == ReplicationLog::Receipt::kApply) {
          const Update u = Decode(e.payload);
          if (mem->state.dedup.Check(u.rank, u.seq) != UpdateDedup::Verdict::kNew)
            ADD_FAILURE() << "process " << p << " (" << static_cast<int>(mem->log.role()) << ", "
                          << mem->log.view().ToString() << ") got entry " << e.seq << " = rank " << u.rank
                          << " update " << u.seq << " from " << from << " (" << m.view.ToString()
                          << "), its last of that rank " << mem->state.dedup.last(u.rank) << " at entry "
                          << mem->state.dedup.last_log_seq(u.rank) << "; " << trace_;
          mem->state.Apply(u, e.seq);
        }
        if (receipt == ReplicationLog::Receipt::kStale) {
          ++counts_.stale_refused;
          Send(p, from, Make(Msg::kView, m.shard, mem->log.view()));
          return;
        }
        EXPECT_NE(receipt, ReplicationLog::Receipt::kGap) << "process " << p << " got entry " << e.seq << " from "
                                                          << from << " after a gap; its applied " << mem->log.applied() << " role "
                                                          << static_cast<int>(mem->log.role()) << " in "
                                                          << mem->log.view().ToString() << ", sender's "
                                                          << m.view.ToString();
      }
      AfterChange(p, m.shard);
      return;
    }
    case Msg::kChainAck:
      if (fan_out_ && mem && mem->log.role() == ReplicationLog::Role::kPrimary && from != mem->log.view().learner)
        OnFanOutAck(p, from, m);
      else if (mem && mem->log.OnAck(from, m.view, m.value))
        AfterChange(p, m.shard);
      return;
    case Msg::kState:
      if (!mem || mem->log.role() != ReplicationLog::Role::kLearner || from != mem->log.view().tail()) return;
      mem->state = *m.state;
      mem->log.ResetTo(m.value);
      AfterChange(p, m.shard);
      return;
    case Msg::kJoin:
      if (mem && mem->log.role() == ReplicationLog::Role::kPrimary && mem->log.view().learner < 0 &&
          !mem->log.view().Contains(from) && Up(from) && (!fan_out_ || mem->log.view().members.size() == 1))
        Announce(p, m.shard, WithLearner(mem->log.view(), from));
      return;
    case Msg::kCaughtUp:
      if (mem && mem->log.role() == ReplicationLog::Role::kPrimary &&
          m.view.generation == mem->log.view().generation && m.view.primary() == mem->log.view().primary() &&
          mem->log.view().learner >= 0) {
        ++counts_.joins;
        Announce(p, m.shard, WithLearnerAppended(mem->log.view()));
      }
      return;
    default:
      ADD_FAILURE() << "server got message kind " << m.kind;
  }
}

void Sim::SendUpdate(WorkerSim& w, int shard, const Update& u) {
  Msg m = Make(Msg::kUpdate, shard, w.views[shard]);
  m.update = u;
  Send(w.rank + kWorkerBase, w.views[shard].primary(), m);
}

void Sim::OnWorker(WorkerSim& w, int from, const Msg& m) {
  const int s = m.shard;
  if (Newer(w.views[s], m.view)) Send(w.rank + kWorkerBase, from, Make(Msg::kView, s, w.views[s]));
  if (Newer(m.view, w.views[s])) {
    const int old_primary = w.views[s].primary();
    w.views[s] = m.view;
    if (m.view.primary() != old_primary) {
      ++counts_.failovers;
      for (const auto& [seq, u] : w.windows[s].unacked()) {
        ++counts_.resends;
        SendUpdate(w, s, u);
      }
      if (w.pulling && w.pull_shard == s) {
        Msg pull = Make(Msg::kPull, s, w.views[s]);
        pull.id = w.pull_id;
        pull.clock = w.clock;
        Send(w.rank + kWorkerBase, w.views[s].primary(), pull);
      }
    }
  }
  if (m.kind == Msg::kAck) w.windows[s].Ack(m.value);
  if (m.kind == Msg::kPullReply && w.pulling && m.id == w.pull_id) {
    CheckRead(w, m);
    w.pulling = false;
  }
}

void Sim::CheckRead(const WorkerSim& w, const Msg& m) {
  ++counts_.reads;
  const ShardState& seen = *m.state;
  for (int k = 0; k < workers_; ++k) {
    if (k == w.rank) {
      EXPECT_EQ(seen.rows[k], w.sent_pushes[m.shard]) << "read-my-writes: worker " << k << " shard " << m.shard;
    } else if (staleness_ >= 0) {
      EXPECT_GE(seen.rows[k], m.clock - staleness_)
          << "worker " << w.rank << " at clock " << m.clock << " misses pushes of worker " << k;
    }
  }
  reads_[m.shard].emplace_back(seen.order.size(), seen.digests.back());
}

void Sim::WorkerQuery(WorkerSim& w) {
  for (int s = 0; s < shards_; ++s) {
    if (procs_[w.views[s].primary()].status != Status::kDead || w.queried[s] == w.views[s]) continue;
    w.queried[s] = w.views[s];
    Query(w.rank + kWorkerBase, s);
  }
}

void Sim::WorkerStep(WorkerSim& w, bool may_pull) {
  WorkerQuery(w);
  if (w.pulling) return;
  if (may_pull && rng_() % 3 == 0) {
    w.pulling = true;
    w.pull_shard = static_cast<int>(rng_() % shards_);
    w.pull_id = next_id_++;
    Msg pull = Make(Msg::kPull, w.pull_shard, w.views[w.pull_shard]);
    pull.id = w.pull_id;
    pull.clock = w.clock;
    Send(w.rank + kWorkerBase, w.views[w.pull_shard].primary(), pull);
    return;
  }
  for (int s = 0; s < shards_; ++s) {
    for (bool clock : {false, true}) {
      const Update u{w.rank, w.windows[s].next(), clock};
      w.windows[s].Add(u);
      if (!clock) ++w.sent_pushes[s];
      SendUpdate(w, s, u);
    }
  }
  ++w.clock;
}

// Process p notices the members of its views that are gone (dead or
// paused) and makes the next view where it is the claimant.
void Sim::Suspect(int p) {
  if (procs_[p].hearing_out) {
    for (const auto& [q, due] : procs_[p].answers_due)
      if (due > 0 && procs_[q].status != Status::kDead) return;
    procs_[p].hearing_out = false;
  }
  for (int s = 0; s < shards_; ++s) {
    const ChainView& v = procs_[p].views[s];
    const std::vector<int> gone = GoneOf(v, p);
    if (gone.empty()) continue;
    if (Claimant(v, gone) == p) {
      Announce(p, s, ClaimView(v, gone, p));
    } else if (v.Contains(p) || v.learner == p) {
      Query(p, s);
    }
  }
}

// Asks every other process for its view of `shard` (an announcement may
// have been lost with the process that made it).
void Sim::Query(int from, int shard) {
  const ChainView& v = from >= kWorkerBase ? ws_[from - kWorkerBase].views[shard] : procs_[from].views[shard];
  for (int q = 0; q < static_cast<int>(procs_.size()); ++q) {
    if (q == from || procs_[q].status == Status::kDead) continue;
    if (from < kWorkerBase) ++procs_[from].answers_due[q];
    Send(from, q, Make(Msg::kQuery, shard, v));
  }
}

void Sim::Resume(int p) {
  procs_[p].status = Status::kLive;
  procs_[p].hearing_out = true;
  for (int s = 0; s < shards_; ++s) Query(p, s);
}

void Sim::CountKill(int p) {
  for (int s = 0; s < shards_; ++s) {
    ChainView newest;
    for (const Proc& q : procs_)
      if (Newer(q.views[s], newest)) newest = q.views[s];
    if (newest.learner == p) ++counts_.killed_learners;
    if (!newest.Contains(p)) continue;
    if (newest.primary() == p) {
      ++counts_.killed_primaries;
    } else if (newest.tail() == p) {
      ++counts_.killed_tails;
    } else {
      ++counts_.killed_middles;
    }
  }
}

void Sim::Kill() {
  const int p = static_cast<int>(rng_() % procs_.size());
  if (procs_[p].status == Status::kDead) return;
  // Only what can be survived: every shard keeps a member not dead.
  for (int s = 0; s < shards_; ++s) {
    ChainView newest;
    for (const Proc& q : procs_)
      if (Newer(q.views[s], newest)) newest = q.views[s];
    int left = 0;
    for (int m : newest.members) left += m != p && procs_[m].status != Status::kDead;
    if (left == 0) return;
  }
  CountKill(p);
  procs_[p].status = Status::kDead;
  for (auto& [link, q] : links_)
    if (link.second == p || (link.first == p && rng_() % 2)) q.clear();
}

void Sim::Join() {
  for (int s = 0; s < shards_; ++s) {
    ChainView newest;
    for (const Proc& q : procs_)
      if (Newer(q.views[s], newest)) newest = q.views[s];
    if (static_cast<int>(newest.members.size()) > replicas_ || newest.learner >= 0) continue;
    if (fan_out_ && newest.members.size() > 1) continue;  // a fan-out shard takes a learner only alone
    const int p = AddProcess();
    procs_[p].views = procs_[newest.primary()].views;
    Send(p, newest.primary(), Make(Msg::kJoin, s, newest));
    return;
  }
}

void Sim::Run(int steps, bool pauses, bool joins) {
  reads_.assign(shards_, {});
  for (int i = 0; i < steps; ++i) {
    const uint32_t dice = rng_() % 100;
    if (dice < 40) {
      DeliverOne();
    } else if (dice < 70) {
      WorkerStep(ws_[rng_() % workers_], true);
    } else if (dice < 72) {
      Kill();
    } else if (dice < 76 && pauses) {
      const int p = static_cast<int>(rng_() % procs_.size());
      if (procs_[p].status == Status::kLive) {
        procs_[p].status = Status::kPaused;
      } else if (procs_[p].status == Status::kPaused) {
        Resume(p);
      }
    } else if (dice < 78 && joins) {
      Join();
    } else {
      const int p = static_cast<int>(rng_() % procs_.size());
      if (Up(p)) Suspect(p);
    }
  }
}

// Everyone wakes; failures are noticed and messages delivered until nothing
// moves; workers not waiting on a pull clock on until every pull the bound
// holds back can be answered.
void Sim::Quiesce() {
  for (int p = 0; p < static_cast<int>(procs_.size()); ++p)
    if (procs_[p].status == Status::kPaused) Resume(p);
  for (int round = 0; round < 100000; ++round) {
    bool moved = DeliverOne();
    if (!moved) {
      for (int p = 0; p < static_cast<int>(procs_.size()); ++p)
        if (Up(p)) Suspect(p);
      moved = DeliverOne();
    }
    if (!moved) {
      for (WorkerSim& w : ws_) WorkerQuery(w);
      moved = DeliverOne();
    }
    if (!moved) {
      for (WorkerSim& w : ws_)
        if (!w.pulling && std::any_of(ws_.begin(), ws_.end(), [](const WorkerSim& o) { return o.pulling; })) {
          WorkerStep(w, false);
          moved = true;
        }
    }
    if (!moved) return;
  }
  ADD_FAILURE() << "the schedule did not settle";
}

void Sim::Check() {
  for (const WorkerSim& w : ws_) {
    EXPECT_FALSE(w.pulling) << "worker " << w.rank << " never got its pull answered";
    for (int s = 0; s < shards_; ++s)
      EXPECT_TRUE(w.windows[s].empty()) << "worker " << w.rank << ": " << w.windows[s].unacked().size()
                                        << " update(s) to shard " << s << " never acknowledged";
  }
  for (int s = 0; s < shards_; ++s) {
    ChainView newest;
    for (const Proc& q : procs_)
      if (q.status != Status::kDead && Newer(q.views[s], newest)) newest = q.views[s];
    ASSERT_FALSE(newest.members.empty());
    const ShardState& ref = procs_[newest.primary()].members.at(s)->state;
    for (int m : newest.members) {
      if (!Up(m))
        for (size_t q = 0; q < procs_.size(); ++q)
          ADD_FAILURE() << "process " << q << " status " << static_cast<int>(procs_[q].status) << " hearing_out "
                        << procs_[q].hearing_out << " view " << procs_[q].views[s].ToString() << " member "
                        << procs_[q].members.count(s);
      ASSERT_TRUE(Up(m)) << "shard " << s << " ends with a dead member in " << newest.ToString();
      const ShardState& st = procs_[m].members.at(s)->state;
      EXPECT_EQ(st.digests.back(), ref.digests.back()) << "shard " << s << " member " << m;
      EXPECT_EQ(st.order.size(), ref.order.size());
      EXPECT_EQ(st.dedup, ref.dedup);
    }
    // Exactly once, in each worker's order: ranks' numbers are 1, 2, ...
    std::vector<uint64_t> next(workers_, 1);
    for (const Update& u : ref.order) EXPECT_EQ(u.seq, next[u.rank]++) << "shard " << s << " rank " << u.rank;
    for (const WorkerSim& w : ws_) {
      EXPECT_EQ(next[w.rank], w.windows[s].next()) << "shard " << s << " rank " << w.rank;
      EXPECT_EQ(ref.rows[w.rank], w.sent_pushes[s]);
      EXPECT_EQ(ref.clocks[w.rank], w.clock);
    }
    for (const auto& [length, digest] : reads_[s]) {
      ASSERT_LE(length, ref.order.size());
      EXPECT_EQ(digest, ref.digests[length]) << "a read of shard " << s << " saw an update the final log lacks";
    }
  }
}

}  // namespace failover_sim
}  // namespace tether
