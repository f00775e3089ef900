// Which server processes of a launched job another process superseded: a
// process whose shard was claimed by another process while it still runs
// (it was stopped, SIGSTOP, and never continued, or cut off from its
// chain). The launcher kills such a process and handles it as a server
// death (launch/launcher.h, launch/server_deaths.h), so the chains it left
// short get their replacements and the job does not wait for it at the end.
//
// The signal is the job's rendezvous, the one record every host shares:
// each server publishes its shard's endpoint there (entry "server-S",
// core/net/rendezvous.h), and a copy that claims the shard publishes its own
// port in its place (server/replica_host.h). So a watched process whose
// shard's entry named its endpoint and names another one now, while the
// process runs, served the shard and does no longer. An entry that names
// the process's own endpoint again (it published it again), is absent (a
// clean exit withdraws it) or holds no endpoint changes nothing; a shard
// that a process claimed is not watched for that process, so one serving a
// shard it took over is never taken for superseded. An entry is trusted
// only once it named the watched endpoint: one left by an earlier run under
// the same job id and generation names another endpoint from the start.
//
// ClaimWatch is the pure rule; ClaimPoll reads the entries (at most every
// kInterval, backing off after failed reads) and feeds them to it.
//
// Ownership: plain values; a ClaimPoll owns its Rendezvous.
// Thread-safety: none; one owner (the launcher's event loop).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/net/rendezvous.h"

namespace tether {

/// A running process whose shard another process claimed.
struct SupersededServer {
  int process = -1;      // its process number (launch/server_deaths.h)
  int shard = -1;        // the shard claimed
  std::string endpoint;  // where the process served it
  std::string claimant;  // the endpoint the shard's entry names now
};

class ClaimWatch {
 public:
  /// A job of `num_shards` shards (entries "server-0" .. "server-<num_shards - 1>").
  explicit ClaimWatch(int num_shards) : num_shards_(num_shards) {}

  /// Watches process `process` serving `shard` (0 ≤ shard < num_shards) at
  /// `endpoint`: a launched server's own shard, at the endpoint its port
  /// file names (what it publishes).
  void Watch(int process, int shard, std::string endpoint);

  /// `entries[s]`: shard s's entry now ("" when absent or not read), for
  /// num_shards shards; `running[p]`: process p runs and was not found
  /// dead yet (out of range: not running). Returns the watched processes
  /// that run, whose shard's entry named their endpoint at this or an
  /// earlier Check and names another tcp:// or ipc:// endpoint now; each
  /// process once over the watch, in the order watched.
  std::vector<SupersededServer> Check(const std::vector<std::string>& entries, const std::vector<bool>& running);

  int num_shards() const { return num_shards_; }

 private:
  struct Watched {
    int process;
    int shard;
    std::string endpoint;
    bool published = false;  // its shard's entry named its endpoint
    bool reported = false;
  };
  int num_shards_;
  std::vector<Watched> watched_;
};

/// Reads a job's server entries from its rendezvous for a ClaimWatch.
class ClaimPoll {
 public:
  using Clock = std::chrono::steady_clock;
  /// How often the entries are read while every read succeeds.
  static constexpr std::chrono::milliseconds kInterval{500};
  /// After failed reads in a row the interval doubles up to this.
  static constexpr std::chrono::milliseconds kMaxInterval{8000};

  /// `rdzv`: the job's rendezvous (taken); entries of (job_id, generation).
  /// The first Poll reads at once.
  ClaimPoll(std::unique_ptr<Rendezvous> rdzv, std::string job_id, uint64_t generation, ClaimWatch watch);

  /// When the next read is due.
  Clock::time_point next() const { return next_; }
  /// At `now` ≥ next(): reads every shard's entry (a file read each, or one
  /// store round trip each, bounded by about a second when the store does
  /// not answer) and returns ClaimWatch::Check's answer for `running`; before
  /// next(): nothing. A failed read counts as an absent entry, and logs a
  /// WARNING the first time in a row.
  std::vector<SupersededServer> Poll(Clock::time_point now, const std::vector<bool>& running);

  const ClaimWatch& watch() const { return watch_; }
  std::chrono::milliseconds interval() const { return interval_; }

 private:
  std::unique_ptr<Rendezvous> rdzv_;
  std::string job_id_;
  uint64_t generation_;
  ClaimWatch watch_;
  Clock::time_point next_;
  std::chrono::milliseconds interval_ = kInterval;
  bool failing_ = false;
};

}  // namespace tether
