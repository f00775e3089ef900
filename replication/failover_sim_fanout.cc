// The simulation's fan-out replication (replication/failover_sim.h
// ScheduleOptions::fan_out), as tether-server replicates a shard: the
// primary sends each entry to every replica and commits the least entry all
// of them acknowledged; a claim after the primary leaves the copies after
// the claimant out, and they join it again as learners.
#include <algorithm>
#include <limits>

#include "replication/failover_sim_internal.h"

namespace tether::failover_sim {

ChainView Sim::MemberView(const ChainView& v, int p) const {
  if (!fan_out_ || v.primary() == p || v.learner == p || !v.Contains(p)) return v;
  // A replica takes entries from the primary and acknowledges to it: the
  // primary is its predecessor, and it is its own tail (its commit point
  // is what it applied). The generation and primary are the view's, so
  // the primary's messages are its own view's.
  ChainView own;
  own.generation = v.generation;
  own.members = {v.primary(), p};
  return own;
}

void Sim::FanOut(int p, int shard) {
  Member& mem = *procs_[p].members.at(shard);
  const ChainView v = mem.log.view();
  (void)mem.log.TakeForward();  // the log's own mark; each replica has its own (sent)
  for (size_t i = 1; i < v.members.size(); ++i) {
    const int to = v.members[i];
    std::vector<LogEntry> out = mem.log.EntriesAfter(mem.sent[to]);
    if (out.empty()) continue;
    mem.sent[to] = out.back().seq;
    Msg f = Make(Msg::kForward, shard, v);
    f.entries = std::move(out);
    Send(p, to, f);
  }
}

void Sim::OnFanOutAck(int p, int from, const Msg& m) {
  Member& mem = *procs_[p].members.at(m.shard);
  const ChainView v = mem.log.view();
  if (m.view.generation != v.generation || m.view.primary() != v.primary() || from == p || !v.Contains(from)) return;
  mem.acked[from] = std::max(mem.acked[from], m.value);
  uint64_t least = std::numeric_limits<uint64_t>::max();
  for (size_t i = 1; i < v.members.size(); ++i) least = std::min(least, mem.acked[v.members[i]]);
  if (mem.log.OnAck(v.members[1], v, least)) AfterChange(p, m.shard);
}

ChainView Sim::ClaimView(const ChainView& v, std::vector<int> gone, int p) const {
  if (!fan_out_ || std::find(gone.begin(), gone.end(), v.primary()) == gone.end()) return Without(v, gone);
  // The claimant goes on alone: a copy after it may hold entries it never
  // received (none of them committed).
  for (int m : v.members)
    if (m != p) gone.push_back(m);
  return Without(v, gone);
}

void Sim::Rejoin(int p, int shard, const ChainView& v) {
  if (!Up(p) || v.primary() == p || v.learner == p || v.members.empty()) return;
  ++counts_.rejoins;
  Send(p, v.primary(), Make(Msg::kJoin, shard, v));
}

}  // namespace tether::failover_sim
