// Which server processes hold one shard, in which order, and since which
// generation: the configuration of a shard's replication chain.
//
// A shard with r replicas is held by r + 1 server processes in a chain
// (van Renesse and Schneider, "Chain Replication for Supporting High
// Throughput and Availability", OSDI 2004; the placement of Li et al.,
// "Scaling Distributed Machine Learning with the Parameter Server",
// OSDI 2014): the primary first, the tail last. At the start, shard s lives
// on processes s, s + 1, ..., s + r (mod the number of server processes).
// Updates enter at the primary and flow down the chain; an update is
// committed once the tail has it, so every member holds every committed
// update (replication/replication_log.h).
//
// Every change of the chain makes a new view with the next generation
// number, made by one process and announced to everyone:
//   - a member is gone (its connection closed with the process, or silent
//     past the liveness timeout): the first member not gone claims the
//     shard with the members that are left (Without). When the primary is
//     gone this is the replica next in the chain; when a replica is gone,
//     the primary itself;
//   - a process joins: first as the learner, which copies the tail's state
//     and follows its updates without counting for commits (WithLearner);
//     once it has caught up, the primary appends it as the new tail
//     (WithLearnerAppended).
// tether-server fans a shard's updates out instead (server/replica_link.h):
// the primary sends each update to every replica and commits what all of
// them have, which for a chain of two is the same; the views, generations
// and claimants are these. A claim after the primary leaves the members
// after the claimant out (they may hold updates it lacks), and they join it
// again as learners (replication/failover_sim.h models both).
// Everyone (members, other server processes, workers) follows the newest
// view it has seen (Newer) and refuses a message stamped with an older
// generation, naming the newer view: a former primary that was paused, not
// dead, can commit nothing more, since its successor refuses it, and steps
// down when it learns the view that left it out.
//
// The failure model: processes crash or pause (SIGSTOP, a stalled VM);
// links are FIFO (one ZeroMQ connection) and lose what was in flight only
// when a process goes. A member is taken for gone only once it is silent:
// everything it sent has arrived. A process that notices a stall of its
// own (core/stall_watch.h) first asks every process for its views and
// waits for the answers, so it never claims from a view someone already
// replaced while it was stopped. A view made by a process that died before
// its announcement reached everyone is found the same way: whoever holds
// a view whose primary is gone asks the others. Two live processes that
// each see the other silent (a network partition between server hosts)
// could each claim the shard; that is outside the model, as it is for
// every chain without an outside arbiter.
//
// Value type, no threads: copy freely.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tether {

struct ChainView {
  /// 0 before any view; the first view of a job is generation 1.
  uint64_t generation = 0;
  /// Server process slots, primary first, tail last. Never empty in a view
  /// with generation ≥ 1.
  std::vector<int> members;
  /// A process copying the shard (re-replication), or -1: it follows the
  /// tail's updates and does not count for commits.
  int learner = -1;

  int primary() const { return members.empty() ? -1 : members.front(); }
  int tail() const { return members.empty() ? -1 : members.back(); }
  bool Contains(int process) const;
  /// The member after `process` (the learner after the tail), or -1.
  int Successor(int process) const;
  /// The member before `process` (the tail before the learner), or -1.
  int Predecessor(int process) const;
  /// "generation 3: 1 → 2 (learner 4)", for logs and errors.
  std::string ToString() const;
  bool operator==(const ChainView& o) const {
    return generation == o.generation && members == o.members && learner == o.learner;
  }
};

/// Whether `a` is newer than `b`: a higher generation, or the same one
/// claimed by a higher primary slot. Two views of one generation arise
/// when a claimant dies before its announcement reached everyone and
/// another member claims from the older view. Such a lost view committed
/// nothing a live member lacks: a member that acknowledged under it knows
/// it and would not claim from the older one. The rule makes every process
/// settle on the same view.
bool Newer(const ChainView& a, const ChainView& b);

/// Shard `shard`'s first view: processes shard, shard + 1, ..., shard +
/// replicas (mod `processes`), generation 1. Requires 0 ≤ replicas <
/// processes and 0 ≤ shard < processes.
ChainView InitialChain(int shard, int processes, int replicas);

/// The view after `gone` left `view`: the others in the same order (the
/// learner kept unless it is gone), generation + 1. Empty members when
/// every member is gone: the shard cannot be survived.
ChainView Without(const ChainView& view, const std::vector<int>& gone);
/// `view` with `process` as its learner, generation + 1.
ChainView WithLearner(const ChainView& view, int process);
/// `view` with its learner appended as the tail, generation + 1.
ChainView WithLearnerAppended(const ChainView& view);

/// The process that makes the view after `gone` left: the first member of
/// `view` not gone (-1 when every member is gone).
int Claimant(const ChainView& view, const std::vector<int>& gone);

/// The exit code of a tether-server --join_as_replica process that every
/// shard it asked refused because its chain has all cluster.replicas
/// replicas: nothing was left to copy, which is no failure of the job
/// (tether-launch's replacements, launch/launcher.h).
constexpr int kExitNothingToJoin = 5;

}  // namespace tether
