// Whether a launched job can go on after one of its server processes died,
// and which shards want a new replica: the launcher's rules
// (launch/launcher.h), kept apart from its event loop.
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
// loses its shard.
//
// Re-replication: a shard whose chain is short of r + 1 live holders gets
// one replacement process per holder missing (tether-server
// --join_as_replica --shard=N), each of which copies the shard from its
// primary and joins the chain as its tail (a shard takes one joining
// process at a time: the others, and a later copy that joins its claimant
// again, are asked to wait their turn, server/replica_host.h). The
// replacements are processes num_servers, num_servers + 1, ... in the order
// they were started; each holds a copy of exactly one shard and no shard of
// its own. A replacement counts as a holder from its start: one whose
// primary dies before it caught up ends with an error (it cannot claim), and
// its own death then loses the shard. Its death is judged like any other:
// a shard it served moves to the next live holder, and a shard it was the
// replica of is left short again. A replacement whose shard's primary
// refused it because the chain has all its r replicas (a process the
// launcher did not start joined it; tether-server exits kExitNothingToJoin)
// was not needed (NotNeeded): it held nothing. A primary that has not yet
// noticed a death refuses so too, so the shard is planned again, up to
// kFullRefusals refusals since its chain last changed.
//
// The job's end: once every worker finished, a replacement that does not
// serve the shard it joined, whose shard's serving process has exited, has
// nothing left to copy or follow (LeftOverReplacements): it may still wait
// for a primary that is gone (cluster.startup_timeout_ms), so the launcher
// stops it rather than wait for it.
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
  int process = -1;         // the server process (its --shard, or a replacement's number) that died
  bool survivable = false;  // every shard still has a live holder
  /// Shards the dead process served (its own; shards it had taken over)
  /// and the process that serves each now.
  struct Move {
    int shard = -1;
    int to = -1;
  };
  std::vector<Move> moved;
  /// Shards left on one live process (no replica any more), moved or not.
  std::vector<int> unreplicated;
  /// Shards it held whose chain is short of replicas + 1 live holders now
  /// (the unreplicated ones among them), ascending.
  std::vector<int> short_chains;
  /// Shards no live process holds: the job cannot go on.
  std::vector<int> lost;
};

/// The replacements to start now (ServerDeaths::PlanReplacements).
struct ReplacementPlan {
  std::vector<int> start;        // a shard per replacement to start (a shard short of k holders k times), ascending
  std::vector<int> over_limit;   // short shards (once each) that get none or too few: the limit is reached
};

/// The shards of a job with `num_servers` server processes and `replicas`
/// copies of each, which of its processes died, and the replacements
/// started. Requires 0 ≤ replicas < num_servers (a validated cluster
/// config) and num_servers ≥ 1.
class ServerDeaths {
 public:
  ServerDeaths(int num_servers, int replicas);

  /// Records that server process `process` (0 ≤ process < num_processes())
  /// died and returns what that means. A process that died already: the
  /// same shards, nothing moved (survivable unless a shard is lost).
  ServerDeathVerdict Died(int process);

  /// One replacement per holder a shard's chain lacks (live holders, the
  /// replacements started among them, short of replicas + 1), shards
  /// ascending, when at most `max_replacements` may be started over the job
  /// (replacements_started() of them were). A lost shard gets none, nor one
  /// whose primary refused kFullRefusals replacements as full (NotNeeded)
  /// since a death last touched it. With replicas = 0 every list is empty.
  ReplacementPlan PlanReplacements(int max_replacements) const;
  /// Records a replacement started to join `shard` (which has a live
  /// holder, 0 ≤ shard < num_servers) as its replica, appended to the
  /// shard's chain, and returns its process number (num_servers + the
  /// number of replacements before it).
  int Replaced(int shard);
  /// Records that replacement `process` was refused because its shard's
  /// chain is full: it leaves the shard's holders (and the processes that
  /// ever held it) and is no death. Returns whether the shard is planned
  /// again: false once kFullRefusals replacements of it were refused so
  /// since a death last changed its chain.
  bool NotNeeded(int process);
  static constexpr int kFullRefusals = 3;

  bool dead(int process) const { return dead_[process]; }
  /// The process serving `shard` now, or -1 when it is lost.
  int Serving(int shard) const { return views_[shard].primary(); }
  /// The live holders of `shard`, the serving one first.
  const std::vector<int>& Holders(int shard) const { return views_[shard].members; }
  /// Every process that ever held `shard`: its first chain, then the
  /// replacements that joined it, in order.
  const std::vector<int>& held(int shard) const { return held_[shard]; }
  /// The shard replacement `process` joined, or -1 for a process of the
  /// job's start.
  int CopyOf(int process) const;
  /// "server 1" or "replacement 3".
  std::string ProcessName(int process) const;
  int replicas() const { return replicas_; }
  int num_servers() const { return num_servers_; }
  int num_processes() const { return static_cast<int>(dead_.size()); }
  int replacements_started() const { return num_processes() - num_servers_; }

 private:
  int replicas_;
  int num_servers_;
  std::vector<bool> dead_;                // per process, replacements after the job's own
  std::vector<ChainView> views_;          // per shard: its live holders in chain order
  std::vector<std::vector<int>> held_;    // per shard: every process that ever held it
  std::vector<int> copy_of_;              // per replacement: the shard it joined
  std::vector<int> full_refusals_;        // per shard: replacements refused as full since its chain last changed
};

/// The launcher's log text of `verdict` (after the child's own "server 0
/// (pid N) was killed by ..."), e.g. "shard 0 is served by server 1's
/// replica now; shard 0 has no replica left" or "shard 0 is lost: every
/// server process that held it (0, 1) is dead".
std::string DescribeServerDeath(const ServerDeathVerdict& verdict, const ServerDeaths& deaths);

/// After every worker finished: the replacements (process numbers,
/// ascending) that `running` says still run, that do not serve the shard
/// they joined, and whose shard's serving process no longer runs (or that
/// shard is lost). `running[p]` is whether process p (a server by shard,
/// then the replacements by number) has not exited yet, normally or not;
/// it must have deaths.num_processes() entries. Such a replacement never
/// caught up, or its primary ended the shard: nothing waits on it.
std::vector<int> LeftOverReplacements(const ServerDeaths& deaths, const std::vector<bool>& running);

/// The shards, ascending, that `deaths` says some process still holds but
/// whose every live holder is stopped (`stopped[p]`: process p, a server by
/// shard, then the replacements by number, runs but does not run on:
/// SIGSTOP; deaths.num_processes() entries). No process serves such a
/// shard: the workers give it up (cluster.liveness_timeout_ms), and the
/// job fails on it, whatever process then exits first on the job's abort.
std::vector<int> ShardsOnStoppedHolders(const ServerDeaths& deaths, const std::vector<bool>& stopped);

/// The launcher's words for ShardsOnStoppedHolders's `shards`: "shard 1 is
/// lost: every server process left that holds it (1) is stopped"; "" for
/// none. Several: joined with "; ".
std::string DescribeStoppedShards(const std::vector<int>& shards, const ServerDeaths& deaths);

}  // namespace tether
