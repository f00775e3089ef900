// Whether a launched job can go on after one of its server processes died:
// the launcher's rule (launch/launcher.h), kept apart from its event loop.
//
// With cluster.replicas = r, shard s is held by the server processes of its
// chain s, s + 1, ..., s + r (mod S), the primary first
// (replication/chain_view.h, InitialChain; van Renesse and Schneider, OSDI
// 2004), and served by the first of them still alive: when the primary dies,
// the replica next in the chain claims the shard and the workers follow it.
// A death can be survived when every shard still has a live holder; it
// cannot when the dead process was the last live holder of some shard (its
// own shard with r = 1 when its successor s + 1 died before, or the shard of
// its predecessor that it had taken over). With r = 0 every server death
// loses its shard. No process is started in a dead one's place: a shard
// whose holders die one by one runs on fewer copies to the end.
//
// Ownership: plain values.
// Thread-safety: none; one owner (the launcher's event loop).
#pragma once

#include <string>
#include <vector>

#include "replication/chain_view.h"

namespace tether {

/// What one server process's death means for the job's shards.
struct ServerDeathVerdict {
  int process = -1;         // the server process (its --shard) that died
  bool survivable = false;  // every shard still has a live holder
  /// Shards the dead process served (its own; shards it had taken over)
  /// and the process whose replica serves each now.
  struct Move {
    int shard = -1;
    int to = -1;
  };
  std::vector<Move> moved;
  /// Shards left on one live process (no replica any more), moved or not.
  std::vector<int> unreplicated;
  /// Shards no live process holds: the job cannot go on.
  std::vector<int> lost;
};

/// The shards of a job with `num_servers` server processes and `replicas`
/// copies of each, and which of its processes died. Requires 0 ≤ replicas <
/// num_servers (a validated cluster config) and num_servers ≥ 1.
class ServerDeaths {
 public:
  ServerDeaths(int num_servers, int replicas);

  /// Records that server process `process` (0 ≤ process < num_servers)
  /// died and returns what that means. A process that died already: the
  /// same shards, nothing moved (survivable unless a shard is lost).
  ServerDeathVerdict Died(int process);

  bool dead(int process) const { return dead_[process]; }
  /// The process serving `shard` now, or -1 when it is lost.
  int Serving(int shard) const { return views_[shard].primary(); }
  int replicas() const { return replicas_; }
  int num_servers() const { return static_cast<int>(dead_.size()); }

 private:
  int replicas_;
  std::vector<bool> dead_;
  std::vector<ChainView> views_;  // per shard: its live holders in chain order
};

/// The launcher's log text of `verdict` (after the child's own "server 0
/// (pid N) was killed by ..."), e.g. "shard 0 is served by server 1's
/// replica now; shard 0 has no replica left" or "shard 0 is lost: every
/// server process that held it (0, 1) is dead".
std::string DescribeServerDeath(const ServerDeathVerdict& verdict, const ServerDeaths& deaths);

}  // namespace tether
