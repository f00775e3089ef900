// ScheduleCounts and RunSchedule of replication/failover_sim.h: one
// schedule of the simulation (failover_sim.cc) run, settled and checked.
#include "replication/failover_sim_internal.h"

namespace tether {

ScheduleCounts& ScheduleCounts::operator+=(const ScheduleCounts& o) {
  reads += o.reads;
  failovers += o.failovers;
  stale_refused += o.stale_refused;
  resends += o.resends;
  duplicates += o.duplicates;
  joins += o.joins;
  deposed += o.deposed;
  rejoins += o.rejoins;
  killed_primaries += o.killed_primaries;
  killed_middles += o.killed_middles;
  killed_tails += o.killed_tails;
  killed_learners += o.killed_learners;
  return *this;
}

ScheduleCounts RunSchedule(const ScheduleOptions& o) {
  failover_sim::Sim sim(o.processes, o.replicas, o.workers, o.staleness, o.seed, o.fan_out);
  sim.Run(o.steps, o.pauses, o.joins);
  sim.Quiesce();
  sim.Check();
  return sim.counts();
}

}  // namespace tether
